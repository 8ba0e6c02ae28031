// Invisible == offline, differentially: the same scripted world runs twice on
// a fresh server each time. In world 1 user X never connects; in world 2 X is
// made invisible through the admin API first and then does everything a user
// can do (two sessions, status and custom status, rooms, metadata, cursors,
// typing, heartbeats over WS and HTTP, privacy tweaks, a killed socket, a
// resume, leaves). Every other observer's full transcript (WebSocket
// messages, presence and room SSE streams, HTTP reads) is recorded step by
// step, normalized (session and connection ids, wall times, `ago` values,
// room epochs mapped to their order of appearance) and must be identical.
// X itself must see its own true state in world 2.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep, MULT, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';
import { streamSse } from './lib/sse.mjs';

const KEY = 'invisible-admin-key-0123456789abcdef';
const FLAGS = ['--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--room-batch-ms', '20', '--reconnect-grace-ms', '250', '--heartbeat-interval-ms', '1000',
  '--heartbeat-min-ms', '100', '--session-ttl-ms', '30000', '--idle-ms', '600000'];
const QUIET = 200 * MULT; // no new observer output for this long = quiescent

const admin = (srv, method, p, body) => adminOk(srv, KEY, method, p, body);
async function sse(url) {
  const s = await streamSse(url);
  assert.equal(s.status, 200, url);
  return s;
}

// Ids are the same in both worlds (each world has its own server and store).
const tag = `${process.pid}`;
const A = `inv-a-${tag}`;
const B = `inv-b-${tag}`;
const X = `inv-x-${tag}`;
const R = `inv-room-${tag}`;
const R2 = `inv-solo-${tag}`;

// Normalization: what legitimately differs between two runs.
function normalizer() {
  const epochs = new Map();
  const ep = (e) => {
    if (e === 0 || e === '0') return 0;
    const k = String(e);
    if (!epochs.has(k)) epochs.set(k, `E${epochs.size + 1}`);
    return epochs.get(k);
  };
  const walk = (v) => {
    if (Array.isArray(v)) return v.map(walk);
    if (!v || typeof v !== 'object') return v;
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'sessionId' || k === 'connectionId') o[k] = '<id>';
      else if (k === 'at' || k === 'joinedAt' || k === 'expiresAt' || k === 'time') o[k] = typeof x === 'number' ? '<t>' : walk(x);
      else if (k === 'value' && 'ago' in v) o[k] = '<n>';
      else if (k === 'epoch') o[k] = ep(x);
      else o[k] = walk(x);
    }
    return o;
  };
  const json = (text) => {
    try { return JSON.stringify(walk(JSON.parse(text))); } catch { return text; }
  };
  const block = (b) => b.split('\n').map((l) => {
    if (l.startsWith('data: ')) return `data: ${json(l.slice(6))}`;
    const m = /^id: (\d+)-(\d+)$/.exec(l);
    if (m) return `id: ${ep(m[1])}-${m[2]}`;
    return l;
  }).join('\n');
  return { obj: walk, json, block };
}

async function runWorld(withX, workers) {
  const srv = await startServer(['--workers', String(workers), ...FLAGS]);
  const norm = normalizer();
  const steps = []; // per step: { channel: [normalized items] }
  const x = {}; // X's own connections (world 2)
  const xs = [];
  try {
    if (withX) {
      const r = await admin(srv, 'PUT', `/v1/admin/users/${X}/privacy`, { invisible: true });
      assert.equal(r.privacy.invisible, true);
    }
    const a = await Client.open(srv, { user: A, device: 'desktop' });
    const b = await Client.open(srv, { user: B, device: 'web' });
    const o = await Client.open(srv);
    // A and B online as everyone sees them (after the debounce) before the streams open.
    await waitUntil(async () => (await (await fetch(`${srv.url}/v1/presence?user=${A}&user=${B}`)).json())
      .users.every((p) => p.status === 'online'), 'A and B online');
    const chans = {
      A: () => a.seen.map((m) => JSON.stringify(norm.obj(m))),
      B: () => b.seen.map((m) => JSON.stringify(norm.obj(m))),
      O: () => o.seen.map((m) => JSON.stringify(norm.obj(m))),
    };
    const streams = {
      sseAnon: await sse(`${srv.url}/v1/presence/events?user=${X}&user=${A}`),
      sseAsA: await sse(`${srv.url}/v1/presence/events?user=${X}&as=${A}`),
      sseAsB: await sse(`${srv.url}/v1/presence/events?user=${X}&user=${A}&as=${B}`),
      roomR: await sse(`${srv.url}/v1/rooms/${R}/events`),
      roomR2: await sse(`${srv.url}/v1/rooms/${R2}/events`),
    };
    for (const [k, s] of Object.entries(streams)) chans[k] = () => s.blocks.map(norm.block);
    const http = [];
    chans.http = () => http;
    const total = () => a.seen.length + b.seen.length + o.seen.length + Object.values(streams).reduce((t, s) => t + s.blocks.length, 0);
    const lens = Object.fromEntries(Object.keys(chans).map((k) => [k, 0]));

    async function quiesce() {
      let last = total();
      let since = Date.now();
      const deadline = Date.now() + 5000 * MULT;
      while (Date.now() - since < QUIET) {
        if (Date.now() > deadline) throw new Error('observers never went quiet');
        await sleep(25);
        const t = total();
        if (t !== last) { last = t; since = Date.now(); }
      }
    }
    async function poll() {
      for (const p of [`/v1/presence?user=${X}&user=${A}&user=${B}`, `/v1/presence?user=${X}&user=${B}&as=${A}`,
        `/v1/lastseen?user=${X}&user=${A}`, `/v1/lastseen?user=${X}&as=${B}`, `/v1/rooms/${R}`, `/v1/rooms/${R2}`]) {
        const r = await fetch(`${srv.url}${p}`);
        http.push(`${p} ${r.status} ${r.headers.get('content-type')} ${norm.json(await r.text())}`);
      }
    }
    async function step(name, obs, xact) {
      if (withX && xact) { await xact(); await quiesce(); }
      if (obs) { await obs(); await quiesce(); }
      await poll();
      const rec = { name };
      for (const [k, f] of Object.entries(chans)) {
        const all = f();
        rec[k] = all.slice(lens[k]);
        lens[k] = all.length;
      }
      steps.push(rec);
    }
    const ok = async (c, msg, ref) => {
      c.send({ ...msg, ref });
      const m = await c.next((v) => (v.type === 'ack' || v.type === 'error') && v.ref === ref);
      assert.equal(m.type, 'ack', `${JSON.stringify(msg)}: ${JSON.stringify(m)}`);
    };
    const join = async (c, room, meta, ref, extra = {}) => {
      c.send({ type: 'join', room, meta, ref, ...extra });
      const m = await c.next((v) => (v.type === 'room_joined' || v.type === 'error') && v.ref === ref);
      assert.equal(m.type, 'room_joined', JSON.stringify(m));
      return m;
    };
    const xTrue = async (pred, what) => waitUntil(async () => pred((await admin(srv, 'GET', `/v1/admin/presence?user=${X}`)).users[0]), what);

    await step('setup', async () => {
      await ok(a, { type: 'watch', users: [X, B] }, 'wa');
      await ok(b, { type: 'watch', users: [X, A] }, 'wb');
      await ok(o, { type: 'watch', users: [X, A, B] }, 'wo');
      await join(a, R, { name: 'A' }, 'ja');
      await join(b, R, { name: 'B' }, 'jb');
    });
    await step('X connects', null, async () => {
      x.s1 = await Client.open(srv, { user: X, device: 'desktop' });
      xs.push(x.s1);
      assert.equal(x.s1.welcome.user, X);
      await ok(x.s1, { type: 'watch', users: [X, A] }, 'xw');
      await xTrue((p) => p.status === 'online', 'X online (true state)');
    });
    await step('X status and custom; A away', async () => {
      await ok(a, { type: 'activity', active: false }, 'aa');
    }, async () => {
      await ok(x.s1, { type: 'status', status: 'busy' }, 'xs');
      await ok(x.s1, { type: 'custom', text: 'secret', emoji: ':zap:' }, 'xc');
      await xTrue((p) => p.status === 'busy' && p.custom, 'X busy');
    });
    await step('X second session', null, async () => {
      x.s2 = await Client.open(srv, { user: X, device: 'mobile' });
      xs.push(x.s2);
      await ok(x.s2, { type: 'activity', active: false }, 'xa');
      await xTrue((p) => p.devices.mobile === 'away', 'X mobile away');
      // X's own view over HTTP: the truth, with a version.
      const self = (await (await fetch(`${srv.url}/v1/presence?user=${X}&as=${X}`)).json()).users[0];
      assert.equal(self.status, 'busy');
      assert.deepEqual(self.devices, { desktop: 'busy', mobile: 'away' });
      assert.equal(self.custom.text, 'secret');
      assert.equal(typeof self.version, 'number');
    });
    await step('X joins rooms; B patches', async () => {
      await ok(b, { type: 'patch', room: R, meta: { color: 'blue' } }, 'bp');
    }, async () => {
      x.joinR = await join(x.s1, R, { name: 'X' }, 'xj');
      await join(x.s1, R2, { name: 'X' }, 'xj2');
    });
    await step('X patches, cursors, typing; A cursor', async () => {
      a.send({ type: 'ephemeral', room: R, kind: 'cursor', data: { x: 1, y: 1 } });
    }, async () => {
      x.s1.send({ type: 'patch', room: R, meta: { color: 'red' }, ref: 'xp' });
      await x.s1.next((m) => m.ref === 'xp');
      x.s1.send({ type: 'ephemeral', room: R, kind: 'cursor', data: { x: 9, y: 9 } });
      x.s2.send({ type: 'ephemeral', room: R, kind: 'typing', data: true });
      x.s1.send({ type: 'ephemeral', room: R2, kind: 'cursor', data: { x: 3 } });
      x.s1.send({ type: 'ping', ref: 'sync' });
      await x.s1.next((m) => m.type === 'pong' && m.ref === 'sync');
    });
    await step('X heartbeats over WS and HTTP; privacy tweaks', null, async () => {
      for (let i = 0; i < 3; i++) { x.s1.send({ type: 'heartbeat' }); x.s2.send({ type: 'heartbeat' }); }
      const h = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', body: JSON.stringify({ user: X, device: 'other' }) });
      assert.equal(h.status, 200);
      const hb = await h.json();
      await xTrue((p) => p.devices.other, 'X http session');
      const h2 = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', body: JSON.stringify({ user: X, sessionId: hb.sessionId, leave: true }) });
      assert.equal(h2.status, 200);
      await xTrue((p) => !p.devices.other, 'X http session gone');
      await ok(x.s1, { type: 'privacy', lastSeen: 'nobody', online: 'contacts' }, 'xpr1');
      await ok(x.s2, { type: 'privacy', lastSeen: 'everyone', online: 'everyone' }, 'xpr2');
    });
    await step('B joins the room X is alone in; A re-watches X', async () => {
      await join(b, R2, { name: 'B' }, 'jb2');
      await ok(a, { type: 'unwatch', users: [X] }, 'au');
      await ok(a, { type: 'watch', users: [X] }, 'aw2');
    });
    await step('X leaves the room and one session', null, async () => {
      await ok(x.s1, { type: 'room_leave', room: R }, 'xl');
      x.s2.send({ type: 'leave' });
      await x.s2.closed;
      await xTrue((p) => !p.devices.mobile, 'X mobile gone');
    });
    await step('X socket dies; the grace runs out', null, async () => {
      await x.s1.kill();
      await xTrue((p) => p.status === 'offline', 'X offline');
    });
    await step('X reconnects, reloads within the grace, joins, dnd', null, async () => {
      x.s3 = await Client.open(srv, { user: X, device: 'desktop' });
      xs.push(x.s3);
      await join(x.s3, R, { name: 'X3' }, 'xj3');
      await x.s3.kill();
      x.s4 = await Client.open(srv, { user: X, device: 'desktop', resume: x.s3.welcome.sessionId });
      xs.push(x.s4);
      assert.equal(x.s4.welcome.resumed, true);
      await join(x.s4, R, undefined, 'xj4');
      await ok(x.s4, { type: 'status', status: 'dnd' }, 'xd');
      await xTrue((p) => p.status === 'dnd', 'X dnd');
    });
    await step('observers move', async () => {
      await ok(a, { type: 'room_leave', room: R }, 'al');
      await ok(b, { type: 'room_leave', room: R2 }, 'bl');
      await ok(a, { type: 'custom', text: 'back soon' }, 'ac');
      await ok(a, { type: 'activity', active: true }, 'aa2');
    });
    await step('X leaves for good', null, async () => {
      x.s4.send({ type: 'leave' });
      await x.s4.closed;
      await xTrue((p) => p.status === 'offline', 'X offline');
    });
    for (const s of Object.values(streams)) s.close();
    await a.close();
    await b.close();
    await o.close();
    return { steps, x };
  } finally {
    for (const c of xs) if (c.ws.readyState === 1) c.ws.terminate();
    await stopClean(srv, assert);
  }
}

// workers=1: the transcripts must be identical, order included (except
// that presence about different users may interleave). workers=2:
// messages about different users may interleave differently from run to run
// (each worker publishes its own users), so each step's messages are
// compared as a multiset per channel.
for (const [workers, exact] of [[1, true], [2, false]]) {
  test(`invisible == offline, workers=${workers}: every observer transcript is identical${exact ? '' : ' (as multisets per step)'}, X sees its own truth`, async () => {
    const w1 = await runWorld(false, workers);
    const w2 = await runWorld(true, workers);
    assert.equal(w1.steps.length, w2.steps.length);
    // Sanity: the transcripts are not trivially empty.
    const count = (w, k) => w.steps.reduce((t, st) => t + st[k].length, 0);
    assert.ok(count(w1, 'A') > 5 && count(w1, 'roomR') > 3 && count(w1, 'http') > 20);
    // (SSE ids count events in arrival order, so they go with the order.)
    // workers=1 keeps the order of everything about one user and of every
    // other message; only presence about *different* users may interleave
    // differently (each user's snapshot waits for its own settings read).
    const userOf = (x) => (/"type":"presence","presence":\{"user":"([^"]*)"/.exec(typeof x === 'string' ? x : JSON.stringify(x)) || [])[1] || '';
    const byUser = (list) => {
      const keys = [...new Set(list.map(userOf))].sort();
      return keys.flatMap((k) => list.filter((x) => userOf(x) === k).map((x) => (typeof x === 'string' ? x.replace(/^id: .*\n/m, '') : x)));
    };
    const shape = (list) => (!Array.isArray(list) ? list
      : exact ? byUser(list) : list.map((x) => (typeof x === 'string' ? x.replace(/^id: .*\n/m, '') : JSON.stringify(x))).sort());
    // Every difference, not only the first one.
    const diffs = [];
    for (let i = 0; i < w1.steps.length; i++) {
      for (const k of Object.keys(w1.steps[i])) {
        try {
          assert.deepEqual(shape(w2.steps[i][k]), shape(w1.steps[i][k]));
        } catch (e) {
          diffs.push(`step "${w1.steps[i].name}", channel ${k}: invisible X (+) differs from offline X (-):\n${e.message}`);
        }
      }
    }
    try {
      selfView(w2.x);
    } catch (e) {
      diffs.push(`X's own view in world 2: ${e.message}`);
    }
    assert.deepEqual(diffs, [], diffs.join('\n\n'));
  });
}

// X's own view in world 2: the true state, versions increasing.
function selfView(x) {
  const self = x.s1.seen.filter((m) => m.type === 'presence' && m.presence.user === X).map((m) => m.presence);
  assert.ok(self.length >= 3, JSON.stringify(self));
  for (let i = 1; i < self.length; i++) assert.ok(self[i].version > self[i - 1].version, 'versions increase');
  assert.ok(self.some((p) => p.status === 'online' && p.devices.desktop === 'online'), 'self sees itself online');
  assert.ok(self.some((p) => p.status === 'busy' && p.custom && p.custom.text === 'secret' && p.custom.emoji === ':zap:'));
  assert.ok(self.some((p) => JSON.stringify(p.devices) === JSON.stringify({ desktop: 'busy', mobile: 'away' })),
    `self sees both devices: ${JSON.stringify(self)}`);
  const pcs = x.s1.seen.filter((m) => m.type === 'privacy_changed').map((m) => m.privacy);
  assert.deepEqual(pcs[0], { online: 'everyone', lastSeen: 'everyone', invisible: true }, 'a new session is told it is invisible');
  assert.deepEqual(pcs.at(-1), { online: 'everyone', lastSeen: 'everyone', invisible: true });
  // Rooms are encoded once for all members: X's own room view is the
  // public one (A and B), and it got its room_joined.
  const snap = x.s1.seen.find((m) => m.type === 'room_snapshot' && m.room === R);
  assert.ok(snap && x.joinR, 'X got the room state and room_joined');
  assert.deepEqual(snap.members.map((m) => m.user), [A, B]);
  assert.equal(snap.count, 2);
  assert.equal(x.joinR.count, 2);
  // X's watch of A shows A's public state (A went away, then back).
  assert.ok(x.s1.seen.some((m) => m.type === 'presence' && m.presence.user === A && m.presence.status === 'away'));
}
