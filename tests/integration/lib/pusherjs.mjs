// pusherjs.mjs - waits and recorders for pusher-js clients, shared by the
// Pusher tests on one node and across nodes.
//   connected(p)        resolves with the socket_id once p is connected
//                       (rejects when pusher-js gives up: 'failed')
//   subscribed(ch, ms)  resolves with subscription_succeeded's members, or
//                       rejects on subscription_error or after ms
//   recordMembers(ch)   the channel's member_added / member_removed, in
//                       order, as ['added', id, info] / ['removed', id]
//   hookReceiver()      a local HTTP endpoint that records every request
//                       ({headers, body}) in got and answers 200: {got, url,
//                       close()}

import http from 'node:http';

export function connected(p) {
  return new Promise((resolve, reject) => {
    if (p.connection.state === 'connected') return resolve(p.connection.socket_id);
    p.connection.bind('connected', () => resolve(p.connection.socket_id));
    p.connection.bind('failed', () => reject(new Error('failed')));
  });
}

export function subscribed(ch, ms = 20000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no subscription_succeeded on ${ch.name}`)), ms);
    ch.bind('pusher:subscription_succeeded', (m) => { clearTimeout(t); resolve(m); });
    ch.bind('pusher:subscription_error', (e) => { clearTimeout(t); reject(new Error(`subscription_error ${JSON.stringify(e)}`)); });
  });
}

export function recordMembers(ch) {
  const log = [];
  ch.bind('pusher:member_added', (m) => log.push(['added', m.id, m.info]));
  ch.bind('pusher:member_removed', (m) => log.push(['removed', m.id]));
  return log;
}

export async function hookReceiver(path = '/pusher') {
  const got = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => { got.push({ headers: req.headers, body: Buffer.concat(chunks).toString() }); res.end('ok'); });
  });
  await new Promise((ok) => srv.listen(0, '127.0.0.1', ok));
  return { got, url: `http://127.0.0.1:${srv.address().port}${path}`, close: () => new Promise((ok) => srv.close(ok)) };
}
