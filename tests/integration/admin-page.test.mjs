// The admin API's reads for the admin page (docs/api.md): GET
// /v1/admin/stats (this node's counts), /v1/admin/nodes (this node: id,
// start, counts, health), /v1/admin/users/{id} (presence, sessions with
// device, status, custom status, connection and protocol, privacy settings, contact
// and block counts with the first blocked users) and
// /v1/admin/rooms?top=N (the N busiest rooms of all workers, most members
// first, bounded to 100). Each needs the admin key like every admin call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest } from './lib/admin.mjs';

const KEY = 'admin-page-test-key-0123456789';
let srv;
const clients = [];
const get = (p, key = KEY) => adminRequest(srv, 'GET', p, { key });
async function ok(p) {
  const r = await get(p);
  assert.equal(r.status, 200, `${p} -> ${r.status} ${r.text}`);
  assert.match(r.headers.get('cache-control') || '', /no-store/);
  return r.json;
}
async function open(opts) {
  const c = await Client.open(srv, opts);
  clients.push(c);
  return c;
}
async function join(c, room) {
  c.send({ type: 'join', room, ref: `j-${room}` });
  await c.next((m) => m.type === 'room_snapshot' && m.room === room);
}

before(async () => {
  srv = await startServer(['--workers', '3', '--admin-api-key', KEY, '--node-id', 'node-a',
    '--presence-debounce-ms', '20', '--room-batch-ms', '20', '--reconnect-grace-ms', '5000']);
});
after(async () => {
  for (const c of clients) if (c.ws.readyState <= 1) c.ws.terminate();
  await stopClean(srv, assert);
});

test('every new read needs the admin key', async () => {
  for (const p of ['/v1/admin/stats', '/v1/admin/nodes', '/v1/admin/users/ann', '/v1/admin/rooms?top=5']) {
    for (const key of [null, 'wrong']) {
      const r = await get(p, key);
      assert.equal(r.status, 401, `${p} ${key}: ${r.text}`);
      assert.equal(r.json.error.code, 'unauthorized');
    }
  }
});

test('stats and nodes count users, sessions, connections and rooms', async () => {
  const base = await ok('/v1/admin/stats');
  assert.deepEqual([base.usersOnline, base.sessions, base.rooms, base.roomMembers], [0, 0, 0, 0]);
  assert.ok(Math.abs(base.at - Date.now()) < 5000, 'at is wall-clock ms');
  const a1 = await open({ user: 'ann', device: 'desktop' });
  await open({ user: 'ann', device: 'mobile' });
  const b = await open({ user: 'bob', device: 'web' });
  await join(a1, 'r1');
  await join(b, 'r1');
  await waitUntil(async () => (await ok('/v1/admin/stats')).roomMembers === 2, 'counts copied to the metrics');
  const s = await ok('/v1/admin/stats');
  assert.deepEqual([s.usersOnline, s.sessions, s.websockets, s.streams, s.rooms, s.roomMembers], [2, 3, 3, 0, 1, 2]);
  assert.ok(s.connections >= 3);
  const { nodes } = await ok('/v1/admin/nodes');
  assert.equal(nodes.length, 1);
  const n = nodes[0];
  assert.deepEqual([n.node, n.epoch, n.self, n.workers, n.ready, n.draining, n.degraded],
    ['node-a', null, true, 3, true, false, []]);
  assert.deepEqual([n.usersOnline, n.sessions, n.rooms, n.roomMembers], [2, 3, 1, 2]);
  assert.ok(n.startedAt <= Date.now() && n.uptimeMs >= 0 && Math.abs(n.startedAt + n.uptimeMs - Date.now()) < 5000);
  // An explicit leave ends a session at once (a closed socket keeps it for the grace).
  for (const c of clients.splice(0)) { c.send({ type: 'leave', ref: 'l' }); await c.next((m) => m.type === 'session_ended'); await c.close(); }
  await waitUntil(async () => (await ok('/v1/admin/stats')).sessions === 0, 'sessions end');
  assert.equal((await ok('/v1/admin/stats')).usersOnline, 0);
});

test('a user: presence, sessions with device, status, custom status and connection, privacy', async () => {
  const d = await open({ user: 'carol', device: 'desktop' });
  const m = await open({ user: 'carol', device: 'mobile' });
  d.send({ type: 'custom', text: 'On a call', emoji: '📞', ref: 'c' });
  await d.next((x) => x.ref === 'c');
  m.send({ type: 'status', status: 'dnd', ref: 's' });
  await m.next((x) => x.ref === 's');
  const put = await adminRequest(srv, 'PUT', '/v1/admin/users/carol/privacy', { key: KEY, body: { lastSeen: 'contacts' } });
  assert.equal(put.status, 200, put.text);
  const before = await ok('/v1/admin/users/carol');
  assert.deepEqual([before.contacts, before.blocks, before.blocked], [0, 0, []]);
  for (const [m, p, body] of [['PUT', '/v1/admin/users/carol/contacts', { contacts: ['x1', 'x2', 'x3'] }],
    ['PUT', '/v1/admin/users/carol/blocks/zed'], ['PUT', '/v1/admin/users/carol/blocks/mallory']]) {
    const r = await adminRequest(srv, m, p, { key: KEY, body });
    assert.equal(r.status, 200, `${m} ${p}: ${r.text}`);
  }
  await waitUntil(async () => (await ok('/v1/admin/users/carol')).presence.devices.mobile === 'dnd', 'dnd in the view');
  const u = await ok('/v1/admin/users/carol');
  assert.equal(u.user, 'carol');
  assert.equal(u.node, 'node-a');
  assert.deepEqual(u.privacy, { online: 'everyone', lastSeen: 'contacts', invisible: false });
  assert.deepEqual([u.contacts, u.blocks, u.blocked], [3, 2, ['mallory', 'zed']], 'counts, and the blocked in id order');
  assert.deepEqual(u.presence.devices, { desktop: 'online', mobile: 'dnd' });
  assert.equal(u.sessionCount, 2);
  const bySid = Object.fromEntries(u.sessions.map((s) => [s.session, s]));
  const sd = bySid[d.welcome.sessionId], sm = bySid[m.welcome.sessionId];
  assert.deepEqual([sd.device, sd.status, sd.connected, sd.transport, sd.protocol, sd.custom], ['desktop', 'online', true, 'socket', 'native', { text: 'On a call', emoji: '📞' }]);
  assert.deepEqual([sm.device, sm.status, sm.connected, sm.custom], ['mobile', 'dnd', true, undefined]);
  assert.ok(Math.abs(sd.connectedAt - Date.now()) < 10000 && sd.lastActiveAt >= sd.connectedAt - 1);
  // A closed socket: the session is in its reconnect grace.
  await m.kill();
  await waitUntil(async () => (await ok('/v1/admin/users/carol')).sessions.some((s) => s.session === m.welcome.sessionId && !s.connected), 'in grace');
  // An HTTP session has no socket.
  const hb = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'dave' }) });
  assert.equal(hb.status, 200, await hb.text());
  const dave = await ok('/v1/admin/users/dave');
  assert.deepEqual(dave.sessions.map((s) => [s.transport, s.protocol, s.connected]), [['http', 'http', true]]);
  // A Phoenix socket's session names its protocol (the adapter's name).
  const phx = new WebSocket(`${srv.wsUrl}/socket/websocket?vsn=2.0.0&user=erin`);
  await once(phx, 'open');
  try {
    await waitUntil(async () => (await ok('/v1/admin/users/erin')).sessionCount === 1, 'the phoenix session');
    const erin = await ok('/v1/admin/users/erin');
    assert.deepEqual(erin.sessions.map((s) => [s.transport, s.protocol]), [['socket', 'phoenix-v2']]);
  } finally {
    phx.terminate();
  }
  // Unknown: offline, no sessions, default settings; bad ids and methods are refused.
  const nobody = await ok('/v1/admin/users/nobody');
  assert.deepEqual([nobody.presence.status, nobody.sessionCount, nobody.sessions, nobody.contacts, nobody.blocks], ['offline', 0, [], 0, 0]);
  assert.equal((await get('/v1/admin/users/bad!id')).status, 400);
  assert.equal((await adminRequest(srv, 'DELETE', '/v1/admin/users/carol', { key: KEY })).status, 404);
});

test('rooms?top=N: the N busiest across workers, most members first; N is 1-100', async () => {
  // Rooms of 1..6 members, spread over the three workers by their ids.
  const sizes = { 'top-a': 3, 'top-b': 6, 'top-c': 1, 'top-d': 5, 'top-e': 2, 'top-f': 4 };
  let k = 0;
  for (const [room, n] of Object.entries(sizes)) {
    for (let i = 0; i < n; i++) {
      const c = await open({ user: `member-${k++}` });
      await join(c, room);
    }
  }
  await waitUntil(async () => (await ok('/v1/admin/rooms?top=100')).rooms.filter((r) => r.room.startsWith('top-')).length === 6, 'rooms');
  const top3 = await ok('/v1/admin/rooms?top=3');
  assert.deepEqual(top3.rooms.map((r) => [r.room, r.members]), [['top-b', 6], ['top-d', 5], ['top-f', 4]]);
  const all = (await ok('/v1/admin/rooms?top=100')).rooms.filter((r) => r.room.startsWith('top-'));
  assert.deepEqual(all.map((r) => r.members), [6, 5, 4, 3, 2, 1]);
  assert.deepEqual(all[0], { room: 'top-b', members: 6, visible: 6 });
  assert.equal((await ok('/v1/admin/rooms?top=1')).rooms.length, 1);
  // Another key that merely contains "top=" is not top.
  assert.equal((await ok('/v1/admin/rooms?stop=3')).rooms.filter((r) => r.room.startsWith('top-')).length, 6);
  assert.equal((await ok('/v1/admin/rooms?x=1&top=2')).rooms.length, 2);
  for (const bad of ['0', '101', 'x', '', '-1', '5x', '1'.repeat(40), '%zz']) {
    const r = await get(`/v1/admin/rooms?top=${bad}`);
    assert.equal(r.status, 400, `top=${bad}: ${r.text}`);
    assert.equal(r.json.error.code, 'bad_request');
  }
  // Without top: every room, as before.
  assert.equal((await ok('/v1/admin/rooms')).rooms.filter((r) => r.room.startsWith('top-')).length, 6);
});
