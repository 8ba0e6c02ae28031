// WebSocket behaviour of the real binary with Node's `ws` client: the
// native endpoint's envelope, handshake rules, limits and close codes, the
// output limit for slow consumers, and isolation between clients.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean } from './lib/server.mjs';
import { connect, parseResponses } from './lib/raw.mjs';

let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--ws-allowed-origins', 'http://good.example,http://also.example',
    '--client-output-hard-limit-bytes', '262144', '--client-output-soft-limit-bytes', '131072']);
});
after(async () => { await stopClean(srv, assert); });

function open(path = '/v1/ws', opts = {}, protocols) {
  const ws = new WebSocket(`${srv.wsUrl}${path}`, protocols, opts);
  const msgs = [];
  const waiters = [];
  ws.on('message', (data, isBinary) => {
    msgs.push(isBinary ? data : data.toString());
    for (const w of waiters.splice(0)) w();
  });
  ws.next = async (ms = 5000) => {
    const deadline = Date.now() + ms;
    while (msgs.length === 0) {
      if (Date.now() > deadline) throw new Error('no message');
      await new Promise((r) => { waiters.push(r); setTimeout(r, 50); });
    }
    return msgs.shift();
  };
  ws.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  return ws;
}

test('native endpoint greets with welcome and answers ping', async () => {
  const ws = open();
  await once(ws, 'open');
  const welcome = JSON.parse(await ws.next());
  assert.equal(welcome.type, 'welcome');
  assert.equal(welcome.protocol, 1);
  assert.equal(welcome.limits.maxMessageBytes, 65536);
  ws.send(JSON.stringify({ type: 'ping', ref: 7 }));
  const pong = JSON.parse(await ws.next());
  assert.equal(pong.type, 'pong');
  assert.equal(pong.ref, 7);
  ws.close(1000);
  assert.equal((await ws.closed).code, 1000);
});

test('malformed JSON and unknown types get an error message; the connection stays', async () => {
  const ws = open();
  await once(ws, 'open');
  await ws.next();
  ws.send('{not json');
  assert.equal(JSON.parse(await ws.next()).code, 'bad_json');
  ws.send('[1,2]');
  assert.equal(JSON.parse(await ws.next()).code, 'bad_message');
  ws.send(JSON.stringify({ type: 'teleport', ref: 'r1' }));
  const err = JSON.parse(await ws.next());
  assert.equal(err.code, 'unknown_type');
  assert.equal(err.ref, 'r1');
  ws.send(JSON.stringify({ type: 'ping' }));
  assert.equal(JSON.parse(await ws.next()).type, 'pong');
  ws.close();
  await ws.closed;
});

test('sustained garbage is closed with 1008', async () => {
  const ws = open();
  await once(ws, 'open');
  for (let i = 0; i < 25; i++) ws.send('nope');
  assert.equal((await ws.closed).code, 1008);
});

test('binary messages on the JSON endpoint close with 1003', async () => {
  const ws = open();
  await once(ws, 'open');
  ws.send(Buffer.from([1, 2, 3]));
  assert.equal((await ws.closed).code, 1003);
});

test('a message over ws-max-message-bytes closes with 1009', async () => {
  const ws = open();
  await once(ws, 'open');
  ws.send('x'.repeat(70000));
  assert.equal((await ws.closed).code, 1009);
});

test('subprotocol presenced.v1 is negotiated; unknown ones are not echoed', async () => {
  const a = open('/v1/ws', {}, ['presenced.v1']);
  await once(a, 'open');
  assert.equal(a.protocol, 'presenced.v1');
  a.close();
  const c = await connect(srv.port);
  await c.write('GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Protocol: chat, superchat\r\n\r\n');
  const head = (await c.until((d) => d.includes('\r\n\r\n'))).toString();
  assert.match(head, /^HTTP\/1\.1 101 /);
  assert.match(head, /Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=/i);
  assert.doesNotMatch(head, /Sec-WebSocket-Protocol/i);
  c.close();
});

test('Origin allow-list: listed origins pass, others get 403, no Origin passes', async () => {
  const good = open('/v1/ws', { origin: 'http://also.example' });
  await once(good, 'open');
  good.close();
  const none = open('/v1/ws');
  await once(none, 'open');
  none.close();
  const bad = new WebSocket(`${srv.wsUrl}/v1/ws`, { origin: 'http://evil.example' });
  const status = await new Promise((resolve) => {
    bad.on('unexpected-response', (_req, res) => resolve(res.statusCode));
    bad.on('error', () => resolve('error'));
    bad.on('open', () => resolve('open'));
  });
  assert.equal(status, 403);
  bad.terminate();
});

test('handshake errors: wrong version 426, bad key 400', async () => {
  let c = await connect(srv.port);
  await c.write('GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n');
  let [res] = parseResponses(await c.until((d) => parseResponses(d).length === 1));
  assert.equal(res.status, 426);
  assert.equal(res.headers['sec-websocket-version'], '13');
  c.close();
  c = await connect(srv.port);
  await c.write('GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n');
  [res] = parseResponses(await c.until((d) => parseResponses(d).length === 1));
  assert.equal(res.status, 400);
  assert.equal(JSON.parse(res.body).error.code !== undefined, true);
  c.close();
});

test('frames pipelined right after the upgrade request are not lost', async () => {
  const c = await connect(srv.port);
  const payload = Buffer.from(JSON.stringify({ type: 'ping', ref: 'early' }));
  const mask = Buffer.from([1, 2, 3, 4]);
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask,
    Buffer.from(payload.map((b, i) => b ^ mask[i % 4]))]);
  await c.write(Buffer.concat([Buffer.from('GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n' +
    'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'), frame]));
  const buf = await c.until((d) => d.includes('"early"'));
  assert.match(buf.toString('latin1'), /"type":"pong"/);
  c.close();
});

test('a slow consumer is closed with 4008 and the server stays healthy', async () => {
  const ws = open('/test/echo');
  await once(ws, 'open');
  ws._socket.pause(); // stop reading: the server's output queue grows
  const chunk = 'y'.repeat(60000);
  let closed = null;
  ws.closed.then((c) => { closed = c; });
  for (let i = 0; i < 400 && closed === null; i++) {
    if (ws.readyState !== WebSocket.OPEN) break;
    ws.send(chunk);
    if (i % 20 === 19) await new Promise((r) => setTimeout(r, 20));
  }
  ws._socket.resume();
  const result = await ws.closed;
  assert.equal(result.code, 4008);
  const m = await (await fetch(`${srv.url}/metrics`)).text();
  const closes = [...m.matchAll(/^presenced_output_limit_closes_total\{worker="\d"\} (\d+)$/gm)]
    .reduce((a, x) => a + Number(x[1]), 0);
  assert.ok(closes >= 1);
  assert.equal((await fetch(`${srv.url}/healthz`)).status, 200);
});

test('a protocol error on one socket does not affect another', async () => {
  const a = open();
  const b = open();
  await Promise.all([once(a, 'open'), once(b, 'open')]);
  await a.next();
  await b.next();
  a._socket.write(Buffer.from([0x81, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f])); // unmasked -> 1002
  assert.equal((await a.closed).code, 1002);
  b.send(JSON.stringify({ type: 'ping', ref: 'b' }));
  assert.equal(JSON.parse(await b.next()).ref, 'b');
  b.close();
  await b.closed;
});

test('a message of more than 4096 fragments closes with 1009; 4096 are fine', async () => {
  const { connect } = await import('./lib/raw.mjs');
  const mask = Buffer.from([9, 8, 7, 6]);
  const frame = (b0, payload = Buffer.alloc(0)) => Buffer.concat([Buffer.from([b0, 0x80 | payload.length]), mask,
    Buffer.from(payload.map((x, i) => x ^ mask[i % 4]))]);
  const upgrade = 'GET /test/echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';
  for (const [count, expectEcho] of [[4096, true], [4097, false]]) {
    const c = await connect(srv.port);
    await c.write(upgrade);
    await c.until((d) => d.includes('\r\n\r\n'));
    const parts = [frame(0x01, Buffer.from('a'))];
    for (let i = 1; i < count - 1; i++) parts.push(frame(0x00));
    parts.push(frame(0x80, Buffer.from('z')));
    await c.write(Buffer.concat(parts));
    const buf = await c.until((d) => d.includes(Buffer.from([0x81, 0x02, 0x61, 0x7a])) || d.includes(Buffer.from([0x88])), 5000);
    if (expectEcho) {
      assert.ok(buf.includes(Buffer.from([0x81, 0x02, 0x61, 0x7a])), 'echoed "az"');
    } else {
      const at = buf.indexOf(Buffer.from([0x88]));
      assert.ok(at >= 0, 'close frame');
      assert.ok((buf[at + 1] & 0x7f) >= 2);
      assert.equal(buf.readUInt16BE(at + 2), 1009);
    }
    c.close();
  }
});
