// The landing page: opens the native WebSocket, shows the welcome message
// and measures the round trip of a protocol-level ping.
const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;
const $ = (id) => document.getElementById(id);
$('url').textContent = url;

const ws = new WebSocket(url, 'presenced.v1');
let sentAt = 0;

ws.addEventListener('open', () => {
  $('state').textContent = 'open';
  $('state').className = 'state open';
});
ws.addEventListener('message', (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.type === 'welcome') {
    $('welcome').textContent = JSON.stringify(msg, null, 2);
    sentAt = performance.now();
    ws.send(JSON.stringify({ type: 'ping', ref: 'page' }));
  } else if (msg.type === 'pong') {
    $('rtt').textContent = `${(performance.now() - sentAt).toFixed(1)} ms`;
    document.body.dataset.ready = 'yes';
  }
});
ws.addEventListener('close', (ev) => {
  $('state').textContent = `closed (${ev.code})`;
  $('state').className = 'state closed';
});
