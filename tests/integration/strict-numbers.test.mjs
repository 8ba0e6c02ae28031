// Issue 15, item 6 (engine side): numbers are read with a range check, not
// a cast; the admin and heartbeat bodies go through the strict JSON check;
// an HTTP heartbeat answers what happened. Each case was accepted before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean } from './lib/server.mjs';

const KEY = 'strict-numbers-test-key-0123456789abcdef';
let srv;
before(async () => { srv = await startServer(['--workers', '2', '--admin-api-key', KEY]); });
after(async () => { await stopClean(srv, assert); });

async function open(path) {
  const ws = new WebSocket(`${srv.wsUrl}${path}`);
  const msgs = [];
  let wake = null;
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString());
    if (m.type !== 'privacy_changed') msgs.push(m); // the settings, after the welcome
    if (wake) wake();
  });
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

const admin = (path, method, body) => fetch(`${srv.url}/v1/admin/${path}`, {
  method, body, headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
});
const beat = (body) => fetch(`${srv.url}/v1/heartbeat`, {
  method: 'POST', body, headers: { 'Content-Type': 'application/json' },
});

test('a since out of range, fractional or malformed is refused, not cast', async () => {
  const ws = await open('/v1/ws?user=since-a');
  for (const since of ['{"epoch":1,"seq":18446744073709551616}', '{"epoch":1e300,"seq":1}',
    '{"epoch":1,"seq":1.5}', '{"epoch":-1,"seq":1}', '{"epoch":1}', '"x"', '[]']) {
    ws.send(`{"type":"join","room":"since-r","since":${since},"ref":"j"}`);
    const m = await ws.next();
    assert.equal(m.type, 'error', `${since}: ${JSON.stringify(m)}`);
    assert.equal(m.code, 'invalid');
    assert.equal(m.ref, 'j');
    assert.match(m.message, /since/);
  }
  ws.send('{"type":"join","room":"since-r","since":null,"ref":"ok"}'); // null = none
  let m;
  do m = await ws.next(); while (m.type !== 'room_joined' && m.type !== 'error');
  assert.equal(m.type, 'room_joined', JSON.stringify(m));
  ws.close();
});

test('expiresInMs must be an integer', async () => {
  const ws = await open('/v1/ws?user=exp-a');
  for (const x of ['1.5', '1000.25', '1e300', '0']) {
    ws.send(`{"type":"status","status":"busy","expiresInMs":${x},"ref":"s"}`);
    const m = await ws.next();
    assert.equal(m.type, 'error', `${x}: ${JSON.stringify(m)}`);
    assert.equal(m.code, 'invalid');
    ws.send(`{"type":"custom","text":"t","expiresInMs":${x},"ref":"c"}`);
    const n = await ws.next();
    assert.equal(n.type, 'error', `${x}: ${JSON.stringify(n)}`);
  }
  ws.send('{"type":"status","status":"busy","expiresInMs":60000,"ref":"ok"}');
  assert.equal((await ws.next()).type, 'ack');
  ws.close();
});

test('admin bodies are strict JSON: \\u0000 in an id or invalid UTF-8 is 400 bad_json', async () => {
  let r = await admin('users/nul-a/contacts', 'PUT', '{"contacts":["a\\u0000b"]}');
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.code, 'bad_json');
  r = await admin('users/nul-a/contacts', 'GET');
  const body = await r.text();
  assert.ok(!/"a"/.test(body), body); // nothing was stored
  r = await admin('users/nul-a/kick', 'POST',
    Buffer.concat([Buffer.from('{"reason":"x'), Buffer.from([0xff]), Buffer.from('"}')]));
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.code, 'bad_json');
  r = await admin('users/nul-a/kick', 'POST', '{"reason":"x"} {}');
  assert.equal(r.status, 400);
});

test('heartbeat bodies are strict JSON; "status" is refused; leave says what happened', async () => {
  let r = await beat('{"user":"hb-a\\u0000x"}');
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.code, 'bad_json');
  r = await beat('{"user":"hb-a"} x');
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.code, 'bad_json');
  r = await beat('{"user":"hb-a","status":"busy"}');
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.code, 'bad_request');

  r = await beat('{"user":"hb-a"}');
  assert.equal(r.status, 200);
  const { sessionId } = await r.json();
  r = await beat(JSON.stringify({ user: 'hb-b', sessionId, leave: true })); // not hb-b's
  assert.deepEqual(await r.json(), { sessionId, ended: false });
  r = await beat(JSON.stringify({ user: 'hb-a', sessionId, leave: true }));
  assert.deepEqual(await r.json(), { sessionId, ended: true });
  r = await beat(JSON.stringify({ user: 'hb-a', sessionId, leave: true })); // already gone
  assert.deepEqual(await r.json(), { sessionId, ended: false });
});
