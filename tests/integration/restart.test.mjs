// A clean restart of a single node keeps presence (issue 20): SIGTERM saves
// every session to the settings store, the next start on the same store
// restores them in their reconnect grace and deletes them from the store.
// Clients that resume within the grace cause no event for their watchers
// and rooms; a client that does not come back goes offline once, after its
// grace, with the last seen it had; after kill -9 nothing is restored, and
// state restored once is never restored again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');

const GRACE = 6000;
const GRACE_P = 25000;
const KEY = 'restart-admin-key-0123456789abcdef';
const APP = { id: '4712', key: 'restart-key-1', secret: 'restart-secret-1' };
const FLAGS = ['--workers', '2', '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '20',
  '--room-batch-ms', '20', '--admin-api-key', KEY, '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}`];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

function tempStore(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-restart-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'settings.db');
}

// Rows in the table of saved sessions (the server must not be running).
function savedRows(store) {
  return Number(execFileSync('sqlite3', [store, 'SELECT count(*) FROM saved_sessions']).toString().trim());
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// Opens a client, waits for its welcome, and for the ack of each message.
async function openWith(srv, opts, msgs = []) {
  const c = await Client.open(srv, opts);
  assert.equal(c.welcome.type, 'welcome', JSON.stringify(c.welcome));
  for (const [i, m] of msgs.entries()) {
    c.send({ ...m, ref: `r${i}` });
    await c.next((x) => (x.type === 'ack' || x.type === 'room_joined' || x.type === 'error') && x.ref === `r${i}`)
      .then((x) => assert.notEqual(x.type, 'error', JSON.stringify(x)));
  }
  return c;
}

// Waits until u reads online to everyone: the node has read u's settings,
// so a clean stop saves u's sessions (one whose settings are still being
// read when the stop comes counts as hidden and is left out, persist.h).
async function settingsRead(srv, ...users) {
  for (const u of users) {
    await waitUntil(async () => (await (await fetch(`${srv.url}/v1/presence?user=${u}`)).json())
      .users[0].status !== 'offline', `${u} online: its settings read`);
  }
}

async function clean(srv) {
  const { code, signal } = await srv.stop('SIGTERM');
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
  assert.doesNotMatch(srv.stderr, /ERROR: AddressSanitizer|runtime error:|LeakSanitizer/);
}

// Ends c's session at once (a closed socket would leave it in its grace,
// and a clean stop saves it).
async function leave(c) {
  c.send({ type: 'leave' });
  await c.closed;
}

const isTransition = (m) => m.type === 'presence' || m.type === 'presence_list' || m.type === 'room_delta';

test('every session resumes within the grace: no event for watchers or rooms, state intact', async (t) => {
  const store = tempStore(t);
  const [ann, bob, eve] = [uniq('ann'), uniq('bob'), uniq('eve')];
  const room = uniq('room');
  let srv = await startServer([...FLAGS, '--store', store]);
  const expires = 3600 * 1000;
  const a = await openWith(srv, { user: ann }, [
    { type: 'status', status: 'dnd', expiresInMs: expires },
    { type: 'custom', text: 'In a meeting', emoji: ':calendar:', expiresInMs: expires },
  ]);
  const b = await openWith(srv, { user: bob }, [{ type: 'join', room, meta: { name: 'Bob', color: '#e11' } }]);
  const w = await openWith(srv, { user: eve }, [{ type: 'watch', users: [ann, bob] },
    { type: 'join', room, meta: { name: 'Eve' } }]);
  const before = {};
  for (const u of [ann, bob]) {
    before[u] = await waitUntil(() => {
      const p = w.seen.filter((m) => m.type === 'presence' && m.presence.user === u).pop()?.presence;
      return p && p.status !== 'offline' && (u !== ann || p.custom) ? p : null;
    }, `presence of ${u}`);
  }
  assert.equal(before[ann].status, 'dnd');
  const sids = { a: a.welcome.sessionId, b: b.welcome.sessionId, w: w.welcome.sessionId };
  const snap = w.seen.find((m) => m.type === 'room_snapshot' || m.type === 'room_delta');
  assert.ok(snap, 'eve saw the room');
  await sleep(100);

  await clean(srv);
  assert.equal(savedRows(store), 3, 'three sessions saved');
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  assert.match(srv.stderr, /restoring 3 saved sessions/);

  // Everyone comes back within the grace, each with its session id.
  const w2 = await openWith(srv, { user: eve, resume: sids.w });
  assert.equal(w2.welcome.resumed, true);
  w2.send({ type: 'watch', users: [ann, bob], ref: 'w' });
  w2.send({ type: 'join', room, since: { epoch: 1, seq: 1 }, ref: 'j' });
  const a2 = await openWith(srv, { user: ann, resume: sids.a });
  const b2 = await openWith(srv, { user: bob, resume: sids.b });
  assert.equal(a2.welcome.resumed, true);
  assert.equal(b2.welcome.resumed, true);
  b2.send({ type: 'join', room, ref: 'jb' });
  await b2.next((m) => m.type === 'room_joined' && m.ref === 'jb');

  // The watcher's snapshots are the state from before the stop.
  const pa = await w2.presenceOf(ann);
  const pb = await w2.presenceOf(bob);
  assert.equal(pa.status, 'dnd');
  assert.deepEqual(pa.custom, before[ann].custom, 'custom status with its expiry');
  assert.equal(pb.status, 'online');
  // The room: a snapshot of a new epoch (resumed false) with the same
  // members and metadata.
  const rs = await w2.next((m) => m.type === 'room_snapshot' && m.room === room);
  const joined = await w2.next((m) => m.type === 'room_joined' && m.ref === 'j');
  assert.equal(joined.resumed, false);
  const metas = Object.fromEntries(rs.members.map((m) => [m.user, m.meta]));
  assert.deepEqual(metas, { [bob]: { name: 'Bob', color: '#e11' }, [eve]: { name: 'Eve' } });

  // Then nothing: no presence transition and no room delta, through the
  // end of the grace and a little after.
  await sleep(GRACE + 1000);
  assert.deepEqual(w2.msgs.filter(isTransition), [], 'no event for the watcher');
  assert.deepEqual(b2.msgs.filter(isTransition), [], 'no event for the member');
  // The saved rows were taken at start.
  assert.equal((await adminOk(srv, KEY, 'GET', `/v1/admin/presence?user=${ann}`)).users[0].status, 'dnd');
  for (const c of [w2, a2, b2]) c.close();
  await srv.stop('SIGKILL'); // kill -9: this run saves nothing
  assert.equal(savedRows(store), 0, 'the restored state was deleted from the store at start');
});

test('a user who does not come back goes offline once, after the grace, with last seen', async (t) => {
  const store = tempStore(t);
  const [ann, eve] = [uniq('ann'), uniq('eve')];
  let srv = await startServer([...FLAGS, '--store', store]);
  const a = await openWith(srv, { user: ann });
  const w = await openWith(srv, { user: eve }, [{ type: 'watch', users: [ann] }]);
  await waitUntil(() => w.seen.find((m) => m.type === 'presence' && m.presence.status === 'online'), 'ann online');
  const sidW = w.welcome.sessionId;
  await sleep(200);
  const stoppedAt = Date.now();
  await clean(srv);
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  const startedAt = Date.now();
  const w2 = await openWith(srv, { user: eve, resume: sidW }, [{ type: 'watch', users: [ann] }]);
  assert.equal((await w2.presenceOf(ann)).status, 'online', 'restored: still online');
  const off = await w2.presenceOf(ann, GRACE + 5000);
  const at = Date.now();
  assert.equal(off.status, 'offline');
  assert.ok(at - startedAt >= GRACE - 1500, `offline after the grace (${at - startedAt} ms)`);
  assert.ok(off.lastSeen, 'with last seen');
  assert.ok(off.lastSeen.at <= stoppedAt + 1000, `last seen ${off.lastSeen.at} is from before the stop ${stoppedAt}`);
  await sleep(1500);
  assert.deepEqual(w2.drainPresence(ann), [], 'exactly once');
  w2.close();
  void a;
});

test('kill -9 saves nothing, and a restored state is not restored twice', async (t) => {
  const store = tempStore(t);
  const ann = uniq('ann');
  let srv = await startServer([...FLAGS, '--store', store]);
  let a = await openWith(srv, { user: ann });
  let sid = a.welcome.sessionId;
  await srv.stop('SIGKILL');
  assert.equal(savedRows(store), 0, 'kill -9: no saved state');
  srv = await startServer([...FLAGS, '--store', store]);
  assert.doesNotMatch(srv.stderr, /restoring/);
  let r = await Client.open(srv, { user: ann, resume: sid });
  assert.equal(r.welcome.resumed, false, 'nothing restored after kill -9');
  await leave(r);
  // A clean stop, a start that restores, then kill -9: the next start is empty.
  a = await openWith(srv, { user: ann });
  sid = a.welcome.sessionId;
  await settingsRead(srv, ann);
  await clean(srv);
  assert.equal(savedRows(store), 1);
  srv = await startServer([...FLAGS, '--store', store]);
  assert.match(srv.stderr, /restoring 1 saved sessions/);
  await srv.stop('SIGKILL');
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  assert.doesNotMatch(srv.stderr, /restoring/);
  r = await Client.open(srv, { user: ann, resume: sid });
  assert.equal(r.welcome.resumed, false, 'restored once, never again');
  r.close();
});

test('a saved state older than restore-max-age-s is discarded with a log line', async (t) => {
  const store = tempStore(t);
  const ann = uniq('ann');
  let srv = await startServer([...FLAGS, '--store', store]);
  const a = await openWith(srv, { user: ann });
  await settingsRead(srv, ann);
  await clean(srv);
  // Ten minutes ago, as far as the next start can tell.
  execFileSync('sqlite3', [store, `UPDATE saved_sessions SET saved_ms = saved_ms - 600000`]);
  srv = await startServer([...FLAGS, '--store', store, '--restore-max-age-s', '300']);
  t.after(() => srv.stop('SIGKILL'));
  assert.match(srv.stderr, /1 saved sessions discarded: saved 60\d s ago, over restore-max-age-s \(300\)/);
  const r = await Client.open(srv, { user: ann, resume: a.welcome.sessionId });
  assert.equal(r.welcome.resumed, false);
  await leave(r);
  await clean(srv);
  assert.equal(savedRows(store), 0, 'no session: nothing saved');
});

test('a damaged saved row is dropped with a log line, the others restored', async (t) => {
  const store = tempStore(t);
  const [ann, bob] = [uniq('ann'), uniq('bob')];
  let srv = await startServer([...FLAGS, '--store', store]);
  const a = await openWith(srv, { user: ann });
  const b = await openWith(srv, { user: bob });
  await settingsRead(srv, ann, bob);
  await clean(srv);
  execFileSync('sqlite3', [store, `UPDATE saved_sessions SET data = '{"v":1,"user":"bad user"}' WHERE sid = '${b.welcome.sessionId}'`]);
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  assert.match(srv.stderr, new RegExp(`saved session ${b.welcome.sessionId} dropped: invalid session, user or room id`));
  assert.match(srv.stderr, /restoring 1 saved sessions \(1 dropped\)/);
  const a2 = await Client.open(srv, { user: ann, resume: a.welcome.sessionId });
  assert.equal(a2.welcome.resumed, true);
  a2.close();
});

test('an invisible user stays indistinguishable from an absent one across the restart', async (t) => {
  const store = tempStore(t);
  const [hid, eve, ctl] = [uniq('hid'), uniq('eve'), uniq('ctl')];
  const room = uniq('room');
  let srv = await startServer([...FLAGS, '--store', store]);
  await adminOk(srv, KEY, 'PUT', `/v1/admin/users/${hid}/privacy`, { invisible: true });
  const h = await openWith(srv, { user: hid }, [{ type: 'status', status: 'busy' },
    { type: 'join', room, meta: { name: 'Hidden' } }]);
  const c = await openWith(srv, { user: ctl }, [{ type: 'join', room, meta: { name: 'Ctl' } }]);
  void h; void c;
  await sleep(100);
  await clean(srv);
  // Its session is not saved: restoring it could only show it.
  assert.match(srv.stderr, /saved 1 sessions for the next start \(1 of invisible users not\)/);
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  // A watcher that never saw either: the hidden user reads as an unknown
  // one (offline, no last seen), the room as if only ctl were in it.
  const w = await openWith(srv, { user: eve }, [{ type: 'watch', users: [hid, uniq('nobody')] }]);
  const p = await w.presenceOf(hid);
  assert.equal(p.status, 'offline');
  assert.equal(p.lastSeen, undefined);
  w.send({ type: 'join', room, ref: 'j' });
  const snap = await w.next((m) => m.type === 'room_snapshot' && m.room === room);
  assert.deepEqual(snap.members.map((m) => m.user).sort(), [ctl, eve].sort());
  // Neither of the two restored sessions comes back: the hidden one's end
  // is no event for anyone; ctl's is one leave.
  await sleep(GRACE + 1000);
  assert.deepEqual(w.drainPresence(hid), [], 'no event about the hidden user');
  const deltas = w.msgs.filter((m) => m.type === 'room_delta');
  assert.equal(deltas.length, 1, JSON.stringify(deltas));
  assert.deepEqual(deltas[0].leaves, [ctl]);
  assert.equal(deltas[0].count, 1);
  w.close();
});

test('a viewer who sees last seen but not online status sees the same last seen after the restart', async (t) => {
  const store = tempStore(t);
  const [ann, eve] = [uniq('ann'), uniq('eve')];
  let srv = await startServer([...FLAGS, '--store', store]);
  await adminOk(srv, KEY, 'PUT', `/v1/admin/users/${ann}/privacy`, { online: 'nobody', lastSeen: 'everyone' });
  await leave(await openWith(srv, { user: ann })); // offline once: a last seen
  await sleep(100);
  const a = await openWith(srv, { user: ann }); // online again, shown offline
  await sleep(200); // past the debounce: online is the emitted view
  const w = await openWith(srv, { user: eve }, [{ type: 'watch', users: [ann] }]);
  const before = await w.presenceOf(ann);
  assert.equal(before.status, 'offline');
  assert.ok(before.lastSeen, 'the last public offline\'s last seen');
  await clean(srv);
  srv = await startServer([...FLAGS, '--store', store]);
  t.after(() => srv.stop('SIGKILL'));
  const a2 = await openWith(srv, { user: ann, resume: a.welcome.sessionId });
  assert.equal(a2.welcome.resumed, true);
  const w2 = await openWith(srv, { user: eve, resume: w.welcome.sessionId }, [{ type: 'watch', users: [ann] }]);
  const after = await w2.presenceOf(ann);
  assert.equal(after.status, 'offline');
  assert.deepEqual(after.lastSeen?.at, before.lastSeen.at);
  a2.close();
  w2.close();
});

test('a user over max-sessions-per-user at the start keeps its most recent sessions', async (t) => {
  const store = tempStore(t);
  const ann = uniq('ann');
  let srv = await startServer([...FLAGS, '--store', store]);
  const cs = [];
  for (let i = 0; i < 4; i++) {
    cs.push(await openWith(srv, { user: ann }));
    await sleep(30); // distinct last seen, in this order
  }
  await settingsRead(srv, ann);
  await clean(srv);
  srv = await startServer([...FLAGS, '--store', store, '--max-sessions-per-user', '2']);
  t.after(() => srv.stop('SIGKILL'));
  const drops = srv.stderr.match(/dropped: over max-sessions-per-user/g) || [];
  assert.equal(drops.length, 2, srv.stderr);
  assert.match(srv.stderr, /restoring 2 saved sessions \(2 dropped\)/);
  const resumed = [];
  for (const c of [...cs].reverse()) { // the restored ones first: no cap replaces them
    const r = await Client.open(srv, { user: ann, resume: c.welcome.sessionId });
    resumed.push(r.welcome.resumed === true);
    await leave(r);
  }
  assert.deepEqual(resumed, [true, true, false, false], 'the two most recent');
});

test('Pusher: a pusher-js client that reconnects within the grace causes no member_removed or member_added', async (t) => {
  const store = tempStore(t);
  const port = await freePort();
  // pusher-js comes back about 15 s after the drain's 4200 (its first
  // attempt finds the port closed, and it backs off): a grace above that.
  const flags = [...FLAGS, '--store', store, '--port', String(port), '--reconnect-grace-ms', String(GRACE_P)];
  let srv = await startServer(flags);
  const opts = { cluster: 'local', wsHost: '127.0.0.1', wsPort: port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true };
  const chan = `presence-${uniq('p')}`;
  const events = { a: [], b: [] };
  const mk = (user, log) => {
    const p = new PusherClient(APP.key, { ...opts, channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) => cb(null, pusherAuth(socketId, channelName, user)),
    } });
    const ch = p.subscribe(chan);
    ch.bind('pusher:member_added', (m) => log.push(['added', m.id]));
    ch.bind('pusher:member_removed', (m) => log.push(['removed', m.id]));
    ch.bind('pusher:subscription_succeeded', () => log.push(['ok']));
    return { p, ch };
  };
  const [ua, ub] = [uniq('pa'), uniq('pb')];
  const A = mk(ua, events.a);
  const B = mk(ub, events.b);
  try {
    await waitUntil(() => events.a.find((e) => e[0] === 'ok') && events.b.find((e) => e[0] === 'ok'), 'subscribed');
    await waitUntil(() => A.ch.members.count === 2 && B.ch.members.count === 2, 'two members');
    events.a.length = 0;
    events.b.length = 0;
    await clean(srv);
    srv = await startServer(flags);
    const started = Date.now();
    await waitUntil(() => A.p.connection.state === 'connected' && B.p.connection.state === 'connected',
      'both reconnected', GRACE_P - 2000);
    await waitUntil(() => events.a.filter((e) => e[0] === 'ok').length && events.b.filter((e) => e[0] === 'ok').length,
      'subscribed again');
    // The restored sessions' grace runs out: their members stay, through
    // the new sessions.
    await sleep(started + GRACE_P + 1500 - Date.now());
    const moves = (log) => log.filter((e) => e[0] !== 'ok');
    assert.deepEqual(moves(events.a), [], 'A saw no member move');
    assert.deepEqual(moves(events.b), [], 'B saw no member move');
    assert.equal(A.ch.members.count, 2);
    assert.equal(B.ch.members.count, 2);
  } finally {
    A.p.disconnect();
    B.p.disconnect();
  }
  await clean(srv);
});

function pusherAuth(socketId, channel, user) {
  const data = JSON.stringify({ user_id: user, user_info: { name: user } });
  const sig = crypto.createHmac('sha256', APP.secret).update(`${socketId}:${channel}:${data}`).digest('hex');
  return { auth: `${APP.key}:${sig}`, channel_data: data };
}
