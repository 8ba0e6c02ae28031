// auth = jwt over real sockets: tokens in the query, the subprotocol list
// and a first auth message; the token's sub is the identity; unauthenticated
// sockets are closed (4401); expiry (4403) and refresh; room claims; HTTP
// requests need a bearer token. Tokens are HS256, minted here with
// node:crypto (the server's verifier is src/core/jwt.c, unit-tested separately).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const SECRET = 'test-secret-0123456789-abcdefghijklmnop';
const b64u = (x) => Buffer.from(x).toString('base64url');
function token(claims, secret = SECRET, header = { alg: 'HS256', typ: 'JWT' }) {
  const now = Math.floor(Date.now() / 1000);
  const h = b64u(JSON.stringify(header));
  const p = b64u(JSON.stringify({ exp: now + 600, iat: now, ...claims }));
  const sig = crypto.createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url');
  return `${h}.${p}.${sig}`;
}

let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--auth', 'jwt', '--jwt-leeway-s', '0',
    '--auth-timeout-ms', '600', '--presence-debounce-ms', '50'],
  { env: { PRESENCED_JWT_HS256_SECRET: SECRET } });
});
after(async () => { await stopClean(srv, assert); });

function raw(path, protocols) {
  const ws = new WebSocket(`${srv.wsUrl}${path}`, protocols);
  const c = new Client(ws);
  return c;
}

test('a token in the query is the identity; ?user= is ignored', async () => {
  const a = raw(`/v1/ws?user=mallory&token=${token({ sub: 'alice', device: 'mobile' })}`);
  await once(a.ws, 'open');
  const w = await a.next((m) => m.type === 'welcome');
  assert.equal(w.user, 'alice');
  assert.match(w.sessionId, /^[0-9a-f]{32}$/);
  a.close();
});

test('a bearer entry in Sec-WebSocket-Protocol works next to presenced.v1', async () => {
  const a = raw('/v1/ws', ['presenced.v1', `bearer.${token({ sub: 'bob' })}`]);
  await once(a.ws, 'open');
  assert.equal(a.ws.protocol, 'presenced.v1');
  assert.equal((await a.next((m) => m.type === 'welcome')).user, 'bob');
  a.close();
});

test('a bad token is refused with 401 before the upgrade, with one uniform message', async () => {
  const bad = [
    token({ sub: 'x' }, 'another-secret-another-secret-another'),
    token({ sub: 'x' }, SECRET, { alg: 'none', typ: 'JWT' }),
    token({ sub: 'x', exp: Math.floor(Date.now() / 1000) - 10 }),
    'not.a.token',
  ];
  const messages = new Set();
  for (const t of bad) {
    const ws = new WebSocket(`${srv.wsUrl}/v1/ws?token=${t}`);
    ws.on('error', () => {});
    const [, res] = await once(ws, 'unexpected-response');
    assert.equal(res.statusCode, 401);
    let body = '';
    for await (const chunk of res) body += chunk;
    messages.add(JSON.parse(body).error.message);
    ws.terminate();
  }
  assert.equal(messages.size, 1, 'the same error for every bad token');
});

test('auth message: only ping works before it; without it the socket is closed with 4401', async () => {
  const a = raw('/v1/ws');
  await once(a.ws, 'open');
  a.send({ type: 'status', status: 'busy', ref: 1 });
  assert.equal((await a.next((m) => m.type === 'error')).code, 'unauthenticated');
  a.send({ type: 'ping', ref: 2 });
  assert.equal((await a.next((m) => m.type === 'pong')).ref, 2);
  a.send({ type: 'auth', token: token({ sub: 'carol' }) });
  assert.equal((await a.next((m) => m.type === 'welcome')).user, 'carol');
  a.close();
  const slow = raw('/v1/ws');
  await once(slow.ws, 'open');
  assert.equal((await slow.closed).code, 4401);
});

test('an unrefreshed token closes the socket with 4403; a refresh keeps it; another sub is refused', async () => {
  const now = Math.floor(Date.now() / 1000);
  const a = raw(`/v1/ws?token=${token({ sub: 'dave', exp: now + 2 })}`);
  await once(a.ws, 'open');
  await a.next((m) => m.type === 'welcome');
  a.send({ type: 'auth', token: token({ sub: 'eve' }), ref: 'm' });
  assert.equal((await a.next((m) => m.type === 'error' && m.ref === 'm')).code, 'token_user_mismatch');
  const b = raw(`/v1/ws?token=${token({ sub: 'frank', exp: now + 2 })}`);
  await once(b.ws, 'open');
  await b.next((m) => m.type === 'welcome');
  b.send({ type: 'auth', token: token({ sub: 'frank', exp: now + 600 }), ref: 'r' });
  await b.next((m) => m.type === 'ack' && m.ref === 'r');
  assert.equal((await a.closed).code, 4403);
  assert.ok(a.seen.some((m) => m.type === 'token_expired'));
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(b.ws.readyState, WebSocket.OPEN, 'the refreshed socket stays');
  b.close();
});

test('the rooms claim limits joins (exact ids and prefixes)', async () => {
  const a = raw(`/v1/ws?token=${token({ sub: 'gina', rooms: ['doc-1', 'team-*'] })}`);
  await once(a.ws, 'open');
  await a.next((m) => m.type === 'welcome');
  for (const [room, ok] of [['doc-1', true], ['team-blue', true], ['doc-2', false]]) {
    a.send({ type: 'join', room, ref: room });
    const m = await a.next((x) => (x.type === 'room_joined' || x.type === 'error') && x.ref === room);
    assert.equal(m.type === 'room_joined', ok, room);
    if (!ok) assert.equal(m.code, 'forbidden');
  }
  a.close();
});

test('HTTP needs a bearer token; POST /v1/heartbeat takes the user from it', async () => {
  assert.equal((await fetch(`${srv.url}/v1/presence?user=alice`)).status, 401);
  const ok = await fetch(`${srv.url}/v1/presence?user=alice`, { headers: { Authorization: `Bearer ${token({ sub: 'reader' })}` } });
  assert.equal(ok.status, 200);
  const hb = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', body: '{}',
    headers: { Authorization: `Bearer ${token({ sub: 'henry' })}` } });
  assert.equal(hb.status, 200);
  assert.equal((await hb.json()).created, true);
  const spoof = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', body: '{"user":"alice"}',
    headers: { Authorization: `Bearer ${token({ sub: 'henry' })}` } });
  assert.equal(spoof.status, 403);
  assert.equal((await fetch(`${srv.url}/v1/presence/events?user=x&token=bad`)).status, 401);
  assert.equal((await fetch(`${srv.url}/v1/rooms/r1`)).status, 401);
});
