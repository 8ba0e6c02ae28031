// The native protocol holds every message to RFC 8259 before cJSON reads
// it (issue 15, item 6): trailing data, raw control characters and \u0000
// are bad_json; a ref that is not a short string or an integer in the int64
// range is bad_message. Each of these was accepted before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean } from './lib/server.mjs';

let srv;
before(async () => { srv = await startServer(['--workers', '1']); });
after(async () => { await stopClean(srv, assert); });

async function open(path = '/v1/ws') {
  const ws = new WebSocket(`${srv.wsUrl}${path}`);
  const msgs = [];
  let wake = null;
  ws.on('message', (d) => { msgs.push(JSON.parse(d.toString())); if (wake) wake(); });
  ws.next = async (ms = 5000) => {
    const deadline = Date.now() + ms;
    while (msgs.length === 0) {
      if (Date.now() > deadline) throw new Error('no message');
      await new Promise((r) => { wake = r; setTimeout(r, 50); });
    }
    return msgs.shift();
  };
  await once(ws, 'open');
  assert.equal((await ws.next()).type, 'welcome');
  return ws;
}

// Sends text, expects one error with code, then checks that the connection
// still answers a ping (the error did not desynchronise anything).
async function expectError(ws, text, code, re) {
  ws.send(text);
  const m = await ws.next();
  assert.equal(m.type, 'error', `${JSON.stringify(text)} answered ${JSON.stringify(m)}`);
  assert.equal(m.code, code, JSON.stringify(m));
  if (re) assert.match(m.message, re);
  assert.equal(m.ref, undefined);
  ws.send('{"type":"ping","ref":"after"}');
  const pong = await ws.next();
  assert.equal(pong.type, 'pong');
  assert.equal(pong.ref, 'after');
}

test('trailing data after the JSON object is bad_json', async () => {
  const ws = await open();
  await expectError(ws, '{"type":"ping","ref":1} x', 'bad_json', /trailing data/);
  await expectError(ws, '{"type":"ping","ref":1}{"type":"ping","ref":2}', 'bad_json', /trailing data/);
  await expectError(ws, '{"type":"ping","ref":1}\u0001', 'bad_json', /trailing data/);
  ws.send('  {"type":"ping","ref":3}\r\n'); // whitespace around the value is fine
  assert.equal((await ws.next()).ref, 3);
  ws.close();
});

test('raw control characters inside strings are bad_json', async () => {
  const ws = await open();
  await expectError(ws, '{"type":"ping","ref":"a\u0001b"}', 'bad_json', /control character/);
  await expectError(ws, '{"type":"ping","ref":"a\nb"}', 'bad_json', /control character/);
  await expectError(ws, '{"type":"watch","users":["a\u0000b"]}', 'bad_json', /control character/);
  ws.send('{"type":"ping","ref":"a\\nb"}'); // escaped, a newline is fine
  assert.equal((await ws.next()).ref, 'a\nb');
  ws.close();
});

test('\\u0000 is refused in every string: ids cannot be cut short', async () => {
  const ws = await open();
  await expectError(ws, '{"type":"watch","users":["a\\u0000b"],"ref":"w"}', 'bad_json', /u0000/);
  await expectError(ws, '{"type":"join","room":"r\\u0000x","meta":{},"ref":"j"}', 'bad_json', /u0000/);
  await expectError(ws, '{"type":"status","status":"busy","text":"x\\u0000y"}', 'bad_json', /u0000/);
  await expectError(ws, '{"type\\u0000":"ping"}', 'bad_json', /u0000/);
  ws.close();
});

test('a number ref must be an integer in the int64 range; a string ref at most 61 bytes', async () => {
  const ws = await open();
  for (const ref of ['1e300', '-1e300', '1.5', '9223372036854775808', 'true', '{}', '[1]', 'null']) {
    await expectError(ws, `{"type":"ping","ref":${ref}}`, 'bad_message', /ref must be/);
  }
  await expectError(ws, JSON.stringify({ type: 'ping', ref: 'x'.repeat(62) }), 'bad_message', /ref must be/);
  for (const ref of [0, -1, 4503599627370496, -9223372036854775808, 'x'.repeat(61)]) {
    ws.send(JSON.stringify({ type: 'ping', ref }));
    const pong = await ws.next();
    assert.equal(pong.type, 'pong');
    assert.equal(pong.ref, ref);
  }
  ws.send('{"type":"ping","ref":1e2}'); // integral, written with an exponent
  assert.equal((await ws.next()).ref, 100);
  ws.close();
});

test('bad messages still count towards the 1008 close', async () => {
  const ws = await open();
  const closed = new Promise((r) => ws.on('close', (code) => r(code)));
  for (let i = 0; i < 20; i++) ws.send('{"type":"ping"} trailing');
  assert.equal(await closed, 1008);
});
