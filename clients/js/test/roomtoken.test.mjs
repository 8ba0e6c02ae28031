// Per-room subscription tokens: asked for on every (re)join with the
// connection id of the current welcome, sent in the join; failures reach
// room.onError. Against a fake socket and clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeClock } from './_clock.mjs';
import { fakeSockets, tick } from './_fakews.mjs';
import { createClient } from '../index.js';

const NO_DOM = { window: null, document: null, navigator: null };

test('room token: one call per connection, in the join; a resync joins again with a token for the same connection', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const c = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, ...NO_DOM });
  const calls = [];
  const room = c.join('doc', { meta: { n: 1 }, token: async (req) => { calls.push(req); return `tok-${req.connectionId}`; } });
  assert.deepEqual(calls, [], 'nothing before the welcome');
  sockets[0].recv({ type: 'welcome', connectionId: '11', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
  await tick();
  assert.deepEqual(calls, [{ room: 'doc', connectionId: '11', user: 'ann' }]);
  const join = sockets[0].last('join');
  assert.equal(join.token, 'tok-11');
  assert.deepEqual(join.meta, { n: 1 });
  sockets[0].recv({ type: 'room_snapshot', room: 'doc', epoch: 1, seq: 1, mode: 'normal', count: 1, members: [{ user: 'ann', joinedAt: 1, meta: { n: 1 } }] });
  sockets[0].recv({ type: 'room_joined', room: 'doc', epoch: 1, seq: 1, mode: 'normal', count: 1, ref: join.ref });
  assert.equal(room.joined, true);
  // A gap: leave + join again, with a token (same connection).
  sockets[0].recv({ type: 'room_delta', room: 'doc', epoch: 1, seq: 3, mode: 'normal', count: 1, joins: [], leaves: [], patches: [] });
  sockets[0].recv({ type: 'ack', ref: sockets[0].last('room_leave').ref });
  await tick();
  const rejoin = sockets[0].last('join');
  assert.notEqual(rejoin.ref, join.ref);
  assert.equal(rejoin.token, 'tok-11');
  assert.deepEqual(rejoin.since, { epoch: 1, seq: 1 });
  // Reconnect: a new connection, a new token.
  sockets[0].drop(1006);
  clock.advance(60000);
  await tick();
  sockets[1].recv({ type: 'welcome', connectionId: '12', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: true });
  await tick();
  assert.equal(sockets[1].last('join').token, 'tok-12');
  assert.deepEqual(calls.map((x) => x.connectionId), ['11', '11', '12']);
  c.close();
});

test('room token: a failing token function and a forbidden join reach room.onError; no join is sent without a token', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const c = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, ...NO_DOM });
  const errs = [];
  const r1 = c.join('a', { token: () => Promise.reject(Object.assign(new Error('backend says no'), { code: 'denied' })) });
  const r2 = c.join('b', { token: 'stale-token' });
  r1.onError((e) => errs.push(['a', e.code, e.message]));
  r2.onError((e) => errs.push(['b', e.code]));
  sockets[0].recv({ type: 'welcome', connectionId: '7', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
  await tick();
  const joins = sockets[0].sent.filter((m) => m.type === 'join');
  assert.deepEqual(joins.map((m) => [m.room, m.token]), [['b', 'stale-token']]);
  sockets[0].recv({ type: 'error', code: 'forbidden', message: 'not allowed', ref: joins[0].ref });
  assert.deepEqual(errs, [['a', 'denied', 'backend says no'], ['b', 'forbidden']]);
  assert.equal(r1.joined, false);
  assert.equal(r2.joined, false);
  c.close();
});
