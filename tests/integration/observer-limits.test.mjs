// Per-user limits over all of a user's connections (issue 15 item 2):
// max-watch-per-user (watch links over every WebSocket and presence event
// stream, on any worker) and max-streams-per-user (event streams open at
// once). Each is filled, refused with its error, and freed again; another
// user is never affected. Two workers, so a user's sockets land on both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { streamSse } from './lib/sse.mjs';

const rate = ['--query-rate', '10000', '--query-burst', '10000'];
const users = (p, n) => Array.from({ length: n }, (_, i) => `${p}${i}`);

async function watch(c, list, ref) {
  c.send({ type: 'watch', users: list, ref });
  return c.next((m) => m.ref === ref && (m.type === 'ack' || m.type === 'error'));
}

test('max-watch-per-user: watch links of one user over all its sockets and streams', async () => {
  const srv = await startServer(['--workers', '2', '--max-watch', '6', '--max-watch-per-user', '10', ...rate]);
  const socks = [];
  try {
    const a1 = await Client.open(srv, { user: 'alice' });
    const a2 = await Client.open(srv, { user: 'alice' });
    const a3 = await Client.open(srv, { user: 'alice' });
    const bob = await Client.open(srv, { user: 'bob' });
    socks.push(a1, a2, a3, bob);
    assert.equal((await watch(a1, users('x', 6), 'w1')).type, 'ack');
    assert.equal((await watch(a2, users('y', 3), 'w2')).type, 'ack');
    // 9 held: a user named twice counts once.
    assert.equal((await watch(a3, ['z0', 'z0'], 'w3')).type, 'ack');
    const over = await watch(a2, ['y9'], 'w4');
    assert.equal(over.type, 'error');
    assert.equal(over.code, 'too_many_watched');
    assert.match(over.message, /max-watch-per-user/);
    // Another connection of hers, and an event stream, are refused too.
    const e3 = await watch(a3, ['z1'], 'w5');
    assert.equal(e3.code, 'too_many_watched');
    const sse = await streamSse(`${srv.url}/v1/presence/events?user=q0&as=alice`);
    assert.equal(sse.status, 429);
    assert.equal(JSON.parse(sse.body).error.code, 'too_many_watched');
    // A watch already held costs nothing again.
    assert.equal((await watch(a2, ['y0', 'y1'], 'w6')).type, 'ack');
    // Bob is unaffected: his own budget.
    assert.equal((await watch(bob, users('x', 6), 'b1')).type, 'ack');
    const bs = await streamSse(`${srv.url}/v1/presence/events?user=q0&user=q1&as=bob`);
    assert.equal(bs.status, 200);
    await bs.until((ev) => ev.length >= 2);
    bs.close();
    // Unwatching and closing hand links back.
    a1.send({ type: 'unwatch', users: ['x0', 'x1'], ref: 'u1' });
    await a1.next((m) => m.ref === 'u1' && m.type === 'ack');
    assert.equal((await watch(a2, ['y9', 'y8'], 'w7')).type, 'ack');
    assert.equal((await watch(a2, ['y7'], 'w8')).code, 'too_many_watched');
    await a1.close(); // its 4 links go
    await waitUntil(async () => (await watch(a3, ['z1'], `w9${Date.now()}`)).type === 'ack', 'links of a closed socket handed back');
    const s2 = await streamSse(`${srv.url}/v1/presence/events?user=q0&user=q1&user=q2&as=alice`);
    assert.equal(s2.status, 200, s2.body);
    await s2.until((ev) => ev.length >= 3);
    assert.equal((await watch(a3, ['z2'], 'w10')).code, 'too_many_watched', 'the stream holds 3');
    s2.close();
    await waitUntil(async () => (await watch(a3, ['z2'], `w11${Date.now()}`)).type === 'ack', 'a closed stream hands its links back');
  } finally {
    for (const c of socks) if (c.ws.readyState === 1) await c.close();
    await stopClean(srv, assert);
  }
});

test('max-streams-per-user: event streams one user holds; anonymous readers are not counted', async () => {
  const srv = await startServer(['--workers', '2', '--max-streams-per-user', '2', ...rate]);
  const open = [];
  try {
    const s1 = await streamSse(`${srv.url}/v1/presence/events?user=p&as=carol`);
    const s2 = await streamSse(`${srv.url}/v1/rooms/lobby/events?as=carol`);
    open.push(s1, s2);
    assert.deepEqual([s1.status, s2.status], [200, 200]);
    for (const url of [`${srv.url}/v1/presence/events?user=p&as=carol`, `${srv.url}/v1/rooms/lobby/events?as=carol`]) {
      const r = await fetch(url);
      assert.equal(r.status, 429);
      const body = await r.json();
      assert.equal(body.error.code, 'too_many_streams');
      assert.match(body.error.message, /max-streams-per-user/);
    }
    // Others are unaffected: another user, and anonymous readers (no user
    // to count them by; behind a proxy they would all share one address).
    const d1 = await streamSse(`${srv.url}/v1/presence/events?user=p&as=dave`);
    const d2 = await streamSse(`${srv.url}/v1/rooms/lobby/events?as=dave`);
    open.push(d1, d2);
    assert.deepEqual([d1.status, d2.status], [200, 200]);
    for (let i = 0; i < 3; i++) {
      const a = await streamSse(`${srv.url}/v1/presence/events?user=p${i}`);
      open.push(a);
      assert.equal(a.status, 200, `anonymous stream ${i + 1}`);
    }
    // A closed stream frees its place.
    await s1.until((ev) => ev.length >= 1);
    s1.close();
    let again;
    await waitUntil(async () => {
      again = await streamSse(`${srv.url}/v1/presence/events?user=p&as=carol`);
      if (again.status !== 200) return false;
      open.push(again);
      return true;
    }, 'the place of a closed stream');
  } finally {
    for (const s of open) s.close();
    await stopClean(srv, assert);
  }
});

const SECRET = 'observer-limits-secret-0123456789abcdef';
function token(sub) {
  const now = Math.floor(Date.now() / 1000);
  const b64u = (x) => Buffer.from(JSON.stringify(x)).toString('base64url');
  const hp = `${b64u({ alg: 'HS256', typ: 'JWT' })}.${b64u({ sub, iat: now, exp: now + 600 })}`;
  return `${hp}.${crypto.createHmac('sha256', SECRET).update(hp).digest('base64url')}`;
}

test('auth = jwt: the limits count per token subject, whatever the socket', async () => {
  const srv = await startServer(['--workers', '2', '--auth', 'jwt', '--max-watch-per-user', '4',
    '--max-streams-per-user', '1', ...rate], { env: { PRESENCED_JWT_HS256_SECRET: SECRET } });
  const socks = [];
  const open = async (sub) => {
    const c = new Client(new WebSocket(`${srv.wsUrl}/v1/ws?token=${token(sub)}`));
    await once(c.ws, 'open');
    c.welcome = await c.next((m) => m.type === 'welcome');
    socks.push(c);
    return c;
  };
  try {
    const e1 = await open('erin');
    const e2 = await open('erin');
    assert.equal((await watch(e1, ['a', 'b'], 'w1')).type, 'ack');
    assert.equal((await watch(e2, ['c', 'd'], 'w2')).type, 'ack');
    assert.equal((await watch(e2, ['e'], 'w3')).code, 'too_many_watched');
    const s = await streamSse(`${srv.url}/v1/presence/events?user=a&token=${token('erin')}`);
    assert.equal(s.status, 429);
    assert.equal(JSON.parse(s.body).error.code, 'too_many_watched');
    // Frank: his own watches, and his own single stream.
    const f = await open('frank');
    assert.equal((await watch(f, ['a', 'b', 'c', 'd'], 'f1')).type, 'ack');
    const fs = await streamSse(`${srv.url}/v1/rooms/r1/events?token=${token('frank')}`);
    assert.equal(fs.status, 200);
    const f2 = await fetch(`${srv.url}/v1/rooms/r2/events?token=${token('frank')}`);
    assert.equal(f2.status, 429);
    assert.equal((await f2.json()).error.code, 'too_many_streams');
    fs.close();
  } finally {
    for (const c of socks) if (c.ws.readyState === 1) await c.close();
    await stopClean(srv, assert);
  }
});

test('the defaults: 16 streams per user; the 17th is refused (runs on any build)', async () => {
  const srv = await startServer(['--workers', '2', ...rate]);
  const open = [];
  try {
    for (let i = 0; i < 16; i++) {
      const s = await streamSse(`${srv.url}/v1/presence/events?user=u${i}&as=gus`);
      open.push(s);
      assert.equal(s.status, 200, `stream ${i + 1}`);
    }
    const r = await fetch(`${srv.url}/v1/presence/events?user=u99&as=gus`);
    assert.equal(r.status, 429);
    assert.equal((await r.json()).error.code, 'too_many_streams');
  } finally {
    for (const s of open) s.close();
    await stopClean(srv, assert);
  }
});
