// Issue 15, item 5: under auth = jwt an event stream ends when its token
// expires, as a WebSocket does (4403): an SSE "error" event token_expired,
// then the server closes the stream. Before, presence and room streams ran
// on after exp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { startServer, stopClean } from './lib/server.mjs';
import { streamSse } from './lib/sse.mjs';

const SECRET = 'test-secret-0123456789-abcdefghijklmnop';
const b64u = (x) => Buffer.from(x).toString('base64url');
function token(claims) {
  const now = Math.floor(Date.now() / 1000);
  const h = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const p = b64u(JSON.stringify({ exp: now + 600, iat: now, ...claims }));
  const sig = crypto.createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url');
  return `${h}.${p}.${sig}`;
}

let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--auth', 'jwt', '--jwt-leeway-s', '0'],
    { env: { PRESENCED_JWT_HS256_SECRET: SECRET } });
});
after(async () => { await stopClean(srv, assert); });

async function endsAtExpiry(path, first) {
  const exp = Math.floor(Date.now() / 1000) + 2;
  const s = await streamSse(`${srv.url}${path}${path.includes('?') ? '&' : '?'}token=${token({ sub: 'reader', exp, rooms: ['*'] })}`);
  assert.equal(s.status, 200, s.body);
  await s.until((ev) => ev.some(first));
  const ev = await s.until((e) => e.some((x) => x.event === 'error'), 6000);
  const err = ev.find((x) => x.event === 'error');
  assert.equal(err.data.code, 'token_expired');
  assert.ok(Date.now() >= exp * 1000, 'not before exp');
  const deadline = Date.now() + 5000;
  while (!s.ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.ok(s.ended, 'the server closed the stream');
}

test('a presence stream ends when its token expires', async () => {
  await endsAtExpiry('/v1/presence/events?user=someone', (e) => e.event === 'presence');
});

test('a room stream ends when its token expires', async () => {
  await endsAtExpiry('/v1/rooms/exp-room/events', (e) => e.data && e.data.type === 'room_snapshot');
});

test('a stream with a long-lived token keeps running', async () => {
  const s = await streamSse(`${srv.url}/v1/presence/events?user=someone&token=${token({ sub: 'reader2' })}`);
  await s.until((ev) => ev.some((e) => e.event === 'presence'));
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(!s.ended && !s.events.some((e) => e.event === 'error'));
  s.close();
});
