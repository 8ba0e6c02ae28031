// setPrivacy / privacy_changed, presence without `version`, refused tokens
// and admin kicks, against a fake socket and a fake clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeClock } from './_clock.mjs';
import { fakeSockets, tick } from './_fakews.mjs';
import { createClient, createPresenceBuffer } from '../index.js';

const NO_DOM = { window: null, document: null, navigator: null };
const WELCOME = { type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false };

function setup(extra = {}) {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const c = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, bufferMs: 100, ...NO_DOM, ...extra });
  return { c, clock, sockets, ws: () => sockets.at(-1) };
}

test('setPrivacy sends only the given fields, resolves on ack; privacy_changed sets client.privacy', async () => {
  const { c, ws } = setup();
  const seen = [];
  c.onPrivacy((p) => seen.push(p));
  assert.equal(c.privacy, null);
  ws().recv(WELCOME);
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
  assert.deepEqual(c.privacy, { online: 'everyone', lastSeen: 'everyone', invisible: false });
  assert.ok(Object.isFrozen(c.privacy));
  assert.equal(seen.length, 1);

  const done = c.setPrivacy({ invisible: true });
  const msg = ws().last('privacy');
  assert.deepEqual(Object.keys(msg).sort(), ['invisible', 'ref', 'type']);
  assert.equal(msg.invisible, true);
  assert.equal(c.privacy.invisible, false, 'nothing changes before the server says so');
  // The server tells every session, then acks.
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: true } });
  ws().recv({ type: 'ack', ref: msg.ref });
  const p = await done;
  assert.deepEqual(p, { online: 'everyone', lastSeen: 'everyone', invisible: true });
  assert.equal(c.privacy.invisible, true);
  assert.equal(seen.length, 2, 'one event per change');

  // An ack before privacy_changed: the settings are ours at once, the event confirms without a repeat.
  const done2 = c.setPrivacy({ online: 'contacts', lastSeen: 'nobody' });
  const msg2 = ws().last('privacy');
  assert.deepEqual([msg2.online, msg2.lastSeen, 'invisible' in msg2], ['contacts', 'nobody', false]);
  ws().recv({ type: 'ack', ref: msg2.ref });
  assert.deepEqual(await done2, { online: 'contacts', lastSeen: 'nobody', invisible: true });
  ws().recv({ type: 'privacy_changed', privacy: { online: 'contacts', lastSeen: 'nobody', invisible: true } });
  assert.equal(seen.length, 3);
  c.close();
});

test("setPrivacy rejects with the server's error code; nothing changes; onError is not called", async () => {
  const { c, ws } = setup();
  const errors = [];
  c.onError((e) => errors.push(e));
  ws().recv(WELCOME);
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
  const done = c.setPrivacy({ invisible: true });
  ws().recv({ type: 'error', code: 'store_unavailable', message: 'the settings store is unavailable', ref: ws().last('privacy').ref });
  await assert.rejects(done, (e) => e.code === 'store_unavailable' && /store/.test(e.message));
  const bad = c.setPrivacy({ online: 'friends' });
  assert.equal(ws().last('privacy').online, 'friends', 'the server judges values');
  ws().recv({ type: 'error', code: 'bad_request', message: 'online must be everyone, contacts or nobody', ref: ws().last('privacy').ref });
  await assert.rejects(bad, { code: 'bad_request' });
  assert.equal(c.privacy.invisible, false);
  assert.deepEqual(errors, []);
  c.close();
});

test('setPrivacy while disconnected rejects at once (not queued); the socket closing rejects a pending one', async () => {
  const { c, ws, clock } = setup();
  await assert.rejects(c.setPrivacy({ invisible: true }), { code: 'not_connected' });
  assert.equal(ws().sent.filter((m) => m.type === 'privacy').length, 0);
  ws().recv(WELCOME);
  const p = c.setPrivacy({ invisible: true });
  ws().drop(1006);
  await assert.rejects(p, /connection closed/);
  // A new session is told its settings right after the welcome.
  clock.advance(60000);
  await tick();
  ws().recv({ ...WELCOME, sessionId: 's1', resumed: true });
  ws().recv({ type: 'privacy_changed', privacy: { online: 'nobody', lastSeen: 'contacts', invisible: true } });
  assert.deepEqual(c.privacy, { online: 'nobody', lastSeen: 'contacts', invisible: true });
  assert.equal(ws().sent.filter((m) => m.type === 'privacy').length, 0, 'settings are durable: never re-sent');
  c.close();
});

test("a change from another session (or the admin API) arriving before our ack wins over ours", async () => {
  const { c, ws } = setup();
  ws().recv(WELCOME);
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
  const done = c.setPrivacy({ invisible: true });
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: true } });
  ws().recv({ type: 'privacy_changed', privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
  ws().recv({ type: 'ack', ref: ws().last('privacy').ref });
  assert.equal((await done).invisible, false);
  assert.equal(c.privacy.invisible, false);
  c.close();
});

test('buffer: presence without version is ordered by the stream; equal states cause no callback', () => {
  const clock = fakeClock();
  const calls = [];
  const b = createPresenceBuffer({ timers: clock, onFlush: (m, ch) => calls.push([m, ch]) });
  const P = (user, status, extra = {}) => ({ user, status, devices: status === 'offline' ? {} : { web: status }, ...extra });
  b.push(P('bob', 'online'));
  b.push(P('bob', 'busy'));
  b.push(P('bob', 'dnd'));
  clock.advance(200);
  assert.equal(calls.length, 1);
  assert.equal(calls[0][0].get('bob').status, 'dnd');
  assert.equal('version' in calls[0][0].get('bob'), false);
  // An earlier-looking state later in the stream still wins (no version to compare).
  b.push(P('bob', 'online'));
  clock.advance(200);
  assert.equal(calls.at(-1)[0].get('bob').status, 'online');
  // The same state again (a watch snapshot, a resume): nothing to render.
  assert.equal(b.push(P('bob', 'online')), false);
  clock.advance(200);
  assert.equal(calls.length, 2);
  // Invisible, blocked and unknown look the same: offline with no devices and no last seen.
  b.push({ user: 'bob', status: 'offline', devices: {} });
  clock.advance(200);
  assert.deepEqual({ ...calls.at(-1)[0].get('bob') }, { user: 'bob', status: 'offline', devices: {}, stale: false });
  // Stale, then the same state from a new connection: fresh again, one flush.
  b.markAll('stale');
  clock.advance(200);
  assert.equal(b.get('bob').stale, true);
  b.push({ user: 'bob', status: 'offline', devices: {} });
  clock.advance(200);
  assert.equal(b.get('bob').stale, false);
  assert.equal(calls.length, 5);
});

test('buffer: own presence keeps its version ordering; a restart baseline with the same state is silent', () => {
  const clock = fakeClock();
  const calls = [];
  const b = createPresenceBuffer({ timers: clock, onFlush: (m) => calls.push(m) });
  const me = (version, status) => ({ user: 'ann', status, devices: { web: status }, version });
  b.push(me(41, 'online'));
  b.push(me(42, 'busy'));
  clock.advance(200);
  assert.equal(b.push(me(40, 'away')), false, 'older version ignored');
  clock.advance(200);
  assert.equal(calls.length, 1);
  // The server restarted: versions count from 1 again; the forced first state is the baseline.
  assert.equal(b.push(me(1, 'busy'), { force: true }), false, 'same state: no callback');
  clock.advance(200);
  assert.equal(calls.length, 1);
  assert.equal(b.push(me(2, 'dnd')), true, 'later versions of the new baseline count');
  clock.advance(200);
  assert.equal(calls.length, 2);
  assert.equal(b.get('ann').status, 'dnd');
  assert.equal(b.get('ann').version, 2);
});

test('client: after a reconnect, snapshots of others without version clear staleness in one flush', async () => {
  const { c, ws, clock } = setup();
  const flushes = [];
  c.onPresence((m, changed) => flushes.push([...changed].sort()));
  c.watch(['bob', 'carol', 'ann']);
  ws().recv(WELCOME);
  ws().recv({ type: 'presence', presence: { user: 'bob', status: 'online', devices: { web: 'online' } } });
  ws().recv({ type: 'presence', presence: { user: 'carol', status: 'offline', devices: {}, lastSeen: { at: 5, ago: 'long_ago' } } });
  ws().recv({ type: 'presence', presence: { user: 'ann', status: 'online', devices: { web: 'online' }, version: 9 } });
  ws().recv({ type: 'presence', presence: { user: 'dave', status: 'online', devices: {} } }); // not watched
  clock.advance(100);
  assert.deepEqual(flushes, [['ann', 'bob', 'carol']]);
  ws().drop(1006);
  clock.advance(100);
  assert.equal(c.getPresence('bob').stale, true);
  assert.equal(c.getPresence('bob').status, 'online', 'last known, never offline');
  clock.advance(5000);
  await tick();
  ws().recv({ ...WELCOME, resumed: true });
  assert.deepEqual(ws().last('watch').users.sort(), ['ann', 'bob', 'carol']);
  ws().recv({ type: 'presence', presence: { user: 'bob', status: 'online', devices: { web: 'online' } } });
  ws().recv({ type: 'presence', presence: { user: 'carol', status: 'offline', devices: {} } }); // now hides its last seen
  ws().recv({ type: 'presence', presence: { user: 'ann', status: 'online', devices: { web: 'online' }, version: 2 } }); // restarted
  const before = flushes.length;
  clock.advance(100);
  assert.equal(flushes.length, before + 1, 'one flush for the whole snapshot');
  assert.equal(c.getPresence('bob').stale, false);
  assert.equal(c.getPresence('carol').lastSeen, undefined);
  ws().recv({ type: 'presence', presence: { user: 'ann', status: 'busy', devices: { web: 'busy' }, version: 3 } });
  clock.advance(100);
  assert.equal(c.getPresence('ann').status, 'busy');
  c.close();
});

test('a refused fixed token closes the client (no reconnect loop); a token function tries again', async () => {
  {
    const { c, ws, clock, sockets } = setup({ user: undefined, token: 'bad.token.x' });
    const errors = [], states = [];
    c.onError((e) => errors.push(e.code));
    c.onState((s) => states.push(s));
    await tick();
    assert.deepEqual(ws().sent, [{ type: 'auth', token: 'bad.token.x' }]);
    assert.doesNotMatch(ws().url, /user=/);
    ws().recv({ type: 'error', code: 'unauthorized', message: 'invalid token' });
    await tick();
    assert.deepEqual(errors, ['unauthorized']);
    assert.equal(c.state, 'closed');
    clock.advance(120000);
    await tick();
    assert.equal(sockets.length, 1);
    c.close();
  }
  {
    let n = 0;
    const { c, ws, clock, sockets } = setup({ user: undefined, token: async () => `tok${++n}` });
    await tick(); await tick();
    assert.equal(ws().sent[0].token, 'tok1');
    ws().recv({ type: 'error', code: 'unauthorized', message: 'invalid token' });
    await tick();
    assert.equal(c.state, 'connecting');
    clock.advance(60000);
    await tick(); await tick();
    assert.equal(sockets.length, 2);
    assert.equal(ws().sent[0].token, 'tok2');
    ws().recv({ ...WELCOME });
    assert.equal(c.state, 'open');
    c.close();
  }
});

test('an admin kick ends the client (closed, error "kicked") instead of coming straight back', async () => {
  const { c, ws, clock, sockets } = setup();
  const errors = [];
  c.onError((e) => errors.push([e.code, e.message]));
  ws().recv(WELCOME);
  ws().recv({ type: 'session_ended', reason: 'kicked', message: 'signed out by support' });
  ws().drop(4000);
  assert.equal(c.state, 'closed');
  assert.deepEqual(errors, [['kicked', 'signed out by support']]);
  clock.advance(120000);
  await tick();
  assert.equal(sockets.length, 1);
  // A TTL end (4000 without a kick) still reconnects with a new session.
  const d = setup();
  d.ws().recv(WELCOME);
  d.ws().recv({ type: 'session_ended', reason: 'ttl' });
  d.ws().drop(4000);
  d.clock.advance(60000);
  await tick();
  assert.equal(d.sockets.length, 2);
  assert.doesNotMatch(d.ws().url, /resume=/);
  d.c.close();
});
