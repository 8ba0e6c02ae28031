#!/usr/bin/env node
// soak.mjs - a seeded chaos soak of one presenced node: a model checker.
//
// The script starts the real binary ($PRESENCED_BIN, the ASan build by
// default) on loopback with a temporary SQLite store and short timings
// (heartbeat, TTL, reconnect grace, debounce, room batch), then lets a
// seeded PRNG drive real `ws` clients: actors connect, heartbeat, go silent
// (socket destroyed without a close frame, or paused: no reads, no
// heartbeats), reload (close, then ?resume= within the grace, sometimes
// after it), resume a paused session from a new socket, leave, change
// status and custom status, join and leave rooms, patch metadata, send
// cursors, and have the backend (admin API) change their privacy
// (invisible, online/last-seen visibility everyone/contacts/nobody), their
// contacts and their blocks. Observers (fixed users that never misbehave)
// and every actor connection watch users and hold room views. The server is
// restarted with SIGTERM at least once (the store is kept).
//
// A model of the world says, for each observer and user, what the observer
// may see; every frame and a periodic tick are checked against it. Times
// are only known within bounds (a session ends between its last heartbeat
// + TTL and its last message + TTL, a closed socket's session after the
// grace), so each check only judges states that are certain and have been
// stable for W = debounce + batch + slack. Invariants, as named in failures:
//   no-ghost              a user with no live session is shown offline
//   no-false-offline      a user with a certainly live session is never offline
//   status-matches        the shown status is the sessions' most-available merge
//   session-not-expired-early / resume-within-grace / no-resume-after-grace
//   version-monotonic     a user's own version never goes back on a connection
//   no-foreign-version    `version` only in one's own presence
//   hidden-never-online   a hidden user (invisible, online nobody/contacts
//                         without being a contact, or blocking the observer)
//                         is never shown online
//   hidden-reads-absent   a presence of a hidden user reads like an unknown one
//   hidden-no-events      no presence event about a user hidden all along
//   room-seq-contiguous / room-delta-applies / room-joined-matches-state /
//   room-count            deltas apply as protocol.md says
//   room-membership / room-meta   applied member sets and metadata equal the model's
//   hidden-not-in-room    a hidden member never appears in a view
//   hidden-no-room-trace  no empty deltas (seq bumps) caused by hidden members
//   hidden-no-ephemeral   no cursors of hidden members
//   joinedAt-hides-history  joinedAt never predates the member becoming visible
//                         by privacy (an unblock shows the room's joinedAt)
//   hidden-room-errors    errors of a non-member's patch read as for an absent room
//   self-block-refused    the admin API refuses u blocking u
//   clean-shutdown        SIGTERM exits 0 with no sanitizer report
//   unexpected-close      the server closes no healthy connection on its own
//
// Usage: node tests/soak/soak.mjs [--seed N] [--seconds S | --minutes M]
//        [--actors N] [--trace]
// The PRNG decides every action, target and delay; the server's timing is
// real, so a seed reproduces the same script, not the same interleaving.
// The seed is printed at the start and with every failure. Exit status 1
// when any invariant failed (all failures are collected, then summarised).
import WebSocket from 'ws';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, MULT, sleep } from '../integration/lib/server.mjs';
import { adminRequest } from '../integration/lib/admin.mjs';

// ---- options ----
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const seedArg = opt('seed', process.env.SOAK_SEED || '');
const SEED = seedArg === '' ? (Date.now() % 2147483647) : Number(seedArg);
const SECONDS = Number(opt('minutes', '')) * 60 || Number(opt('seconds', process.env.SOAK_SECONDS || 45));
const N_ACTORS = Number(opt('actors', 8));
const TRACE = argv.includes('--trace');
if (!Number.isFinite(SEED)) throw new Error(`--seed must be a number, got ${seedArg}`);

// ---- timings ----
const HB_MS = 400; // clients heartbeat this often
const TTL = 2500;
const GRACE = 800;
const DEBOUNCE = 50;
const BATCH = 20;
const SLACK = 300 * MULT;
const W = DEBOUNCE + BATCH + SLACK; // a change is visible to everyone after W
const KEY = 'soak-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY,
  '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100',
  '--session-ttl-ms', String(TTL), '--reconnect-grace-ms', String(GRACE),
  '--presence-debounce-ms', String(DEBOUNCE), '--room-batch-ms', String(BATCH),
  '--idle-ms', '600000', '--observer-query-rate', '0'];

// ---- seeded PRNG (mulberry32) ----
let prngState = SEED >>> 0;
function rnd() {
  prngState = (prngState + 0x6d2b79f5) >>> 0;
  let t = prngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;

// ---- failures ----
const T0 = Date.now();
let step = 0;
const failures = new Map(); // invariant -> { count, first: [msgs] }
function violate(inv, user, observer, detail) {
  const msg = `[${inv}] user=${user} observer=${observer} seed=${SEED} step=${step} ` +
    `t=+${((Date.now() - T0) / 1000).toFixed(2)}s: ${detail}`;
  let f = failures.get(inv);
  if (!f) failures.set(inv, f = { count: 0, first: [] });
  f.count++;
  if (f.first.length < 5) { f.first.push(msg); console.log(`FAIL ${msg}`); }
}
const stats = {}; // how many times each check judged something (a check that never runs proves nothing)
const count = (k) => { stats[k] = (stats[k] || 0) + 1; };
function trace(s) { if (TRACE) console.log(`  #${step} +${((Date.now() - T0) / 1000).toFixed(2)}s ${s}`); }

// ---- the model ----
const STATUSES = ['online', 'away', 'busy', 'dnd'];
const RANK = { online: 0, busy: 1, away: 2, dnd: 3 }; // most-available first
const VIS = ['everyone', 'contacts', 'nobody'];
const tag = `${SEED}`;
const ACTORS = Array.from({ length: N_ACTORS }, (_, i) => `a${i}-${tag}`);
const OBSERVERS = [0, 1, 2].map((i) => `o${i}-${tag}`);
const ROOMS = [0, 1, 2, 3].map((i) => `r${i}-${tag}`);
// Observers' rooms; the last room has actors only, so it can hold only hidden members.
const OBS_ROOMS = { [OBSERVERS[0]]: [ROOMS[0], ROOMS[1]], [OBSERVERS[1]]: [ROOMS[1], ROOMS[2]],
  [OBSERVERS[2]]: [ROOMS[2], ROOMS[0]] };

const users = new Map();
for (const id of [...ACTORS, ...OBSERVERS]) {
  users.set(id, {
    id, actor: ACTORS.includes(id),
    priv: { online: 'everyone', invisible: false },
    contacts: new Set(), blocks: new Set(),
    sessions: new Map(),
    pTouched: 0, visTouched: 0, lastPublic: 0, rTouched: new Map(), shownSince: 0,
    meta: new Map(), memberSince: new Map(), // room -> {at, clean}
  });
}
const U = (id) => users.get(id);
const touchP = (u) => { u.pTouched = Date.now(); };
const touchR = (u, r) => { u.rTouched.set(r, Date.now()); };
const touchAll = (u) => { touchP(u); u.visTouched = Date.now(); for (const r of ROOMS) touchR(u, r); };

function visible(u, o) {
  if (u.id === o) return true;
  if (u.priv.invisible || u.blocks.has(o)) return false;
  if (u.priv.online === 'everyone') return true;
  return u.priv.online === 'contacts' && u.contacts.has(o);
}
// Rooms show a member to everyone or to no one by her privacy (one flag per
// member, protocol.md "Rooms"), and blocks hide her from their targets.
function shownInRooms(u) { return !u.priv.invisible && u.priv.online === 'everyone'; }
function visibleInRoom(u, o) { return shownInRooms(u) && !u.blocks.has(o); }

// Bounds of a session's end: [lo, hi] in our clock.
function bounds(s) {
  if (s.endLo != null) return [s.endLo, s.endHi];
  const ttlLo = s.lastHb + TTL;
  const ttlHi = s.lastMsg + TTL + 25;
  if (s.closedAt != null) {
    const g = s.closedAt + GRACE;
    return [Math.min(ttlLo, g), Math.min(ttlHi, g + 50)];
  }
  return [ttlLo, ttlHi];
}
const aliveAt = (s, t) => t < bounds(s)[0] - SLACK;
const goneAt = (s, t) => t > bounds(s)[1] + W;
function tri(sessions, t) {
  let unk = false;
  for (const s of sessions) {
    if (aliveAt(s, t)) return 'ON';
    if (!goneAt(s, t)) unk = true;
  }
  return unk ? 'UNK' : 'OFF';
}
const presenceTri = (u, t) => tri(u.sessions.values(), t);
const roomTri = (u, r, t) => tri([...u.sessions.values()].filter((s) => s.rooms.has(r)), t);
function expectedStatus(u, t) { // null when some session is uncertain
  let best = null;
  for (const s of u.sessions.values()) {
    if (aliveAt(s, t)) { if (best === null || RANK[s.status] < RANK[best]) best = s.status; } else if (!goneAt(s, t)) return null;
  }
  return best;
}

// ---- the server ----
let srv = null;
let incarnation = 0;
let storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-soak-'));
const storePath = path.join(storeDir, 'presenced.db');
async function boot() {
  srv = await startServer([...FLAGS, '--store', storePath]);
  incarnation++;
}
async function admin(method, p, body) {
  return adminRequest(srv, method, p, { key: KEY, body });
}

// ---- connections ----
const conns = new Set();
let refSeq = 0;
const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((kk) => [kk, x[kk]])) : x));

class Conn {
  constructor(user, { resume } = {}) {
    this.user = user;
    this.inc = incarnation;
    this.session = null; // model session
    this.open = false;
    this.paused = false;
    this.dead = false;
    this.expectClose = false;
    this.pending = new Map(); // ref -> resolve
    this.watched = new Set(); // users whose snapshot arrived
    this.snapPending = new Set();
    this.pview = new Map(); // user -> presence
    this.versions = new Map();
    this.rviews = new Map(); // room -> view
    this.lastHbSent = 0;
    const q = new URLSearchParams({ user, device: pick(['desktop', 'mobile', 'tablet', 'web']) });
    if (resume) q.set('resume', resume);
    this.openedAt = Date.now();
    this.ws = new WebSocket(`${srv.wsUrl}/v1/ws?${q}`);
    this.ws.on('error', () => {});
    conns.add(this);
    this.welcome = new Promise((resolve) => {
      this.ws.on('message', (d) => {
        if (this.paused || this.dead) return;
        let m;
        try { m = JSON.parse(d.toString()); } catch { return; }
        if (m.type === 'welcome') { this.open = true; resolve(m); return; }
        this.onMessage(m);
      });
      this.ws.on('close', (code) => { resolve(null); this.onClose(code); });
    });
  }

  send(obj) {
    if (this.ws.readyState !== WebSocket.OPEN || this.paused) return false;
    this.ws.send(JSON.stringify(obj));
    if (this.session) this.session.lastMsg = Date.now();
    return true;
  }

  request(obj, ms = 3000) {
    const ref = `q${++refSeq}`;
    return new Promise((resolve) => {
      if (!this.send({ ...obj, ref })) { resolve(null); return; }
      const timer = setTimeout(() => { this.pending.delete(ref); resolve(null); }, ms * MULT);
      this.pending.set(ref, (m) => { clearTimeout(timer); resolve(m); });
    });
  }

  get kind() { return 'ws'; }
  resync(v) { resyncWs(this, v); }
  get checkable() { return this.open && !this.paused && !this.dead && this.inc === incarnation; }

  onMessage(m) {
    if ((m.type === 'ack' || m.type === 'error') && this.pending.has(m.ref)) {
      const f = this.pending.get(m.ref);
      this.pending.delete(m.ref);
      f(m);
      return;
    }
    if (m.type === 'presence') onPresence(this, m.presence);
    else if (m.type === 'room_snapshot' || m.type === 'room_delta' || m.type === 'room_joined') onRoom(this, m);
    else if (m.type === 'ephemeral') onEphemeral(this, m);
    else if (m.type === 'session_ended') onSessionEnded(this, m);
    if (m.type === 'room_joined' && this.pending.has(m.ref)) {
      const f = this.pending.get(m.ref);
      this.pending.delete(m.ref);
      f(m);
    }
  }

  onClose(code) {
    const wasOpen = this.open && !this.dead;
    this.open = false;
    conns.delete(this);
    if (this.dead || this.expectClose || this.inc !== incarnation) { this.dead = true; return; }
    this.dead = true;
    if (wasOpen && !this.paused && !this.endedByServer) {
      violate('unexpected-close', this.user, '-', `the server closed a healthy connection with ${code}`);
    }
    const s = this.session;
    if (s && s.conn === this && s.endLo == null) { s.closedAt = Date.now(); s.conn = null; touchP(U(this.user)); }
    if (!U(this.user).actor) reconnectObserver(this.user);
  }

  kill() { this.dead = true; this.expectClose = true; this.ws._socket?.destroy(); }
  close() { this.dead = true; this.expectClose = true; this.ws.close(1000); }
  pause() { this.paused = true; this.ws._socket?.pause(); }
}

function onSessionEnded(c, m) {
  c.endedByServer = true;
  const s = c.session;
  if (!s || s.endLo != null) return;
  const now = Date.now();
  if (m.reason === 'ttl' && aliveAt(s, now)) {
    violate('session-not-expired-early', c.user, '-',
      `session ended (ttl) ${now - s.lastHb} ms after its last heartbeat; TTL is ${TTL} ms`);
  }
  if (m.reason === 'ttl') { s.endLo = s.endHi = now; touchAll(U(c.user)); }
}

// ---- presence views ----
function onPresence(c, p, { read = false } = {}) {
  const now = Date.now();
  const u = U(p.user);
  if (!u || !c.checkable) return;
  const o = c.user;
  const isSnap = c.snapPending.delete(p.user) || read;
  checkLastSeen(o, u, p, c.kind);
  if (p.user !== o && 'version' in p) violate('no-foreign-version', p.user, o, `${c.kind}: presence carries version: ${JSON.stringify(p)}`);
  if (p.user === o && typeof p.version === 'number') {
    const prev = c.versions.get(p.user);
    if (prev && (p.version < prev.v || (p.version === prev.v && prev.body !== canon({ ...p, lastSeen: undefined })))) {
      violate('version-monotonic', p.user, o, `${c.kind}: version ${p.version} after ${prev.v}: ${JSON.stringify(p)}`);
    }
    c.versions.set(p.user, { v: p.version, body: canon({ ...p, lastSeen: undefined }) });
  }
  const hiddenStable = !visible(u, o) && now - u.visTouched >= W && (read || now - c.openedAt >= W);
  if (!visible(u, o) && now - u.visTouched >= W) {
    const why = hideReason(u, o);
    if (p.status !== 'offline') violate('hidden-never-online', p.user, o, `${c.kind}: ${why}, shown ${JSON.stringify(p)}`);
    const mayLastSeen = u.priv.invisible && !u.blocks.has(o) && visibleLastSeen(u, o);
    const keys = Object.keys(p).filter((k) => k !== 'lastSeen' || !mayLastSeen).sort().join(',');
    if (keys !== 'devices,status,user' || Object.keys(p.devices || {}).length !== 0) {
      violate('hidden-reads-absent', p.user, o, `${c.kind}: ${why}, reads ${JSON.stringify(p)} (an unknown user reads {"user","status":"offline","devices":{}})`);
    }
    count(isSnap ? 'hidden-snapshot' : 'hidden-frame');
    if (hiddenStable && !isSnap) {
      violate('hidden-no-events', p.user, o, `${c.kind}: ${why} for ${now - u.visTouched} ms, yet an event arrived: ${JSON.stringify(p)}`);
    }
  }
  if (c.watched.has(p.user) || isSnap) { c.watched.add(p.user); c.pview.set(p.user, p); }
}
// Others' last seen is the public state's: never later than the last moment
// the user could have been online while not invisible.
function checkLastSeen(o, u, p, channel) {
  if (u.id === o || !p.lastSeen || typeof p.lastSeen.at !== 'number') return;
  count('lastseen');
  if (p.lastSeen.at > u.lastPublic + SLACK) {
    violate('hidden-lastseen', u.id, o, `${channel}: lastSeen.at ${p.lastSeen.at} is ${p.lastSeen.at - u.lastPublic} ms after the last moment ${u.id} was online and not invisible (${u.lastPublic || 'never'}): ${JSON.stringify(p)}`);
  }
}
function visibleLastSeen(u, o) { // lastSeen visibility is kept equal to online visibility
  return u.priv.online === 'everyone' || (u.priv.online === 'contacts' && u.contacts.has(o));
}
function hideReason(u, o) {
  if (u.blocks.has(o)) return `${u.id} blocks ${o}`;
  if (u.priv.invisible) return `${u.id} is invisible`;
  return `${u.id} has online=${u.priv.online}${u.priv.online === 'contacts' ? ` (contacts: ${[...u.contacts].join(' ') || 'none'})` : ''}`;
}

function checkPresence(c, now) {
  for (const uid of c.watched) {
    const shown = c.pview.get(uid);
    if (shown && now - c.openedAt >= W) checkShown(c.user, U(uid), shown, now, now, c.kind);
  }
}
// Judges one shown presence of u to observer o, valid for the whole of
// [from, to] (a read answered in between, or a live view at now).
function checkShown(o, u, shown, from, to, channel) {
  if (from - u.pTouched < W || from - u.visTouched < W || u.pTouched > to || u.visTouched > to) return;
  const now = from;
  const vis = visible(u, o);
  const t = vis ? presenceTri(u, now) : 'OFF';
  if (t !== presenceTri(u, to) && vis) return;
  count(`presence-${channel}-${vis ? t : 'hidden'}`);
  const uid = u.id;
  if (t === 'ON' && shown.status === 'offline') {
    violate('no-false-offline', uid, o, `${channel}: a live session (${[...u.sessions.values()].filter((s) => aliveAt(s, now)).map(descSession).join('; ')}) but shown offline`);
  } else if (t === 'OFF' && shown.status !== 'offline') {
    if (vis) violate('no-ghost', uid, o, `${channel}: no live session (${[...u.sessions.values()].map(descSession).join('; ') || 'none'}) but shown ${shown.status}`);
    else violate('hidden-never-online', uid, o, `${channel}: ${hideReason(u, o)}, shown ${shown.status}`);
  } else if (t === 'ON') {
    const want = expectedStatus(u, now);
    if (want && shown.status !== want && want === expectedStatus(u, to)) {
      violate('status-matches', uid, o, `${channel}: sessions ${[...u.sessions.values()].filter((s) => aliveAt(s, now)).map((s) => s.status).join(',')} merge to ${want}, shown ${shown.status}`);
    }
  }
}
function descSession(s) {
  const now = Date.now();
  const [lo, hi] = bounds(s);
  const st = s.endLo != null ? 'ended' : s.closedAt != null ? `closed ${now - s.closedAt} ms ago` : s.paused ? 'paused' : 'attached';
  return `${s.sid.slice(0, 8)} ${st}, ends in [${lo === Infinity ? 'inf' : lo - now}, ${hi - now}] ms`;
}

// ---- room views ----
function newView(r) { return { room: r, state: 'joining', epoch: 0, seq: 0, count: 0, members: new Map(), mode: 'normal' }; }
function onRoom(c, m) {
  const v = c.rviews.get(m.room);
  if (!v || !c.checkable || v.broken) return;
  const o = c.user;
  const now = Date.now();
  if (m.type === 'room_snapshot') {
    v.epoch = m.epoch; v.seq = m.seq; v.mode = m.mode;
    v.members = new Map(m.members.map((x) => [x.user, x]));
    checkEmptyRoom(c.user, m, c.kind);
    for (const x of m.members) checkJoinedAt(c, m.room, x, now);
  } else if (m.type === 'room_delta') {
    const fresh = m.epoch !== v.epoch && m.seq === 1 && v.members.size === 0;
    if (m.epoch === v.epoch && m.seq <= v.seq) return;
    if (!fresh && !(m.epoch === v.epoch && m.seq === v.seq + 1)) {
      violate('room-seq-contiguous', '-', o, `${c.kind} room ${m.room}: delta ${m.epoch}/${m.seq} after ${v.epoch}/${v.seq}`);
      c.resync(v);
      return;
    }
    if (fresh) v.epoch = m.epoch;
    for (const id of m.leaves) if (!v.members.delete(id)) violate('room-delta-applies', id, o, `room ${m.room} seq ${m.seq}: leave of a non-member`);
    for (const x of m.joins) {
      if (v.members.has(x.user)) violate('room-delta-applies', x.user, o, `room ${m.room} seq ${m.seq}: join of a member`);
      v.members.set(x.user, x);
      checkJoinedAt(c, m.room, x, now);
    }
    for (const x of m.patches) {
      if (!v.members.has(x.user)) violate('room-delta-applies', x.user, o, `room ${m.room} seq ${m.seq}: patch of a non-member`);
      v.members.set(x.user, x);
    }
    v.seq = m.seq; v.mode = m.mode;
    if (v.state === 'joined' && m.mode === 'normal' && !m.joins.length && !m.leaves.length && !m.patches.length) {
      const blockers = [...users.values()].filter((u) => u.blocks.has(o)).map((u) => u.id);
      violate('hidden-no-room-trace', blockers.join('|') || '?', o,
        `${c.kind} room ${m.room}: an empty delta (seq ${m.seq}) reveals activity an absent user would not cause`);
    }
  } else if (m.type === 'room_joined') {
    if (m.epoch !== v.epoch || m.seq !== v.seq) {
      violate('room-joined-matches-state', '-', o, `${c.kind} room ${m.room}: room_joined says ${m.epoch}/${m.seq}, the state sent was ${v.epoch}/${v.seq}`);
    }
    v.state = 'joined';
  }
  if (v.mode === 'normal' && m.count !== v.members.size) {
    violate('room-count', '-', o, `${c.kind} room ${m.room}: ${m.type} count ${m.count} but ${v.members.size} members applied (${[...v.members.keys()].join(' ')})`);
  }
  if (v.state === 'joined') checkRoom(c, v, now);
}
function resyncWs(c, v) {
  v.broken = true;
  c.send({ type: 'room_leave', room: v.room });
  const nv = newView(v.room);
  c.rviews.set(v.room, nv);
  // the leave and the join reach the room in one batch: with the member's
  // own metadata nothing changes for others
  const meta = U(c.user).meta.get(v.room);
  c.send({ type: 'join', room: v.room, ...(meta ? { meta } : {}) });
}
// A room showing no member must read exactly like a room nobody is in.
function checkEmptyRoom(o, m, channel) {
  if (m.count !== 0 || (m.members && m.members.length)) return;
  count('room-empty-read');
  if (m.epoch !== 0 || m.seq !== 0) {
    const hid = [...users.values()].filter((u) => roomTri(u, m.room, Date.now()) !== 'OFF').map((u) => u.id);
    violate('hidden-room-epoch', hid.join('|') || '-', o, `${channel} room ${m.room}: no visible member, yet epoch ${m.epoch} seq ${m.seq} (an absent room reads epoch 0, seq 0)`);
  }
}
function checkJoinedAt(c, r, x, now) {
  const u = U(x.user);
  if (!u || u.id === c.user) return; // a member knows when it joined
  const ms = u.memberSince.get(r);
  if (!ms || !ms.clean) return;
  // joinedAt is the room's, one value for every reader: it hides the time
  // spent hidden by privacy (it restarts when the flag turns her visible),
  // not the time spent blocking this reader, whom an unblock shows the
  // room as everyone sees it (protocol.md "Blocks inside a room").
  const since = Math.max(ms.at, u.shownSince);
  if (u.shownSince > ms.at) count('joinedAt-after-reveal');
  if (x.joinedAt < since - 50) {
    violate('joinedAt-hides-history', x.user, c.user, `${c.kind} room ${r}: joinedAt ${x.joinedAt} is ${since - x.joinedAt} ms before the member became visible to the observer (${since})`);
  }
}
function checkRoom(c, v, now, to = now) {
  const o = c.user;
  for (const u of users.values()) {
    const rt = u.rTouched.get(v.room) || 0;
    if (now - rt < W || now - u.visTouched < W || rt > to || u.visTouched > to) continue;
    if (roomTri(u, v.room, now) !== roomTri(u, v.room, to)) continue;
    let t = roomTri(u, v.room, now);
    const hidden = !visibleInRoom(u, o);
    const shown = v.members.get(u.id);
    if (t !== 'UNK') count(`room-${c.kind}-${hidden && t === 'ON' ? 'hidden' : t}`);
    if (t === 'ON' && !hidden && !shown) violate('room-membership', u.id, o, `${c.kind} room ${v.room}: a member with a live session is missing from the view`);
    else if (t === 'OFF' && shown) violate('room-membership', u.id, o, `${c.kind} room ${v.room}: a ghost member (sessions: ${[...u.sessions.values()].map(descSession).join('; ') || 'none'})`);
    else if (t !== 'OFF' && hidden && shown) violate('hidden-not-in-room', u.id, o, `${c.kind} room ${v.room}: ${hideReason(u, o)} yet listed ${JSON.stringify(shown)}`);
    else if (t === 'ON' && shown && u.meta.has(v.room) && canon(shown.meta) !== canon(u.meta.get(v.room))) {
      violate('room-meta', u.id, o, `${c.kind} room ${v.room}: meta ${JSON.stringify(shown.meta)}, model ${JSON.stringify(u.meta.get(v.room))}`);
    }
  }
}
function onEphemeral(c, m) {
  const u = U(m.user);
  if (!u || u.id === c.user || !c.checkable) return;
  if (!visibleInRoom(u, c.user) && Date.now() - u.visTouched >= W + 2000) {
    violate('hidden-no-ephemeral', u.id, c.user, `room ${m.room}: ${hideReason(u, c.user)} yet its ${m.kind} arrived`);
  }
}

// ---- sessions ----
function newSession(user, c, welcome) {
  const now = Date.now();
  const s = { sid: welcome.sessionId, user, conn: c, status: 'online', rooms: new Set(), startedAt: now,
    lastHb: c.openedAt, lastMsg: now, closedAt: null, paused: false, endLo: null, endHi: null };
  U(user).sessions.set(s.sid, s);
  c.session = s;
  touchP(U(user));
  return s;
}
// Watches watchList; the first presence of each user after the ack is its
// snapshot (registered before sending: the snapshots may arrive in the same
// read as the ack).
async function afterOpen(c, watchList) {
  c.snapPending = new Set(watchList);
  c.watched = new Set();
  await c.request({ type: 'watch', users: watchList });
}

async function joinRoom(c, r, { since, meta } = {}) {
  const u = U(c.user);
  const s = c.session;
  const now = Date.now();
  const msg = { type: 'join', room: r };
  const sessionIn = s.rooms.has(r);
  if (!sessionIn) {
    const was = roomTri(u, r, now);
    if (was === 'OFF') u.memberSince.set(r, { at: now, clean: true });
    else if (was === 'UNK') u.memberSince.set(r, { at: now, clean: false });
    msg.meta = meta || { name: c.user, c: Math.floor(rnd() * 100) };
    u.meta.set(r, msg.meta);
    s.rooms.add(r);
  }
  if (since && since.epoch) msg.since = { epoch: since.epoch, seq: since.seq };
  touchR(u, r);
  const v = newView(r);
  if (msg.since) { v.epoch = since.epoch; v.seq = since.seq; v.members = new Map(since.members); v.mode = since.mode; }
  c.rviews.set(r, v);
  const ans = await c.request(msg);
  touchR(u, r);
  return ans;
}

// ---- SSE streams and HTTP reads (observers read as ?as=<observer>) ----
// Reads an event stream in the background and calls onEvent(id, data).
function sseStream(url, onEvent) {
  const ctrl = new AbortController();
  (async () => {
    try {
      const r = await fetch(url, { signal: ctrl.signal });
      if (r.status !== 200) { onEvent(null, { type: 'http_error', status: r.status }); return; }
      let text = '';
      for await (const chunk of r.body) {
        text += Buffer.from(chunk).toString();
        let i;
        while ((i = text.indexOf('\n\n')) >= 0) {
          const b = text.slice(0, i);
          text = text.slice(i + 2);
          const data = b.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
          if (!data.length) continue;
          const id = /^id: (.*)$/m.exec(b);
          onEvent(id && id[1], JSON.parse(data.join('\n')));
        }
      }
    } catch { /* aborted, or the server went away */ }
  })();
  return () => ctrl.abort();
}
const streams = new Set();
function viewer(o, kind) {
  return { user: o, kind, inc: incarnation, openedAt: Date.now(), snapPending: new Set(), watched: new Set(),
    pview: new Map(), versions: new Map(), rviews: new Map(), ended: false,
    get checkable() { return !this.ended && this.inc === incarnation && !stopping; } };
}
function openPresenceStream(o) {
  const v = viewer(o, 'sse-presence');
  const list = [...ACTORS, o];
  v.snapPending = new Set(list);
  const lastId = new Map();
  const q = list.map((x) => `user=${encodeURIComponent(x)}`).join('&');
  v.close = sseStream(`${srv.url}/v1/presence/events?${q}&as=${o}`, (id, d) => {
    if (d.type === 'http_error') { violate('stream-opens', o, o, `presence stream answered ${d.status}`); return; }
    if (d.type !== 'presence' || !v.checkable) return;
    const prev = lastId.get(d.presence.user);
    if (prev !== undefined && id !== null && !(Number(id) > prev)) violate('sse-ids-increase', d.presence.user, o, `presence stream id ${id} after ${prev}`);
    if (id !== null) lastId.set(d.presence.user, Number(id));
    onPresence(v, d.presence);
  });
  streams.add(v);
  return v;
}
function openRoomStream(o, r) {
  const v = viewer(o, 'sse-room');
  v.resync = (rv) => { rv.broken = true; v.ended = true; v.close(); streams.delete(v); openRoomStream(o, r); };
  v.rviews.set(r, newView(r));
  v.close = sseStream(`${srv.url}/v1/rooms/${r}/events?as=${o}`, (id, d) => {
    if (d.type === 'http_error') { violate('stream-opens', '-', o, `room stream ${r} answered ${d.status}`); return; }
    if (d.type === 'error') { violate('stream-opens', '-', o, `room stream ${r} ended: ${JSON.stringify(d)}`); return; }
    if (d.type === 'ephemeral') onEphemeral(v, d);
    else onRoom(v, d);
  });
  streams.add(v);
  return v;
}
function openStreams() {
  for (const o of OBSERVERS) {
    openPresenceStream(o);
    for (const r of ROOMS) openRoomStream(o, r);
  }
}
function closeStreams() { for (const v of streams) { v.ended = true; v.close(); } streams.clear(); }

// Every so often each observer reads presence and rooms over HTTP.
async function httpReads() {
  const o = pick(OBSERVERS);
  const from = Date.now();
  const inc = incarnation;
  const q = ACTORS.map((x) => `user=${encodeURIComponent(x)}`).join('&');
  try {
    const r = await fetch(`${srv.url}/v1/presence?${q}&as=${o}`);
    const to = Date.now();
    if (inc !== incarnation || stopping) return;
    if (r.status !== 200) { violate('http-reads', '-', o, `GET /v1/presence -> ${r.status}`); return; }
    const body = await r.json();
    const v = viewer(o, 'http');
    for (const p of body.users) {
      onPresence(v, p, { read: true });
      checkShown(o, U(p.user), p, from, to, 'http');
    }
    const room = pick(ROOMS);
    const from2 = Date.now();
    const rr = await fetch(`${srv.url}/v1/rooms/${room}?as=${o}`);
    const to2 = Date.now();
    if (inc !== incarnation || stopping) return;
    if (rr.status !== 200) { violate('http-reads', '-', o, `GET /v1/rooms/${room} -> ${rr.status}`); return; }
    const m = await rr.json();
    checkEmptyRoom(o, { ...m, room }, 'http');
    const rv = newView(room);
    rv.members = new Map(m.members.map((x) => [x.user, x]));
    if (m.count !== rv.members.size) violate('room-count', '-', o, `http room ${room}: count ${m.count} but ${rv.members.size} members listed`);
    checkRoom(v, rv, from2, to2);
  } catch (e) {
    if (inc === incarnation && !stopping) violate('http-reads', '-', o, `read failed: ${e.message}`);
  }
}

// ---- observers ----
const obsConns = new Map();
async function connectObserver(id) {
  const c = new Conn(id);
  obsConns.set(id, c);
  const w = await c.welcome;
  if (!w || w.type !== 'welcome') return;
  newSession(id, c, w);
  await afterOpen(c, [...ACTORS, ...OBSERVERS]);
  for (const r of OBS_ROOMS[id]) await joinRoom(c, r, { meta: { name: id } });
}
function reconnectObserver(id) {
  if (stopping || finished) return;
  setTimeout(() => { if (!stopping && !finished) connectObserver(id); }, 10);
}

// ---- actor actions ----
const liveConns = (u) => [...u.sessions.values()].filter((s) => s.endLo == null && s.conn && s.conn.checkable && !s.paused).map((s) => s.conn);

async function actConnect(u, resumeOf) {
  if ((u.sessions.size >= 6 && !resumeOf) || winding) return;
  const c = new Conn(u.id, { resume: resumeOf?.sid });
  const w = await c.welcome;
  if (!w || w.type !== 'welcome' || c.inc !== incarnation || stopping || winding) {
    c.kill();
    if (w?.resumed && winding && resumeOf.endLo == null) { resumeOf.closedAt = Date.now(); touchP(u); } // its grace restarts
    return;
  }
  const now = Date.now();
  let s;
  if (resumeOf) {
    const old = resumeOf;
    const gap = c.openedAt - (old.closedAt ?? c.openedAt);
    const certainAlive = old.endLo == null && c.openedAt < bounds(old)[0] - SLACK;
    const certainGone = old.endLo != null ? c.openedAt > old.endHi + SLACK : c.openedAt > bounds(old)[1] + SLACK;
    if (w.resumed && certainGone) violate('no-resume-after-grace', u.id, '-', `resumed ${old.sid.slice(0, 8)} ${gap} ms after its socket closed (grace ${GRACE} ms)`);
    if (!w.resumed && certainAlive) violate('resume-within-grace', u.id, '-', `resume of ${old.sid.slice(0, 8)} ${gap} ms after its socket ${old.paused ? 'was paused' : 'closed'} started a new session (grace ${GRACE} ms)`);
    if (w.resumed && w.sessionId !== old.sid) violate('resume-within-grace', u.id, '-', 'resumed:true with another sessionId');
    if (w.resumed) {
      if (old.conn && old.conn !== c) { old.conn.expectClose = true; old.conn.kill(); }
      s = old;
      s.conn = c; c.session = s; s.closedAt = null; s.paused = false; s.lastMsg = now;
      s.endLo = s.endHi = null;
      touchP(u);
    } else {
      if (old.conn && old.paused) { /* the paused socket keeps its session until the TTL */ }
      s = newSession(u.id, c, w);
    }
  } else {
    s = newSession(u.id, c, w);
  }
  const others = [...ACTORS, ...OBSERVERS].filter((x) => x !== u.id && chance(0.4));
  afterOpen(c, [u.id, ...others]);
  if (resumeOf && w.resumed) {
    for (const r of s.rooms) {
      const oldView = resumeOf.lastViews?.get(r);
      joinRoom(c, r, { since: oldView && !oldView.broken ? oldView : null });
    }
  } else if (resumeOf) {
    // a new session: re-send the status and re-join the rooms, as a client should
    if (resumeOf.status !== 'online') { s.status = resumeOf.status; c.send({ type: 'status', status: s.status }); }
    for (const r of resumeOf.rooms) joinRoom(c, r);
  }
}

function actReload(u) {
  const c = pick(liveConns(u));
  if (!c) return actConnect(u);
  const s = c.session;
  const abrupt = chance(0.4);
  const late = chance(0.15);
  const delay = late ? GRACE + SLACK + 100 + rnd() * 400 : rnd() * Math.max(0, GRACE - 2 * SLACK);
  s.lastViews = c.rviews;
  if (abrupt) c.kill(); else c.close();
  s.closedAt = Date.now();
  s.conn = null;
  touchP(u);
  trace(`${u.id} reload ${abrupt ? 'abrupt' : 'clean'} ${s.sid.slice(0, 8)} in ${Math.round(delay)} ms`);
  const inc = incarnation;
  setTimeout(() => { if (inc === incarnation && !finished && !stopping) actConnect(u, s); }, delay);
}

function actSilent(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const s = c.session;
  touchP(u);
  if (chance(0.5)) {
    trace(`${u.id} silent: destroy ${s.sid.slice(0, 8)}`);
    c.kill();
    s.closedAt = Date.now();
    s.conn = null;
  } else {
    trace(`${u.id} silent: pause ${s.sid.slice(0, 8)}`);
    c.pause();
    s.paused = true;
  }
}

function actResumePaused(u) {
  const now = Date.now();
  const s = [...u.sessions.values()].find((x) => x.paused && x.endLo == null && aliveAt(x, now));
  if (!s) return;
  trace(`${u.id} resume paused ${s.sid.slice(0, 8)}`);
  s.lastViews = s.conn?.rviews;
  actConnect(u, s);
}

function actLeave(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const s = c.session;
  c.expectClose = true;
  c.send({ type: 'leave' });
  s.endLo = Date.now(); s.endHi = s.endLo + 50;
  touchAll(u);
  trace(`${u.id} leave ${s.sid.slice(0, 8)}`);
}

function actStatus(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const st = pick(STATUSES);
  c.session.status = st;
  c.send({ type: 'status', status: st });
  if (chance(0.5)) c.send({ type: 'custom', text: chance(0.7) ? pick(['In a meeting', 'Lunch', 'Focus', 'On call']) : '' });
  touchP(u);
  trace(`${u.id} status ${st}`);
}

function applyVisChange(u, mutate) { // mutate the model, track shownSince
  const now = Date.now();
  const was = shownInRooms(u);
  if (!u.priv.invisible && presenceTri(u, now) !== 'OFF') u.lastPublic = now;
  mutate();
  if (!was && shownInRooms(u)) u.shownSince = now;
}

async function actPrivacy(u) {
  const want = { invisible: chance(0.35), online: chance(0.5) ? 'everyone' : pick(VIS) };
  const body = { online: want.online, lastSeen: want.online, invisible: want.invisible };
  touchAll(u);
  applyVisChange(u, () => { u.priv = { ...want }; });
  const r = await admin('PUT', `/v1/admin/users/${u.id}/privacy`, body);
  touchAll(u);
  if (r.status !== 200) violate('admin-api-answers', u.id, '-', `PUT privacy -> ${r.status} ${r.text}`);
  trace(`${u.id} privacy ${JSON.stringify(body)}`);
}

async function actContacts(u) {
  const list = [...ACTORS, ...OBSERVERS].filter((x) => x !== u.id && chance(0.4));
  touchAll(u);
  applyVisChange(u, () => { u.contacts = new Set(list); });
  const r = await admin('PUT', `/v1/admin/users/${u.id}/contacts`, { contacts: list });
  touchAll(u);
  if (r.status !== 200) violate('admin-api-answers', u.id, '-', `PUT contacts -> ${r.status} ${r.text}`);
  trace(`${u.id} contacts ${list.join(' ')}`);
}

async function actBlock(u) {
  const target = pick([...ACTORS, ...OBSERVERS].filter((x) => x !== u.id));
  const block = !u.blocks.has(target) && (u.blocks.size < 3 || chance(0.2));
  touchAll(u);
  applyVisChange(u, () => { if (block) u.blocks.add(target); else u.blocks.delete(target); });
  const r = await admin(block ? 'PUT' : 'DELETE', `/v1/admin/users/${u.id}/blocks/${target}`);
  touchAll(u);
  if (r.status !== 200) violate('admin-api-answers', u.id, '-', `${block ? 'PUT' : 'DELETE'} block -> ${r.status} ${r.text}`);
  trace(`${u.id} ${block ? 'blocks' : 'unblocks'} ${target}`);
}

let selfBlockProbed = 0;
async function actSelfBlock(u) {
  if (selfBlockProbed++ >= 3) return;
  touchAll(u);
  const r = await admin('PUT', `/v1/admin/users/${u.id}/blocks/${u.id}`);
  if (r.status === 200) {
    violate('self-block-refused', u.id, u.id, `PUT /v1/admin/users/${u.id}/blocks/${u.id} answered 200 ${r.text.trim()}`);
    await admin('DELETE', `/v1/admin/users/${u.id}/blocks/${u.id}`);
  }
  touchAll(u);
}

async function actJoin(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const r = pick(ROOMS.filter((x) => !c.rviews.has(x)));
  if (!r || Date.now() - (u.rTouched.get(r) || 0) < 100) return;
  trace(`${u.id} join ${r}`);
  await joinRoom(c, r);
}

function actRoomLeave(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const r = pick([...c.rviews.keys()]);
  if (!r || Date.now() - (u.rTouched.get(r) || 0) < 100) return;
  c.rviews.delete(r);
  c.session.rooms.delete(r);
  c.send({ type: 'room_leave', room: r });
  touchR(u, r);
  trace(`${u.id} room_leave ${r}`);
}

async function actPatch(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const r = pick([...c.rviews.entries()].filter(([, v]) => v.state === 'joined').map(([k]) => k));
  if (!r || Date.now() - (u.rTouched.get(r) || 0) < 100) return;
  const patch = chance(0.3) ? { c: null } : { c: Math.floor(rnd() * 1000) };
  const base = { ...(u.meta.get(r) || {}) };
  for (const [k, x] of Object.entries(patch)) { if (x === null) delete base[k]; else base[k] = x; }
  u.meta.set(r, base);
  touchR(u, r);
  const a = await c.request({ type: 'patch', room: r, meta: patch });
  touchR(u, r);
  trace(`${u.id} patch ${r} ${JSON.stringify(patch)} -> ${a?.type}`);
}

function actEphemeral(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const r = pick([...c.rviews.entries()].filter(([, v]) => v.state === 'joined').map(([k]) => k));
  if (r) c.send({ type: 'ephemeral', room: r, kind: 'cursor', data: { x: Math.floor(rnd() * 500) } });
}

// A patch from a user who is certainly not in the room: the answer must read
// "no such room" when no member is visible to it, "not a member" otherwise.
async function actStrayPatch(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const now = Date.now();
  const r = pick(ROOMS);
  if (roomTri(u, r, now) !== 'OFF' || now - (u.rTouched.get(r) || 0) < W) return;
  let visibleMembers = 0;
  let hiddenMembers = [];
  for (const v of users.values()) {
    if (now - (v.rTouched.get(r) || 0) < W) return;
    const t = roomTri(v, r, now);
    if (t === 'UNK' || (t === 'ON' && now - v.visTouched < W)) return;
    if (t === 'ON') { if (visibleInRoom(v, u.id)) visibleMembers++; else hiddenMembers.push(v.id); }
  }
  const a = await c.request({ type: 'patch', room: r, meta: { stray: 1 } });
  if (!a || Date.now() - now > W) return;
  const msg = a.type === 'error' ? a.message : 'ack';
  count(`stray-patch-${visibleMembers ? 'visible' : 'hidden-only'}`);
  trace(`${u.id} stray patch ${r} (visible ${visibleMembers}, hidden ${hiddenMembers.join(' ')}) -> ${msg}`);
  if (visibleMembers === 0 && msg !== 'no such room') {
    violate('hidden-room-errors', hiddenMembers.join('|') || '-', u.id,
      `room ${r} holds only members hidden from ${u.id} (${hiddenMembers.join(' ') || 'none'}), a non-member's patch answered "${msg}" instead of "no such room"`);
  }
  if (visibleMembers > 0 && msg !== 'not a member of the room') {
    violate('hidden-room-errors', '-', u.id, `room ${r} has ${visibleMembers} visible members, a non-member's patch answered "${msg}"`);
  }
}

const ACTIONS = [
  [10, actConnect], [8, actReload], [5, actSilent], [2, actResumePaused], [3, actLeave],
  [8, actStatus], [4, actPrivacy], [2, actContacts], [4, actBlock], [1, actSelfBlock],
  [9, actJoin], [5, actRoomLeave], [7, actPatch], [4, actEphemeral], [3, actStrayPatch],
];
const TOTAL_W = ACTIONS.reduce((a, [w]) => a + w, 0);
function pickAction() {
  let x = rnd() * TOTAL_W;
  for (const [w, f] of ACTIONS) { if ((x -= w) < 0) return f; }
  return ACTIONS[0][1];
}

// ---- heartbeats and checks ----
let stopping = false;
let finished = false;
let winding = false; // the wind down: a late reload's reconnect opens no session
function heartbeats() {
  const now = Date.now();
  for (const c of conns) {
    if (!c.checkable || !c.session || c.session.conn !== c || c.session.endLo != null) continue;
    if (now - c.lastHbSent >= HB_MS) {
      if (c.send({ type: 'heartbeat' })) { c.lastHbSent = now; c.session.lastHb = now; }
    }
  }
}
function tick() {
  if (stopping) return;
  const now = Date.now();
  for (const c of conns) {
    if (!c.checkable) continue;
    checkPresence(c, now);
    for (const v of c.rviews.values()) if (v.state === 'joined' && !v.broken) checkRoom(c, v, now);
  }
  for (const c of streams) {
    if (!c.checkable) continue;
    checkPresence(c, now);
    for (const v of c.rviews.values()) if (v.state === 'joined' && !v.broken) checkRoom(c, v, now);
  }
  for (const u of users.values()) if (!u.priv.invisible && presenceTri(u, now) !== 'OFF') u.lastPublic = now;
  // forget sessions long gone; destroy paused sockets whose session ended
  for (const u of users.values()) {
    for (const [sid, s] of u.sessions) {
      if (goneAt(s, now - 2000)) {
        if (s.conn && s.paused) s.conn.kill();
        u.sessions.delete(sid);
      }
    }
  }
}

async function restart() {
  stopping = true;
  trace('restart: SIGTERM');
  const t0 = Date.now();
  const old = srv;
  for (const c of conns) c.expectClose = true;
  closeStreams();
  const { code, signal } = await old.stop('SIGTERM');
  const t1 = Date.now();
  checkShutdown(old, code, signal);
  const open = [];
  for (const u of users.values()) {
    for (const s of u.sessions.values()) if (s.endLo == null) { s.endLo = t0; s.endHi = t1; open.push(s); }
    touchAll(u);
  }
  for (const c of [...conns]) { c.dead = true; c.kill(); conns.delete(c); }
  await boot();
  // The clean stop saved the sessions and the start restored them in their
  // reconnect grace (docs/protocol.md, "Across a restart"): those nobody
  // resumes end one grace (and a debounce) after the start; an invisible
  // user's, never saved, ended at the stop. Either is inside [t0, then].
  const t2 = Date.now();
  for (const s of open) s.endHi = t2 + GRACE + DEBOUNCE;
  for (const u of users.values()) touchAll(u);
  stopping = false;
  for (const id of OBSERVERS) await connectObserver(id);
  openStreams();
  trace(`restart: up on ${srv.port}`);
}
function checkShutdown(s, code, signal) {
  if (signal !== null || code !== 0 || /AddressSanitizer|runtime error:|LeakSanitizer/.test(s.stderr)) {
    violate('clean-shutdown', '-', '-', `SIGTERM: exit code ${code} signal ${signal}\n${s.stderr.slice(-3000)}`);
  }
}

// ---- main ----
async function main() {
  console.log(`soak: seed=${SEED} seconds=${SECONDS} actors=${N_ACTORS} ttl=${TTL} grace=${GRACE} ` +
    `debounce=${DEBOUNCE} batch=${BATCH} slack=${SLACK}`);
  console.log(`soak: reproduce with: node tests/soak/soak.mjs --seed ${SEED} --seconds ${SECONDS}`);
  await boot();
  for (const id of OBSERVERS) await connectObserver(id);
  openStreams();
  const hb = setInterval(heartbeats, 50);
  const chk = setInterval(tick, 100);
  const start = Date.now();
  const deadline = start + SECONDS * 1000;
  const restarts = [0.4, 0.75].map((f) => start + f * SECONDS * 1000);
  if (SECONDS > 300) for (let t = start + 120000; t < deadline - 30000; t += 120000) restarts.push(t);
  restarts.sort((a, b) => a - b);
  let nRestarts = 0;
  while (Date.now() < deadline) {
    if (restarts.length && Date.now() >= restarts[0]) { restarts.shift(); await restart(); nRestarts++; continue; }
    step++;
    if (chance(0.08)) httpReads();
    const u = U(pick(ACTORS));
    try { await pickAction()(u); } catch (e) { violate('harness', u.id, '-', `action threw: ${e.stack}`); }
    await sleep(20 + rnd() * 130);
  }
  // Wind down: every actor goes away (silently or not); after TTL + grace +
  // W nobody may be shown online, and rooms hold only the observers.
  step++;
  winding = true;
  trace('wind down');
  for (const u of users.values()) {
    if (!u.actor) continue;
    for (const s of u.sessions.values()) {
      if (s.endLo != null || !s.conn) continue;
      // A paused socket cannot send its leave (Conn.send refuses): it is
      // destroyed instead, so the model never ends a session the server
      // still holds until its TTL.
      const leave = chance(0.5);
      if (!(leave && actLeaveSession(u, s))) { s.conn.kill(); s.closedAt = Date.now(); s.conn = null; touchP(u); }
    }
  }
  await sleep(TTL + GRACE + W + 500);
  const now = Date.now();
  for (const c of conns) {
    if (!c.checkable || U(c.user).actor) continue;
    for (const id of ACTORS) {
      const p = c.pview.get(id);
      if (p && p.status !== 'offline') violate('no-ghost', id, c.user, `after every session ended (TTL + grace), still shown ${p.status}`);
    }
    for (const v of c.rviews.values()) {
      for (const id of v.members.keys()) if (U(id)?.actor) violate('room-membership', id, c.user, `room ${v.room}: ghost member after every session ended`);
    }
  }
  for (const v of streams) {
    if (!v.checkable) continue;
    for (const id of ACTORS) {
      const p = v.pview.get(id);
      if (p && p.status !== 'offline') violate('no-ghost', id, v.user, `${v.kind}: after every session ended (TTL + grace), still shown ${p.status}`);
    }
    for (const rv of v.rviews.values()) {
      for (const id of rv.members.keys()) if (U(id)?.actor) violate('room-membership', id, v.user, `${v.kind} room ${rv.room}: ghost member after every session ended`);
    }
  }
  void now;
  finished = true;
  closeStreams();
  clearInterval(hb);
  clearInterval(chk);
  for (const c of [...conns]) { c.expectClose = true; c.kill(); }
  const { code, signal } = await srv.stop('SIGTERM');
  checkShutdown(srv, code, signal);
  fs.rmSync(storeDir, { recursive: true, force: true });

  const secs = ((Date.now() - T0) / 1000).toFixed(1);
  console.log(`soak: ${step} steps, ${nRestarts} restarts, ${secs} s`);
  console.log(`soak: checks ${Object.entries(stats).sort().map(([k, n]) => `${k}=${n}`).join(' ')}`);
  if (failures.size === 0) { console.log(`soak: ok seed=${SEED}`); return 0; }
  console.log(`\nsoak: FAILED seed=${SEED} (reproduce: node tests/soak/soak.mjs --seed ${SEED} --seconds ${SECONDS})`);
  for (const [inv, f] of failures) {
    console.log(`  ${inv}: ${f.count} failure(s); first: ${f.first[0]}`);
  }
  return 1;
}
// Sends s's leave; false (and nothing changed) when its socket cannot send.
function actLeaveSession(u, s) {
  if (!s.conn.send({ type: 'leave' })) return false;
  s.conn.expectClose = true;
  s.endLo = Date.now(); s.endHi = s.endLo + 50;
  touchAll(u);
  return true;
}

main().then((rc) => process.exit(rc), (e) => {
  console.log(`soak: harness error seed=${SEED}: ${e.stack}`);
  try { srv?.child.kill('SIGKILL'); } catch { /* already gone */ }
  process.exit(2);
});
