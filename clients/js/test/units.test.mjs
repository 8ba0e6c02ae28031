import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeClock } from './_clock.mjs';
import {
  createPresenceBuffer, createBackoff, createActivityTracker, createCursorPublisher,
  formatLastSeen, RoomModel, memberDigest,
} from '../index.js';

const P = (user, version, status = 'online', extra = {}) => ({ user, status, devices: {}, version, ...extra });

test('buffering: a burst of 200 updates causes one callback with one frozen map', () => {
  const clock = fakeClock();
  const calls = [];
  const b = createPresenceBuffer({ timers: clock, onFlush: (m, c) => calls.push([m, c]) });
  for (let i = 0; i < 200; i++) b.push(P(`u${i}`, 1));
  clock.advance(199);
  assert.equal(calls.length, 0);
  clock.advance(1);
  assert.equal(calls.length, 1);
  const [map, changed] = calls[0];
  assert.equal(map.size, 200);
  assert.equal(changed.length, 200);
  assert.ok(Object.isFrozen(map));
  assert.throws(() => map.set('x', 1));
  assert.throws(() => map.delete('u1'));
  assert.ok(Object.isFrozen(map.get('u0')));
  clock.advance(1000);
  assert.equal(calls.length, 1);
});

test('buffering: later updates of a user overwrite earlier ones; old versions are ignored', () => {
  const clock = fakeClock();
  const calls = [];
  const b = createPresenceBuffer({ windowMs: 200, timers: clock, onFlush: (m) => calls.push(m) });
  b.push(P('bob', 1, 'online'));
  b.push(P('bob', 2, 'busy'));
  b.push(P('bob', 3, 'dnd'));
  assert.equal(b.push(P('bob', 2, 'away')), false); // not larger than 3
  clock.advance(200);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].get('bob').status, 'dnd');
  assert.equal(b.push(P('bob', 3, 'online')), false);
  clock.advance(500);
  assert.equal(calls.length, 1);
  assert.equal(b.push(P('bob', 1, 'away'), { force: true }), true); // a new baseline (re-watch)
  clock.advance(200);
  assert.equal(calls[1].get('bob').status, 'away');
  assert.notEqual(calls[0], calls[1]);
  assert.equal(calls[0].get('bob').status, 'dnd'); // old maps never change
});

test('buffering: stale, then unknown, never offline; a fresh state clears it', () => {
  const clock = fakeClock();
  const b = createPresenceBuffer({ timers: clock });
  b.push(P('bob', 4, 'busy'));
  clock.advance(200);
  b.markAll('stale');
  clock.advance(200);
  assert.deepEqual([b.get('bob').status, b.get('bob').stale], ['busy', true]);
  b.markAll('unknown');
  clock.advance(200);
  assert.deepEqual([b.get('bob').status, b.get('bob').stale], ['unknown', true]);
  b.push(P('bob', 4, 'busy')); // same version after reconnect: still refreshes staleness
  clock.advance(200);
  assert.deepEqual([b.get('bob').status, b.get('bob').stale], ['busy', false]);
});

test('backoff: full jitter within exponential bounds, capped, reset', () => {
  const b1 = createBackoff({ baseMs: 100, capMs: 1000, random: () => 0.999999 });
  const maxes = Array.from({ length: 6 }, () => b1.next());
  assert.deepEqual(maxes, [99, 199, 399, 799, 999, 999]);
  const b0 = createBackoff({ baseMs: 100, capMs: 1000, random: () => 0 });
  assert.deepEqual([b0.next(), b0.next(), b0.next()], [0, 0, 0]);
  const b = createBackoff({ baseMs: 100, capMs: 1000, random: () => 0.5 });
  assert.deepEqual([b.next(), b.next(), b.next()], [50, 100, 200]);
  b.reset();
  assert.equal(b.next(), 50);
  const r = createBackoff({ baseMs: 500, capMs: 30000 });
  for (let i = 0; i < 50; i++) { const d = r.next(); assert.ok(d >= 0 && d < 30000); }
});

test('activity: idle -> false after idleMs, input -> true', () => {
  const clock = fakeClock();
  const listeners = {};
  const target = { addEventListener: (ev, fn, o) => { assert.equal(o.passive, true); listeners[ev] = fn; }, removeEventListener: (ev) => delete listeners[ev] };
  const changes = [];
  const a = createActivityTracker({ target, idleMs: 1000, timers: clock, onChange: (v) => changes.push(v) });
  assert.deepEqual(Object.keys(listeners).sort(), ['click', 'keydown', 'mousemove', 'scroll', 'touchstart']);
  clock.advance(600);
  listeners.mousemove();
  clock.advance(600); // 600 since input: still active
  assert.deepEqual(changes, []);
  clock.advance(400);
  assert.deepEqual(changes, [false]);
  assert.equal(a.active, false);
  listeners.keydown();
  listeners.keydown();
  assert.deepEqual(changes, [false, true]);
  clock.advance(1000);
  assert.deepEqual(changes, [false, true, false]);
  a.stop();
  assert.deepEqual(Object.keys(listeners), []);
});

test('formatLastSeen: every unit', () => {
  const now = 10 * 365 * 86400e3;
  const m = 60e3, h = 3600e3, d = 86400e3;
  assert.equal(formatLastSeen({ status: 'online', devices: {} }, now), 'online');
  assert.equal(formatLastSeen({ status: 'offline' }, now), 'offline');
  assert.equal(formatLastSeen({ status: 'unknown' }, now), 'status unknown');
  assert.equal(formatLastSeen(now - 5e3, now), 'last seen just now');
  assert.equal(formatLastSeen(now - m, now), 'last seen 1 minute ago');
  assert.equal(formatLastSeen(now - 4 * m - 59e3, now), 'last seen 4 minutes ago');
  assert.equal(formatLastSeen(now - 3 * h, now), 'last seen today');
  assert.equal(formatLastSeen(now - 3 * d, now), 'last seen this week');
  assert.equal(formatLastSeen(now - 10 * d, now), 'last seen this month');
  assert.equal(formatLastSeen(now - 100 * d, now), 'last seen this year');
  assert.equal(formatLastSeen(now - 400 * d, now), 'last seen a long time ago');
  // The server's own units when no clock is given.
  assert.equal(formatLastSeen({ status: 'offline', lastSeen: { ago: 'minutes', value: 4 } }), 'last seen 4 minutes ago');
  assert.equal(formatLastSeen({ at: 1, ago: 'seconds', value: 3 }), 'last seen just now');
  for (const [ago, text] of [['today', 'today'], ['this_week', 'this week'], ['this_month', 'this month'], ['this_year', 'this year'], ['long_ago', 'a long time ago']])
    assert.equal(formatLastSeen({ ago }), `last seen ${text}`);
});

test('cursor: at most 15/s, unchanged positions skipped, last one delivered', () => {
  const clock = fakeClock();
  const sent = [];
  const c = createCursorPublisher({ timers: clock, send: (p) => sent.push([clock.now(), p]) });
  for (let i = 0; i < 1000; i++) { c.update({ x: i / 1000, y: 0.5 }); clock.advance(1); } // 1000 moves in 1 s
  clock.advance(200);
  assert.ok(sent.length <= 16, `sent ${sent.length}`);
  for (let i = 1; i < sent.length; i++) assert.ok(sent[i][0] - sent[i - 1][0] >= 1000 / 15 - 1e-9);
  assert.deepEqual(sent.at(-1)[1], { x: 0.999, y: 0.5 });
  const n = sent.length;
  assert.equal(c.update({ x: 0.999, y: 0.5 }), false);
  clock.advance(1000);
  assert.equal(sent.length, n);
  c.update({ block: 'p3', offset: 7 });
  c.update({ block: 'p3', offset: 7 });
  clock.advance(100);
  assert.equal(sent.length, n + 1);
});

const member = (user, meta = {}) => ({ user, joinedAt: 1, meta });
const delta = (epoch, seq, count, { joins = [], leaves = [], patches = [] } = {}) =>
  ({ type: 'room_delta', room: 'r', epoch, seq, mode: 'normal', count, joins, leaves, patches });

test('rooms: snapshot then deltas, duplicates ignored, gap -> resync, epoch change', () => {
  const r = new RoomModel('r');
  assert.equal(r.apply({ type: 'room_snapshot', room: 'r', epoch: 7, seq: 2, mode: 'normal', count: 2, members: [member('a'), member('b')] }), 'applied');
  assert.deepEqual([...r.members.keys()], ['a', 'b']);
  assert.equal(r.apply({ type: 'room_joined', room: 'r', epoch: 7, seq: 2, mode: 'normal', count: 2 }), 'ignored');
  assert.equal(r.apply(delta(7, 3, 2, { joins: [member('c')], leaves: ['a'] })), 'applied');
  assert.equal(r.apply(delta(7, 4, 2, { patches: [member('b', { name: 'B' })] })), 'applied');
  assert.deepEqual(r.members.get('b').meta, { name: 'B' });
  assert.equal(r.apply(delta(7, 4, 2)), 'ignored'); // already applied
  assert.equal(r.apply(delta(7, 6, 2)), 'resync'); // gap
  assert.deepEqual(r.since, { epoch: 7, seq: 4 });
  assert.equal(r.apply(delta(8, 1, 1, { joins: [member('z')] })), 'resync'); // another epoch, model not empty
  // Snapshot mid-stream (leaving interval mode, or a resync answer): replace.
  assert.equal(r.apply({ type: 'room_snapshot', room: 'r', epoch: 7, seq: 9, mode: 'normal', count: 1, members: [member('q')] }), 'applied');
  assert.deepEqual([...r.members.keys()], ['q']);
  assert.equal(r.apply(delta(7, 10, 0, { leaves: ['q'] })), 'applied');
  // Room deleted and created again: adopt the new epoch on an empty model.
  assert.equal(r.apply(delta(99, 1, 1, { joins: [member('n')] })), 'applied');
  assert.deepEqual([r.epoch, r.seq, [...r.members.keys()]], [99, 1, ['n']]);
  assert.throws(() => r.members.set('x', 1));
});

// A client of user ann on a fake socket and clock: { c, ws, clock, sockets }.
async function fakeClient() {
  const { createClient } = await import('../index.js');
  const clock = fakeClock();
  const sockets = [];
  class FakeWS {
    constructor(url) { this.url = url; this.readyState = 1; this.sent = []; sockets.push(this); queueMicrotask(() => this.onopen && this.onopen()); }
    send(s) { this.sent.push(JSON.parse(s)); }
    close() {}
    recv(m) { this.onmessage({ data: JSON.stringify(m) }); }
  }
  const c = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, window: null, document: null, navigator: null });
  return { c, ws: sockets[0], clock, sockets };
}

test('client rooms: a gap makes the client leave and join again with since', async () => {
  const { c, ws, clock, sockets } = await fakeClient();
  assert.match(ws.url, /^ws:\/\/h:1\/v1\/ws\?user=ann$/);
  ws.recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
  assert.equal(c.state, 'open');
  const room = c.join('r', { meta: { name: 'Ann' } });
  const join = ws.sent.find((m) => m.type === 'join');
  assert.deepEqual(join.meta, { name: 'Ann' });
  const changes = [];
  room.onChange((m) => changes.push([...m.keys()]));
  ws.recv({ type: 'room_snapshot', room: 'r', epoch: 5, seq: 1, mode: 'normal', count: 1, members: [member('ann', { name: 'Ann' })] });
  ws.recv({ type: 'room_joined', room: 'r', epoch: 5, seq: 1, mode: 'normal', count: 1, resumed: false, ref: join.ref });
  assert.equal(room.joined, true);
  ws.recv(delta(5, 2, 2, { joins: [member('bob')] }));
  assert.deepEqual(changes.at(-1), ['ann', 'bob']);
  ws.sent.length = 0;
  ws.recv(delta(5, 4, 2)); // seq 3 missing
  assert.deepEqual(ws.sent.map((m) => m.type), ['room_leave', 'join']);
  assert.deepEqual(ws.sent[1].since, { epoch: 5, seq: 2 });
  assert.deepEqual(ws.sent[1].meta, { name: 'Ann' });
  ws.recv(delta(5, 5, 2)); // in flight before the leave: ignored
  ws.recv({ type: 'ack', ref: ws.sent[0].ref });
  ws.recv(delta(5, 3, 2, { patches: [member('bob', { n: 1 })] }));
  ws.recv(delta(5, 4, 2));
  ws.recv({ type: 'room_joined', room: 'r', epoch: 5, seq: 4, mode: 'normal', count: 2, resumed: true, ref: ws.sent[1].ref });
  assert.equal(room.seq, 4);
  assert.deepEqual(room.members.get('bob').meta, { n: 1 });
  // Heartbeats at welcome.heartbeatMs, activity separately.
  ws.sent.length = 0;
  clock.advance(15000);
  assert.deepEqual(ws.sent.map((m) => m.type), ['heartbeat']);
  // Reconnect: backoff, resume, rejoin with since, re-watch.
  c.watch(['bob']);
  ws.onclose({ code: 1006 });
  assert.equal(c.state, 'reconnecting');
  clock.advance(60000);
  const ws2 = sockets[1];
  assert.match(ws2.url, /resume=s1/);
  ws2.recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: true });
  const types = ws2.sent.map((m) => m.type);
  assert.deepEqual(types, ['watch', 'join']);
  assert.deepEqual(ws2.sent[1].since, { epoch: 5, seq: 4 });
  c.close();
});

const hex = (users) => users.reduce((d, u) => d ^ memberDigest(u), 0n).toString(16).padStart(16, '0');

test('rooms: the member digest is FNV-1a-64 per id, XORed; a model that differs from it is diverged', () => {
  assert.equal(memberDigest(''), 0xcbf29ce484222325n);
  assert.equal(memberDigest('a'), 0xaf63dc4c8601ec8cn);
  assert.equal(memberDigest('foobar'), 0x85944171f73967e8n);
  assert.equal(memberDigest('é'), memberDigest('\u00e9')); // UTF-8 bytes, not UTF-16 units
  const r = new RoomModel('r');
  const snap = { type: 'room_snapshot', room: 'r', epoch: 7, seq: 1, mode: 'normal', count: 2, members: [member('a'), member('b')] };
  assert.equal(r.apply({ ...snap, digest: hex(['a', 'b']) }), 'applied');
  assert.equal(r.apply({ ...delta(7, 2, 2, { joins: [member('c')], leaves: ['a'] }), digest: hex(['b', 'c']) }), 'applied');
  assert.equal(r.apply({ ...delta(7, 3, 2, { patches: [member('b', { n: 1 })] }), digest: hex(['b', 'c']) }), 'applied');
  // The server's set has d too (a delta this model never saw): diverged.
  assert.equal(r.apply({ ...delta(7, 4, 3, { joins: [member('e')] }), digest: hex(['b', 'c', 'd', 'e']) }), 'diverged');
  r.forget();
  assert.deepEqual(r.since, { epoch: 0, seq: 0 });
  assert.equal(r.apply({ ...snap, seq: 4, count: 4, members: ['b', 'c', 'd', 'e'].map((u) => member(u)), digest: hex(['b', 'c', 'd', 'e']) }), 'applied');
  // Interval mode lists a sample: not checked. No digest: not checked.
  assert.equal(r.apply({ ...delta(7, 5, 1200, { joins: [member('f')] }), mode: 'interval', digest: hex(['x']) }), 'applied');
  assert.equal(r.apply({ ...snap, seq: 6, members: [member('a')] }), 'applied');
});

test('client rooms: a diverged digest makes the client join again for a snapshot', async () => {
  const { c, ws } = await fakeClient();
  ws.recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
  const room = c.join('r');
  const join = ws.sent.find((m) => m.type === 'join');
  ws.recv({ type: 'room_snapshot', room: 'r', epoch: 5, seq: 1, mode: 'normal', count: 1, digest: hex(['ann']), members: [member('ann')] });
  ws.recv({ type: 'room_joined', room: 'r', epoch: 5, seq: 1, mode: 'normal', count: 1, digest: hex(['ann']), resumed: false, ref: join.ref });
  ws.sent.length = 0;
  ws.recv({ ...delta(5, 2, 2, { joins: [member('bob')] }), digest: hex(['ann', 'bob']) });
  assert.deepEqual(ws.sent, []);
  ws.recv({ ...delta(5, 3, 3, { joins: [member('cy')] }), digest: hex(['ann', 'bob', 'cy', 'dee']) });
  assert.deepEqual(ws.sent.map((m) => m.type), ['room_leave', 'join']);
  assert.deepEqual(ws.sent[1].since, { epoch: 0, seq: 0 }); // no deltas can repair it: a snapshot
  assert.deepEqual([...room.members.keys()], ['ann', 'bob', 'cy']);
  c.close();
});
