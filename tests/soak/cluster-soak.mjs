#!/usr/bin/env node
// cluster-soak.mjs - a seeded chaos soak of three presenced nodes on one
// standalone Redis, with a model checker (issue 17 item 8; docs/cluster.md).
//
// The script starts its own redis-server (tests/cluster/lib/nodes.mjs) and
// three nodes of the real binary ($PRESENCED_BIN, the ASan build by
// default) that share it and the PostgreSQL settings store named by
// $PRESENCED_TEST_PG (tests/cluster/run.sh starts one), with short timings
// (heartbeat interval, session TTL, reconnect grace, debounce, lease and
// orphan grace). One seeded PRNG drives the actors: they connect to random
// nodes, heartbeat, go silent (socket destroyed, or paused: no reads, no
// heartbeats), reload (close, then ?resume= within the grace on the same
// node, sometimes after it), move (close, then ?resume= on another node:
// the same session when its old node wrote its record, else a new one), change
// status and custom status, and leave. One observer per node (a fixed,
// well-behaved user) watches every actor and the other observers. A second
// seeded PRNG drives the chaos, one fault at a time: a node killed with
// SIGKILL and restarted (same node id, new epoch), Redis SIGSTOPped for a
// few seconds then SIGCONTed, Redis killed and restarted empty, and a node
// SIGSTOPped for longer than its lease but less than lease + orphan grace
// (it renews in time: it must not be swept).
//
// Rooms: actors' sessions join one shared room (and sometimes leave it);
// every live node's GET /v1/rooms/{id} is read now and then.
//
// A model says, for each user, whether some session is certainly live,
// certainly gone, or unknown (a session ends between its last heartbeat +
// TTL and its last message + TTL, a closed socket's after the grace, a
// killed node's between the kill and lease + orphan grace + renewals
// later). A check judges only states that are certain and have been stable
// for a window W (debounce + cross-node slack). While Redis is out (and
// for RECOVER after it is back: reconnect backoff + rebuild) only
// no-false-offline is judged, for users untouched since before the outage:
// an outage of Redis never makes anyone go offline. Invariants:
//   no-ghost            a user with no live session is shown offline, by
//                       every observer on every node (and by HTTP reads)
//   no-false-offline    a user with a certainly live session on a live node
//                       is never shown offline
//   status-matches      shown status, devices and (one session) custom
//                       status are the sessions' most-available merge
//   observers-converge  observers on different nodes whose views of a user
//                       have been still for CONV show the same view
//   version-monotonic   HGET pd:app:{u:<h>}:a ver never goes back
//   resume-within-grace / no-resume-after-grace   reloads on the same node
//   rooms-converge      when no membership has changed and no fault has
//                       happened for one heartbeat + TTL, and every
//                       membership is certain, every node reads the same
//                       member-set digest, the model's; after the wind
//                       down every node reads the room empty
//   no-stale-contribution  after the wind down no user keeps a contribution
//   unexpected-close    no node closes a healthy connection (Redis chaos
//                       included: 0 client disconnects)
//   node-exit           no node exits unless killed; SIGTERM at the end
//                       exits 0; no sanitizer report on any node's stderr
//
// Usage: node tests/soak/cluster-soak.mjs [--seed N] [--seconds S | --minutes M]
//        [--actors N] [--chaos kill,redis-stop,redis-restart,node-stop] [--trace]
// (--chaos: the faults to begin with, in that order; then they are drawn)
// A seed reproduces the same scripts (actions and chaos), not the same
// interleaving. The seed is printed at the start and with every failure;
// exit status 1 when any invariant failed.
import WebSocket from 'ws';
import net from 'node:net';
import { startServer, MULT, sleep } from '../integration/lib/server.mjs';
import { startRedis, userKey, fnv1a64, PG } from '../cluster/lib/nodes.mjs';
import { memberDigest } from '../../clients/js/rooms.js';

// ---- options ----
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const seedArg = opt('seed', process.env.SOAK_SEED || '');
const SEED = seedArg === '' ? (Date.now() % 2147483647) : Number(seedArg);
const SECONDS = Number(opt('minutes', '')) * 60 || Number(opt('seconds', process.env.SOAK_SECONDS || 60));
const N_ACTORS = Number(opt('actors', 9));
const TRACE = argv.includes('--trace');
const CHAOS = opt('chaos', ''); // faults to begin with: kill,redis-stop,redis-restart,node-stop
if (!Number.isFinite(SEED)) throw new Error(`--seed must be a number, got ${seedArg}`);
if (!PG) {
  console.error('cluster-soak: PRESENCED_TEST_PG is not set: it must name a PostgreSQL settings store ' +
    '(postgresql://...); run it through tests/cluster/run.sh (or make soak-cluster), which starts one');
  process.exit(2);
}

// ---- timings ----
const N_NODES = 3;
const HB_MS = 500; // clients heartbeat this often
const TTL = 4000;
const GRACE = 1000;
const DEBOUNCE = 50;
const LEASE = 2000;
const RENEW = LEASE / 5;
const ORPHAN = 2000;
const SLACK = 400 * MULT;
const W = DEBOUNCE + SLACK; // a change is visible on every node after W
const CONV = W + 300 * MULT; // observers' views still this long must agree
// a killed node's users are offline elsewhere by then: its lease runs out,
// a survivor's renewal sees it, the grace, the next renewal sweeps
const KILL_HI = LEASE + ORPHAN + 3 * RENEW + 500 * MULT;
// after Redis is back: reconnect backoff (cap 5 s), connect, re-put
const RECOVER = 8000 * MULT;
const NODE_FLAGS = ['--workers', '2',
  '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100',
  '--session-ttl-ms', String(TTL), '--reconnect-grace-ms', String(GRACE),
  '--presence-debounce-ms', String(DEBOUNCE), '--idle-ms', '600000', '--observer-query-rate', '0',
  '--cluster-lease-ms', String(LEASE), '--cluster-orphan-grace-ms', String(ORPHAN)];

// ---- seeded PRNGs (mulberry32): one for the actors, one for the chaos ----
function mulberry(seed) {
  let st = seed >>> 0;
  return () => {
    st = (st + 0x6d2b79f5) >>> 0;
    let t = st;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry(SEED);
const crnd = mulberry(SEED ^ 0x5eed5eed);
const pick = (a, r = rnd) => a[Math.floor(r() * a.length)];
const chance = (p) => rnd() < p;

// ---- failures ----
const T0 = Date.now();
let step = 0;
const failures = new Map(); // invariant -> { count, first: [msgs] }
const since0 = () => `t=+${((Date.now() - T0) / 1000).toFixed(2)}s`;
function violate(inv, user, observer, detail) {
  const msg = `[${inv}] user=${user} observer=${observer} seed=${SEED} step=${step} ${since0()}: ${detail}`;
  let f = failures.get(inv);
  if (!f) failures.set(inv, f = { count: 0, first: [] });
  f.count++;
  if (f.first.length < 5) { f.first.push(msg); console.log(`FAIL ${msg}`); }
}
const stats = {}; // how many times each check judged something
const count = (k) => { stats[k] = (stats[k] || 0) + 1; };
const chaosLog = [];
function trace(s) { if (TRACE) console.log(`  #${step} ${since0()} ${s}`); }
let lastFault = 0; // when the last fault began or ended
function note(s) { lastFault = Date.now(); chaosLog.push(`${since0()} ${s}`); trace(`chaos: ${s}`); }

// ---- the model ----
const STATUSES = ['online', 'away', 'busy', 'dnd'];
const RANK = { online: 0, busy: 1, away: 2, dnd: 3 }; // most-available first
const DEVICES = ['desktop', 'mobile', 'tablet', 'web'];
const CUSTOMS = ['In a meeting', 'Lunch', 'Focus', 'On call'];
const tag = `${SEED}-${process.pid}-${Date.now().toString(36)}`; // the PostgreSQL store outlives runs
const ACTORS = Array.from({ length: N_ACTORS }, (_, i) => `ca${i}-${tag}`);
const OBSERVERS = Array.from({ length: N_NODES }, (_, i) => `co${i}-${tag}`);

const users = new Map();
for (const id of [...ACTORS, ...OBSERVERS]) {
  users.set(id, { id, actor: ACTORS.includes(id), sessions: new Map(), pTouched: 0 });
}
const U = (id) => users.get(id);
const touchP = (u) => { u.pTouched = Date.now(); };

// Bounds of a session's end as remote observers see it: [lo, hi].
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
function presenceTri(u, t) {
  let unk = false;
  for (const s of u.sessions.values()) {
    if (aliveAt(s, t)) return 'ON';
    if (!goneAt(s, t)) unk = true;
  }
  return unk ? 'UNK' : 'OFF';
}
// The expected {status, devices, custom} when every session is certain, else null.
function expected(u, t) {
  let status = null;
  const devices = {};
  const live = [];
  for (const s of u.sessions.values()) {
    if (aliveAt(s, t)) live.push(s);
    else if (!goneAt(s, t)) return null;
  }
  for (const s of live) {
    if (status === null || RANK[s.status] < RANK[status]) status = s.status;
    if (!devices[s.device] || RANK[s.status] < RANK[devices[s.device]]) devices[s.device] = s.status;
  }
  return { status, devices, custom: live.length === 1 ? live[0].custom : null, n: live.length };
}
// ---- the room ----
const ROOM = `soak-room-${tag}`;
// 'IN', 'OUT' or 'UNK': whether u is certainly a member at t.
function roomTri(u, t) {
  let unk = false;
  for (const s of u.sessions.values()) {
    if (s.roomAt == null) continue;
    const settled = t - s.roomAt > CONV;
    if (s.inRoom && settled && aliveAt(s, t)) return 'IN';
    if (!settled || (s.inRoom && !goneAt(s, t))) unk = true;
  }
  return unk ? 'UNK' : 'OUT';
}
// The digest of the certain member set, or null when one is uncertain.
function modelDigest(t) {
  let d = 0n;
  for (const u of users.values()) {
    const r = roomTri(u, t);
    if (r === 'UNK') return null;
    if (r === 'IN') d ^= memberDigest(u.id);
  }
  return d.toString(16).padStart(16, '0');
}
function roomJoin(s, c) {
  if (c.send({ type: 'join', room: ROOM })) { s.inRoom = true; s.roomAt = Date.now(); }
}
function roomLeave(s, c) {
  if (c.send({ type: 'room_leave', room: ROOM })) { s.inRoom = false; s.roomAt = Date.now(); }
}

function descSession(s) {
  const now = Date.now();
  const [lo, hi] = bounds(s);
  const st = s.endLo != null ? 'ended' : s.closedAt != null ? `closed ${now - s.closedAt} ms ago`
    : s.paused ? 'paused' : 'attached';
  return `${s.sid.slice(0, 8)}@n${s.node} ${s.status} ${st}, ends in [${lo - now}, ${hi - now}] ms`;
}

// ---- Redis and its outages ----
let redis = null;
let redisUp = true; // false while SIGSTOPped or restarting
const outages = []; // {start, end}: end = back + RECOVER (Infinity while out)
function outageAt(t0, t1 = t0) { return outages.find((o) => t1 >= o.start && t0 <= o.end) || null; }

// A tiny RESP client for sampling (redis-cli would block the loop while
// Redis is stopped): pipelined commands, bulk/int/status/error replies.
class Resp {
  constructor(port) { this.port = port; this.sock = null; this.buf = Buffer.alloc(0); this.q = []; }
  connect() {
    this.sock = net.connect(this.port, '127.0.0.1');
    this.sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.parse(); });
    const fail = () => { this.sock = null; for (const f of this.q.splice(0)) f.reject(new Error('closed')); };
    this.sock.on('error', fail);
    this.sock.on('close', fail);
  }
  parse() {
    for (;;) {
      const i = this.buf.indexOf('\r\n');
      if (i < 0 || !this.q.length) return;
      const line = this.buf.subarray(0, i).toString();
      let v;
      let used = i + 2;
      if (line[0] === '$') {
        const n = Number(line.slice(1));
        if (n < 0) v = null;
        else {
          if (this.buf.length < used + n + 2) return;
          v = this.buf.subarray(used, used + n).toString();
          used += n + 2;
        }
      } else if (line[0] === '-') v = new Error(line.slice(1));
      else v = line.slice(1);
      this.buf = this.buf.subarray(used);
      this.q.shift().resolve(v);
    }
  }
  // Resolves each command's reply (in order), rejects after ms or on close.
  run(cmds, ms = 500) {
    if (!this.sock) this.connect();
    const enc = (a) => `*${a.length}\r\n${a.map((x) => `$${Buffer.byteLength(String(x))}\r\n${x}\r\n`).join('')}`;
    const ps = cmds.map(() => new Promise((resolve, reject) => this.q.push({ resolve, reject })));
    this.sock.write(cmds.map(enc).join(''));
    const all = Promise.all(ps);
    return Promise.race([all, sleep(ms).then(() => { throw new Error('timeout'); })]).catch((e) => {
      this.sock?.destroy(); this.sock = null; this.buf = Buffer.alloc(0);
      for (const f of this.q.splice(0)) f.reject(e);
      all.catch(() => {});
      throw e;
    });
  }
  close() { this.sock?.destroy(); }
}
let resp = null;
const maxVer = new Map(); // user -> BigInt
let sampling = false;
async function sampleVersions() {
  if (sampling || !redisUp) return;
  sampling = true;
  try {
    const ids = [...ACTORS, ...OBSERVERS];
    const vals = await resp.run(ids.map((id) => ['HGET', userKey(id), 'ver']));
    ids.forEach((id, i) => {
      const v = vals[i];
      if (typeof v !== 'string') return;
      const x = BigInt(v);
      const prev = maxVer.get(id);
      count('version-sample');
      if (prev !== undefined && x < prev) violate('version-monotonic', id, 'redis', `ver ${x} after ${prev} (${prev - x} less)`);
      if (prev === undefined || x > prev) maxVer.set(id, x);
    });
  } catch { /* Redis stopped or restarting: skip */ }
  sampling = false;
}

// ---- nodes ----
const nodes = Array.from({ length: N_NODES }, (_, i) => ({ idx: i, id: `n${i}`, srv: null, alive: false, inc: 0,
  exits: [] }));
const SAN = /ERROR: AddressSanitizer|runtime error:|LeakSanitizer/;
async function bootNode(n) {
  const srv = await startServer(['--redis', redis.url, '--node-id', n.id, '--store', PG, ...NODE_FLAGS]);
  n.srv = srv;
  n.lives = [...(n.lives || []), srv];
  n.alive = true;
  n.inc++;
  const inc = n.inc;
  srv.child.on('exit', (code, signal) => {
    if (SAN.test(srv.stderr)) violate('node-exit', '-', n.id, `sanitizer report:\n${srv.stderr.slice(-3000)}`);
    if (n.inc === inc && n.alive && !n.stopping) {
      n.alive = false;
      violate('node-exit', '-', n.id, `node exited by itself: code ${code} signal ${signal}\n${srv.stderr.slice(-3000)}`);
    }
  });
}
const liveNodes = () => nodes.filter((n) => n.alive && !n.frozen);

// ---- connections ----
const conns = new Set();
let refSeq = 0;

class Conn {
  constructor(user, node, { resume, device } = {}) {
    this.user = user;
    this.node = node;
    this.nodeInc = node.inc;
    this.session = null;
    this.open = false;
    this.paused = false;
    this.dead = false;
    this.expectClose = false;
    this.pending = new Map();
    this.watched = new Set();
    this.snapPending = new Set();
    this.pview = new Map(); // user -> presence
    this.changedAt = new Map(); // user -> when its shown view last changed
    this.lastHbSent = 0;
    this.device = device || pick(DEVICES);
    const q = new URLSearchParams({ user, device: this.device });
    if (resume) q.set('resume', resume);
    this.openedAt = Date.now();
    this.ws = new WebSocket(`${node.srv.wsUrl}/v1/ws?${q}`);
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

  get nodeLive() { return this.node.alive && this.node.inc === this.nodeInc; }
  get checkable() { return this.open && !this.paused && !this.dead && this.nodeLive && !this.node.frozen; }

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

  onMessage(m) {
    if ((m.type === 'ack' || m.type === 'error') && this.pending.has(m.ref)) {
      const f = this.pending.get(m.ref);
      this.pending.delete(m.ref);
      f(m);
      return;
    }
    if (m.type === 'presence') onPresence(this, m.presence);
    else if (m.type === 'session_ended') onSessionEnded(this, m);
  }

  onClose(code) {
    const wasOpen = this.open && !this.dead;
    this.open = false;
    conns.delete(this);
    if (this.dead || this.expectClose || !this.nodeLive || stopping) { this.dead = true; return; }
    this.dead = true;
    if (wasOpen && !this.paused && !this.endedByServer) {
      violate('unexpected-close', this.user, '-', `node ${this.node.id} closed a healthy connection with ${code}`);
    }
    const s = this.session;
    if (s && s.conn === this && s.endLo == null) { s.closedAt = Date.now(); s.conn = null; touchP(U(this.user)); }
    if (!U(this.user).actor) reconnectObserver(this.node);
  }

  kill() { this.dead = true; this.expectClose = true; this.ws._socket?.destroy(); }
  close() { this.dead = true; this.expectClose = true; this.ws.close(1000); }
  pause() { this.paused = true; this.ws._socket?.pause(); }
}

function onSessionEnded(c, m) {
  c.endedByServer = true;
  const s = c.session;
  if (!s || s.endLo != null) return;
  if (m.reason === 'ttl') { s.endLo = s.endHi = Date.now(); touchP(U(c.user)); }
}

// ---- presence views ----
const viewKey = (p) => JSON.stringify([p.status, Object.entries(p.devices || {}).sort(), p.custom?.text || '']);
const killWatch = new Map(); // user -> {at, node}: offline latency after a kill
const killLatency = [];
function onPresence(c, p) {
  const u = U(p.user);
  if (!u || !c.checkable) return;
  const isSnap = c.snapPending.delete(p.user);
  if (!c.watched.has(p.user) && !isSnap) return;
  c.watched.add(p.user);
  const prev = c.pview.get(p.user);
  if (!prev || viewKey(prev) !== viewKey(p)) c.changedAt.set(p.user, Date.now());
  c.pview.set(p.user, p);
  const k = killWatch.get(p.user);
  if (k && p.status === 'offline' && c.node.idx !== k.node && !k.seen.has(c.node.idx)) {
    k.seen.add(c.node.idx);
    killLatency.push(Date.now() - k.at);
  }
}

// Judges one shown presence of u to observer o (on a node), valid for the
// whole of [from, to] (a read answered in between, or a live view at now).
function checkShown(o, u, shown, from, to, channel) {
  const out = outageAt(from, to);
  if (out) {
    // Redis is out or rebuilding: only a user stable since before it may be judged
    if (u.pTouched >= out.start - W || u.pTouched > to) return;
    if (presenceTri(u, from) === 'ON' && presenceTri(u, to) === 'ON') {
      count(`outage-${channel}-ON`);
      if (shown.status === 'offline') {
        violate('no-false-offline', u.id, o, `${channel} during or after "${out.what}" (at +${((out.start - T0) / 1000).toFixed(2)}s): a live session (${liveDesc(u, from)}) but shown offline`);
      }
    }
    return;
  }
  if (from - u.pTouched < W || u.pTouched > to) return;
  const t = presenceTri(u, from);
  if (t !== presenceTri(u, to)) return;
  count(`presence-${channel}-${t}`);
  if (t === 'ON' && shown.status === 'offline') {
    violate('no-false-offline', u.id, o, `${channel}: a live session (${liveDesc(u, from)}) but shown offline`);
  } else if (t === 'OFF' && shown.status !== 'offline') {
    violate('no-ghost', u.id, o, `${channel}: no live session (${[...u.sessions.values()].map(descSession).join('; ') || 'none'}) but shown ${JSON.stringify(shown)}`);
  } else if (t === 'ON') {
    const want = expected(u, from);
    const want2 = expected(u, to);
    if (!want || !want2 || JSON.stringify(want) !== JSON.stringify(want2)) return;
    count(`status-${channel}`);
    const devs = Object.fromEntries(Object.entries(shown.devices || {}).sort());
    const wdevs = Object.fromEntries(Object.entries(want.devices).sort());
    if (shown.status !== want.status || JSON.stringify(devs) !== JSON.stringify(wdevs)) {
      violate('status-matches', u.id, o, `${channel}: sessions (${liveDesc(u, from)}) merge to ${want.status} ${JSON.stringify(wdevs)}, shown ${shown.status} ${JSON.stringify(devs)}`);
    } else if (want.custom !== null && (shown.custom?.text || '') !== want.custom) {
      violate('status-matches', u.id, o, `${channel}: one session, custom "${want.custom}", shown ${JSON.stringify(shown.custom || null)}`);
    }
  }
}
const liveDesc = (u, t) => [...u.sessions.values()].filter((s) => aliveAt(s, t)).map(descSession).join('; ');

function checkPresence(c, now) {
  if (now - c.openedAt < W) return;
  for (const uid of c.watched) {
    const shown = c.pview.get(uid);
    if (shown) checkShown(c.user, U(uid), shown, now, now, `n${c.node.idx}`);
  }
}

// Observers on different nodes whose views have been still for CONV agree.
function checkConverge(now) {
  if (outageAt(now - CONV, now)) return;
  const obs = [...obsConns.values()].filter((c) => c && c.checkable && now - c.openedAt >= CONV);
  if (obs.length < 2) return;
  for (const u of users.values()) {
    const views = obs.filter((c) => c.pview.has(u.id) && c.user !== u.id);
    if (views.length < 2) continue;
    if (views.some((c) => now - c.changedAt.get(u.id) < CONV)) continue;
    count('converge');
    const keys = new Set(views.map((c) => viewKey(c.pview.get(u.id))));
    if (keys.size > 1) {
      violate('observers-converge', u.id, views.map((c) => c.user).join('|'),
        `still for ${CONV} ms, different views: ${views.map((c) => `n${c.node.idx}=${viewKey(c.pview.get(u.id))}`).join(' ')}`);
    }
  }
}

// ---- sessions ----
function newSession(user, c, welcome) {
  const now = Date.now();
  const s = { sid: welcome.sessionId, user, conn: c, node: c.node.idx, status: 'online', custom: '',
    device: c.device, startedAt: now, lastHb: c.openedAt, lastMsg: now, closedAt: null, paused: false,
    endLo: null, endHi: null };
  U(user).sessions.set(s.sid, s);
  c.session = s;
  touchP(U(user));
  return s;
}
async function afterOpen(c, watchList) {
  c.snapPending = new Set(watchList);
  c.watched = new Set();
  await c.request({ type: 'watch', users: watchList });
}

// ---- observers ----
const obsConns = new Map(); // node idx -> Conn
async function connectObserver(n) {
  if (!n.alive || stopping || finished) return;
  const id = OBSERVERS[n.idx];
  const c = new Conn(id, n);
  obsConns.set(n.idx, c);
  const w = await c.welcome;
  if (!w || w.type !== 'welcome') return;
  newSession(id, c, w);
  await afterOpen(c, [...ACTORS, ...OBSERVERS].filter((x) => x !== id));
}
function reconnectObserver(n) {
  setTimeout(() => connectObserver(n), 10);
}

// Every so often a node answers a read of every actor over HTTP.
async function httpRead() {
  const n = pick(liveNodes());
  if (!n) return;
  const inc = n.inc;
  const from = Date.now();
  const q = ACTORS.map((x) => `user=${encodeURIComponent(x)}`).join('&');
  try {
    const r = await fetch(`${n.srv.url}/v1/presence?${q}`, { signal: AbortSignal.timeout(5000 * MULT) });
    const to = Date.now();
    if (r.status !== 200) { violate('http-reads', '-', n.id, `GET /v1/presence -> ${r.status}`); return; }
    const body = await r.json();
    if (!n.alive || n.inc !== inc) return;
    for (const p of body.users) checkShown(`http@${n.id}`, U(p.user), p, from, to, `http-n${n.idx}`);
  } catch (e) {
    if (n.alive && n.inc === inc && !stopping) violate('http-reads', '-', n.id, `read failed: ${e.message}`);
  }
}

// ---- actor actions ----
const liveConns = (u) => [...u.sessions.values()].filter((s) => s.endLo == null && s.conn && s.conn.checkable
  && !s.paused).map((s) => s.conn);
const resumeStats = { same: 0, sameLate: 0, across: 0, acrossResumed: 0 };

async function actConnect(u, resumeOf, onNode) {
  if ((u.sessions.size >= 6 && !resumeOf) || winding) return;
  const node = onNode || pick(liveNodes());
  if (!node || !node.alive || node.frozen) return;
  // a reload keeps the device; a move may be another one
  const same = resumeOf && resumeOf.node === node.idx;
  const c = new Conn(u.id, node, { resume: resumeOf?.sid, device: same ? resumeOf.device : undefined });
  const w = await c.welcome;
  if (!w || w.type !== 'welcome' || !c.nodeLive || stopping) { c.kill(); return; }
  let s;
  // A resume on another node may find the session (its old node wrote
  // its record when the socket closed) or not (the node was killed or
  // frozen first, or never saw the close): both are right there.
  if (same || (resumeOf && w.resumed)) {
    const old = resumeOf;
    const gap = c.openedAt - (old.closedAt ?? c.openedAt);
    const certainAlive = old.endLo == null && c.openedAt < bounds(old)[0] - SLACK;
    const certainGone = old.endLo != null ? c.openedAt > old.endHi + SLACK : c.openedAt > bounds(old)[1] + SLACK;
    if (w.resumed && certainGone) violate('no-resume-after-grace', u.id, '-', `resumed ${old.sid.slice(0, 8)} ${gap} ms after its socket closed (grace ${GRACE} ms)`);
    if (same && !w.resumed && certainAlive) violate('resume-within-grace', u.id, '-', `resume of ${old.sid.slice(0, 8)} on ${node.id} ${gap} ms after its socket ${old.paused ? 'was paused' : 'closed'} started a new session (grace ${GRACE} ms)`);
    if (w.resumed && w.sessionId !== old.sid) violate('resume-within-grace', u.id, '-', 'resumed:true with another sessionId');
    if (w.resumed) {
      if (same) resumeStats.same++;
      else resumeStats.across++, resumeStats.acrossResumed++;
      if (old.conn && old.conn !== c) { old.conn.expectClose = true; old.conn.kill(); }
      s = old;
      s.node = node.idx;
      s.conn = c; c.session = s; s.closedAt = null; s.paused = false; s.lastMsg = Date.now();
      s.endLo = s.endHi = null;
      touchP(u);
      // the session is still in the room, but this connection is not: the
      // SDK joins again on a resumed connection (a room_leave needs it)
      if (s.inRoom) c.send({ type: 'join', room: ROOM });
    } else {
      resumeStats.sameLate++;
      s = newSession(u.id, c, w);
    }
  } else {
    if (resumeOf) resumeStats.across++; // across nodes, not found: a new session
    s = newSession(u.id, c, w);
  }
  if (winding) { closeConn(u, c, true); return; } // the wind down began meanwhile
  if (resumeOf && !w.resumed) {
    // a new session: re-send the status and custom status, as the SDK does
    if (resumeOf.status !== 'online') { s.status = resumeOf.status; c.send({ type: 'status', status: s.status }); }
    if (resumeOf.custom) { s.custom = resumeOf.custom; c.send({ type: 'custom', text: s.custom }); }
    touchP(u);
  }
  // a new session joins the room (again, as the SDK does after a move) or not
  if (!w.resumed && (resumeOf ? resumeOf.inRoom : chance(0.6))) roomJoin(s, c);
}

function actRoom(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  if (c.session.inRoom) roomLeave(c.session, c);
  else roomJoin(c.session, c);
  trace(`${u.id} room ${c.session.inRoom ? 'join' : 'leave'}`);
}

// Every live node's read of the room; judged when nothing moved for long
// enough: one heartbeat + TTL after a fault, CONV after a join or leave,
// every session certainly live or certainly gone. Read every second, and
// at the end of a quiet moment the actors keep every QUIET_EVERY ms
// (heartbeats go on), when every membership has settled.
const QUIET_EVERY = 5000;
const QUIET_MS = CONV + GRACE + HB_MS;
let roomReading = false;
async function roomRead() {
  if (roomReading || winding || stopping) return;
  roomReading = true;
  try {
    const from = Date.now();
    const ns = liveNodes();
    const incs = ns.map((n) => n.inc);
    const got = await Promise.all(ns.map((n) => fetch(`${n.srv.url}/v1/rooms/${encodeURIComponent(ROOM)}`,
      { signal: AbortSignal.timeout(5000 * MULT) }).then((r) => r.json()).catch(() => null)));
    const to = Date.now();
    if (ns.some((n, i) => !n.alive || n.frozen || n.inc !== incs[i]) || got.some((g) => !g || g.degraded)) return;
    if (outageAt(from - 1000 - TTL, to) || lastFault > from - 1000 - TTL) { count('rooms-fault'); return; }
    const want = modelDigest(from);
    if (want === null || want !== modelDigest(to)) { count('rooms-uncertain'); return; }
    count('rooms-converge');
    const seen = got.map((g, i) => `${ns[i].id}=${g.digest} (${g.members.map((m) => m.user.slice(0, 4)).join(',')})`);
    if (got.some((g) => g.digest !== want)) {
      // the users some node lists and the model does not, or the other way
      const listed = (g) => new Set(g.members.map((m) => m.user));
      const odd = [...users.values()].filter((u) => got.some((g) => listed(g).has(u.id) !== (roomTri(u, from) === 'IN')));
      const why = odd.map((u) => `${u.id.slice(0, 4)}: ${[...u.sessions.values()].map((x) => `${descSession(x)}${x.roomAt != null ? ` room ${x.inRoom ? 'in' : 'out'} ${from - x.roomAt} ms ago` : ''}`).join('; ')}`);
      let held = '';
      try { held = redis.cli('HKEYS', `pd:app:{r:${fnv1a64(ROOM)}}:m`).split('\n').join(','); } catch (e) { held = e.message; }
      violate('rooms-converge', '-', 'rooms', `the model's digest ${want}, read ${seen.join(' ')}; ${why.join(' | ')}; redis ${held}`);
    }
  } finally { roomReading = false; }
}

// Close (or destroy) a socket, then ?resume= on the same node: within the
// grace (resumed) or, sometimes, after it (a new session).
function actReload(u) {
  const c = pick(liveConns(u));
  if (!c) return actConnect(u);
  const s = c.session;
  const late = chance(0.15);
  const delay = late ? GRACE + SLACK + 100 + rnd() * 400 : rnd() * Math.max(0, GRACE - 2 * SLACK);
  closeConn(u, c, chance(0.4));
  trace(`${u.id} reload ${s.sid.slice(0, 8)} on n${s.node} in ${Math.round(delay)} ms`);
  const node = c.node;
  const inc = node.inc;
  setTimeout(() => { if (node.inc === inc && node.alive && !finished && !stopping) actConnect(u, s, node); }, delay);
}

// Close, then ?resume= on another node within the grace: a new session
// there (resume across nodes is not built); the old one ends after the grace.
function actMove(u) {
  const c = pick(liveConns(u));
  const to = pick(liveNodes().filter((n) => c && n !== c.node));
  if (!c || !to) return;
  const s = c.session;
  closeConn(u, c, chance(0.4));
  trace(`${u.id} move ${s.sid.slice(0, 8)} n${s.node} -> ${to.id}`);
  setTimeout(() => { if (to.alive && !finished && !stopping) actConnect(u, s, to); }, rnd() * 300);
}

function closeConn(u, c, abrupt) {
  const s = c.session;
  if (abrupt) c.kill(); else c.close();
  s.closedAt = Date.now();
  s.conn = null;
  touchP(u);
}

function actSilent(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const s = c.session;
  touchP(u);
  if (chance(0.5)) {
    trace(`${u.id} silent: destroy ${s.sid.slice(0, 8)}`);
    closeConn(u, c, true);
  } else {
    trace(`${u.id} silent: pause ${s.sid.slice(0, 8)}`);
    c.pause();
    s.paused = true;
  }
}

function actResumePaused(u) {
  const now = Date.now();
  const s = [...u.sessions.values()].find((x) => x.paused && x.endLo == null && aliveAt(x, now));
  if (!s || !s.conn || !s.conn.nodeLive) return;
  trace(`${u.id} resume paused ${s.sid.slice(0, 8)}`);
  actConnect(u, s, s.conn.node);
}

function actLeave(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  leaveSession(u, c.session);
  trace(`${u.id} leave`);
}
function leaveSession(u, s) {
  s.conn.expectClose = true;
  s.conn.send({ type: 'leave' });
  s.endLo = Date.now(); s.endHi = s.endLo + 50;
  touchP(u);
}

function actStatus(u) {
  const c = pick(liveConns(u));
  if (!c) return;
  const st = pick(STATUSES);
  c.session.status = st;
  c.send({ type: 'status', status: st });
  if (chance(0.5)) {
    c.session.custom = chance(0.7) ? pick(CUSTOMS) : '';
    c.send({ type: 'custom', text: c.session.custom });
  }
  touchP(u);
  trace(`${u.id} status ${st} custom "${c.session.custom}"`);
}

const ACTIONS = [
  [10, actConnect], [7, actReload], [4, actMove], [5, actSilent], [2, actResumePaused], [3, actLeave],
  [9, actStatus], [3, actRoom],
];
const TOTAL_W = ACTIONS.reduce((a, [w]) => a + w, 0);
function pickAction() {
  let x = rnd() * TOTAL_W;
  for (const [w, f] of ACTIONS) { if ((x -= w) < 0) return f; }
  return ACTIONS[0][1];
}

// ---- chaos ----
async function killNode(n) {
  const tk = Date.now();
  n.alive = false;
  n.inc++; // every connection of the old incarnation is gone
  n.srv.child.kill('SIGKILL');
  for (const u of users.values()) {
    let only = true;
    let any = false;
    for (const s of u.sessions.values()) {
      if (aliveAt(s, tk) && s.node !== n.idx) only = false;
      if (aliveAt(s, tk) && s.node === n.idx) any = true;
      if (s.node !== n.idx || s.endLo != null) continue;
      const [lo, hi] = bounds(s);
      s.endLo = Math.min(lo, tk);
      s.endHi = hi + W < tk ? hi : tk + KILL_HI;
      s.conn = null;
    }
    if (any && only) killWatch.set(u.id, { at: tk, node: n.idx, seen: new Set() });
  }
  for (const c of [...conns]) if (c.node === n) { c.dead = true; conns.delete(c); }
  await new Promise((r) => (n.srv.child.exitCode !== null || n.srv.child.signalCode !== null ? r() : n.srv.child.once('exit', r)));
  if (SAN.test(n.srv.stderr)) violate('node-exit', '-', n.id, `sanitizer report before the kill:\n${n.srv.stderr.slice(-3000)}`);
  return tk;
}

async function chaosKill() {
  const n = pick(nodes, crnd);
  // back before its lease ran out (it sweeps its previous epoch itself) or
  // after lease + grace (a survivor sweeps it)
  const down = crnd() < 0.5 ? 500 + crnd() * 2500 : KILL_HI + 500 + crnd() * 1500;
  const tk = await killNode(n);
  note(`SIGKILL ${n.id}, restart in ${Math.round(down)} ms`);
  await sleep(down);
  if (finished) return;
  await bootNode(n);
  note(`${n.id} restarted on ${n.srv.port}`);
  await connectObserver(n);
  const rest = tk + KILL_HI + W - Date.now();
  if (rest > 0) await sleep(rest);
  for (const [id, k] of killWatch) if (k.at === tk) killWatch.delete(id);
}

async function chaosPause() {
  const ms = 2500 + crnd() * 2500; // longer than the lease and the Redis timeout
  const o = { start: Date.now(), end: Infinity, what: `SIGSTOP redis ${Math.round(ms)} ms` };
  outages.push(o);
  redisUp = false;
  redis.pause();
  note(o.what);
  await sleep(ms);
  redis.resume();
  redisUp = true;
  o.end = Date.now() + RECOVER;
  note('SIGCONT redis');
  await sleep(RECOVER);
}

async function chaosRestartRedis() {
  const down = crnd() * 1500;
  const o = { start: Date.now(), end: Infinity, what: `redis restarted empty after ${Math.round(down)} ms` };
  outages.push(o);
  redisUp = false;
  await redis.stop();
  note(`redis killed, restart in ${Math.round(down)} ms`);
  await sleep(down);
  await redis.start();
  maxVer.clear(); // the versions are gone with the data; the next ones start from Redis time
  redisUp = true;
  o.end = Date.now() + RECOVER;
  note('redis up (empty)');
  await sleep(RECOVER);
}

// A node stopped for longer than its lease but less than lease + orphan
// grace (a long GC or VM stall): the others see its lease run out, then it
// renews within the grace, so it must not be swept; its clients' sessions
// outlive it (TTL). Only no-false-offline is judged meanwhile.
async function chaosNodeStop() {
  const n = pick(nodes, crnd);
  const ms = LEASE + 200 + crnd() * 600;
  const o = { start: Date.now(), end: Infinity, what: `SIGSTOP ${n.id} ${Math.round(ms)} ms` };
  outages.push(o);
  n.frozen = true;
  n.srv.child.kill('SIGSTOP');
  note(o.what);
  await sleep(ms);
  n.srv.child.kill('SIGCONT');
  const back = Date.now();
  // what the node could not do while stopped, it does now
  for (const u of users.values()) {
    for (const s of u.sessions.values()) {
      if (s.node === n.idx && s.endLo == null && s.closedAt != null && s.closedAt + GRACE > o.start - 50) s.closedAt = back;
    }
  }
  n.frozen = false;
  o.end = back + TTL + GRACE + W;
  note(`SIGCONT ${n.id}`);
  await sleep(o.end - Date.now());
}

async function chaos(deadline) {
  await sleep(3000 + crnd() * 2000);
  let n = 0;
  // every kind once, in a seeded order, then at random
  const KINDS = { kill: chaosKill, 'redis-stop': chaosPause, 'redis-restart': chaosRestartRedis, 'node-stop': chaosNodeStop };
  let first = [chaosKill, chaosPause, chaosRestartRedis, chaosNodeStop].map((f) => [crnd(), f]).sort((a, b) => a[0] - b[0]);
  if (CHAOS) first = CHAOS.split(',').map((k) => [0, KINDS[k] || (() => { throw new Error(`--chaos: no fault ${k}`); })()]);
  while (Date.now() + 8000 * MULT < deadline && !finished) {
    const x = crnd();
    const f = n < first.length ? first[n][1] : x < 0.4 ? chaosKill : x < 0.7 ? chaosPause : x < 0.85 ? chaosRestartRedis : chaosNodeStop;
    await f();
    n++;
    // then calm for at least one heartbeat + TTL: what must converge by
    // then (rooms' digests) is judged in it
    await sleep(1000 + TTL + 500 + crnd() * 2500);
  }
  return n;
}

// ---- heartbeats and checks ----
let stopping = false;
let finished = false;
let winding = false; // the wind down: connections that open now are closed at once
function heartbeats() {
  const now = Date.now();
  for (const c of conns) {
    // a stopped node's clients keep heartbeating: the node reads them when it resumes
    const ok = c.checkable || (c.open && !c.paused && !c.dead && c.nodeLive);
    if (!ok || !c.session || c.session.conn !== c || c.session.endLo != null) continue;
    if (now - c.lastHbSent >= HB_MS && c.send({ type: 'heartbeat' })) { c.lastHbSent = now; c.session.lastHb = now; }
  }
}
function tick() {
  if (stopping) return;
  const now = Date.now();
  for (const c of obsConns.values()) if (c && c.checkable) checkPresence(c, now);
  checkConverge(now);
  for (const u of users.values()) {
    for (const [sid, s] of u.sessions) {
      if (goneAt(s, now - 2000)) {
        if (s.conn && s.paused) s.conn.kill();
        u.sessions.delete(sid);
      }
    }
  }
}

// ---- main ----
async function main() {
  console.log(`cluster-soak: seed=${SEED} seconds=${SECONDS} nodes=${N_NODES} actors=${N_ACTORS} ttl=${TTL} ` +
    `grace=${GRACE} debounce=${DEBOUNCE} lease=${LEASE} orphan-grace=${ORPHAN} slack=${SLACK}`);
  console.log(`cluster-soak: reproduce with: node tests/soak/cluster-soak.mjs --seed ${SEED} --seconds ${SECONDS}${CHAOS ? ` --chaos ${CHAOS}` : ''}`);
  redis = await startRedis();
  resp = new Resp(redis.port);
  for (const n of nodes) await bootNode(n);
  for (const n of nodes) await connectObserver(n);
  const hb = setInterval(heartbeats, 50);
  const chk = setInterval(tick, 100);
  const ver = setInterval(sampleVersions, 300);
  const rooms = setInterval(roomRead, 1000);
  const start = Date.now();
  const deadline = start + SECONDS * 1000;
  const chaosDone = chaos(deadline);
  let lastQuiet = Date.now();
  while (Date.now() < deadline) {
    step++;
    if (chance(0.08)) httpRead();
    if (Date.now() - lastQuiet > QUIET_EVERY) {
      await sleep(QUIET_MS);
      await roomRead();
      lastQuiet = Date.now();
      continue;
    }
    const u = U(pick(ACTORS));
    try { await pickAction()(u); } catch (e) { violate('harness', u.id, '-', `action threw: ${e.stack}`); }
    await sleep(20 + rnd() * 130);
  }
  const nChaos = await chaosDone;
  for (const n of nodes) if (!n.alive) { await bootNode(n); await connectObserver(n); }
  // Wind down: every actor goes away (silently or not); after TTL + grace
  // + W nobody may be shown online, by any observer or any node's reads,
  // and Redis holds no contribution of any actor.
  step++;
  winding = true;
  trace('wind down');
  for (const u of users.values()) {
    if (!u.actor) continue;
    for (const s of u.sessions.values()) {
      if (s.endLo != null || !s.conn) continue;
      if (chance(0.5) && s.conn.checkable) leaveSession(u, s);
      else { s.conn.kill(); s.closedAt = Date.now(); s.conn = null; touchP(u); }
    }
  }
  await sleep(TTL + GRACE + W + 1000);
  for (const c of obsConns.values()) {
    if (!c || !c.checkable) continue;
    for (const id of ACTORS) {
      const p = c.pview.get(id);
      count('final-observer');
      if (!p) violate('no-ghost', id, c.user, 'at the end, no presence was ever received');
      else if (p.status !== 'offline') violate('no-ghost', id, c.user, `on n${c.node.idx} after every session ended (TTL + grace), still shown ${JSON.stringify(p)}`);
    }
  }
  for (const n of nodes) {
    const r = await (await fetch(`${n.srv.url}/v1/rooms/${encodeURIComponent(ROOM)}`)).json();
    count('final-room');
    if (r.count !== 0 || r.digest !== '0000000000000000') violate('rooms-converge', '-', `http@${n.id}`, `at the end, the room reads ${JSON.stringify(r)}`);
  }
  const q = ACTORS.map((x) => `user=${encodeURIComponent(x)}`).join('&');
  for (const n of nodes) {
    const r = await fetch(`${n.srv.url}/v1/presence?${q}`);
    for (const p of (await r.json()).users) {
      count('final-http');
      if (p.status !== 'offline') violate('no-ghost', p.user, `http@${n.id}`, `at the end, read ${JSON.stringify(p)}`);
    }
  }
  try {
    const lens = await resp.run(ACTORS.map((id) => ['HLEN', userKey(id).replace(/:a$/, ':s')]), 2000);
    ACTORS.forEach((id, i) => {
      count('final-contrib');
      if (Number(lens[i]) !== 0) violate('no-stale-contribution', id, 'redis', `${lens[i]} contribution(s) left in ${userKey(id).replace(/:a$/, ':s')} after every session ended`);
    });
  } catch (e) { violate('harness', '-', 'redis', `final HLEN failed: ${e.message}`); }
  await sampleVersions();
  finished = true;
  stopping = true;
  clearInterval(hb);
  clearInterval(chk);
  clearInterval(ver);
  clearInterval(rooms);
  for (const c of [...conns]) { c.expectClose = true; c.kill(); }
  for (const n of nodes) {
    n.stopping = true;
    const { code, signal } = await n.srv.stop('SIGTERM');
    if (signal !== null || code !== 0 || SAN.test(n.srv.stderr)) {
      violate('node-exit', '-', n.id, `SIGTERM: exit code ${code} signal ${signal}\n${n.srv.stderr.slice(-3000)}`);
    }
  }
  resp.close();
  await redis.close();
  if (TRACE) {
    for (const n of nodes) {
      n.lives.forEach((srv, i) => {
        for (const l of srv.stderr.split('\n').filter((x) => / cluster| redis/.test(x))) console.log(`  ${n.id}#${i}: ${l}`);
      });
    }
  }

  const secs = ((Date.now() - T0) / 1000).toFixed(1);
  const kl = [...killLatency].sort((a, b) => a - b);
  console.log(`cluster-soak: ${step} steps, ${nChaos} faults, ${secs} s`);
  for (const l of chaosLog) console.log(`cluster-soak:   ${l}`);
  console.log(`cluster-soak: resumes: same node ${resumeStats.same} resumed, ${resumeStats.sameLate} late (new); ` +
    `across nodes ${resumeStats.across} (${resumeStats.acrossResumed} resumed, the others new sessions)`);
  if (kl.length) console.log(`cluster-soak: a killed node's users offline elsewhere after ${kl[0]}..${kl[kl.length - 1]} ms (median ${kl[kl.length >> 1]}, n=${kl.length}, bound ${KILL_HI + W})`);
  console.log(`cluster-soak: checks ${Object.entries(stats).sort().map(([k, n]) => `${k}=${n}`).join(' ')}`);
  if (failures.size === 0) { console.log(`cluster-soak: ok seed=${SEED}`); return 0; }
  console.log(`\ncluster-soak: FAILED seed=${SEED} (reproduce: node tests/soak/cluster-soak.mjs --seed ${SEED} --seconds ${SECONDS}${CHAOS ? ` --chaos ${CHAOS}` : ''})`);
  for (const [inv, f] of failures) console.log(`  ${inv}: ${f.count} failure(s); first: ${f.first[0]}`);
  return 1;
}

main().then((rc) => process.exit(rc), async (e) => {
  console.log(`cluster-soak: harness error seed=${SEED}: ${e.stack}`);
  for (const n of nodes) { try { n.srv?.child.kill('SIGKILL'); } catch { /* gone */ } }
  try { await redis?.close(); } catch { /* gone */ }
  process.exit(2);
});
