// w7.mjs - W7, many nodes over Redis (docs/cluster.md, docs/benchmarks.md).
//
//   node bench/w7.mjs [--users N] [--seconds S] [--rate R] [--topologies a,b]
//                     [--out results.jsonl]
//
// For each topology (2 or 3 nodes on 1 Redis, 2 nodes on 2 shards, 2 nodes
// on a 3-master Redis Cluster) it starts the real servers on loopback
// (redis-server processes, one PostgreSQL for settings, presenced release
// nodes), connects N users spread over the nodes, and measures:
//   heartbeat phase  every user beats once a second for S s: Redis
//                    commands per heartbeat (leases subtracted; goal 0) and
//                    Redis CPU per 1,000 online users;
//   transition phase R custom-status changes per second on node 1's users,
//                    each watched from node 1 (same node) and from the last
//                    node (cross node): delivery p50/p99 of each, and Redis
//                    commands per transition;
//   burst phase      as many changes as can be sent at once: presence
//                    operations per second, until the last delivery.
// Then it extrapolates to 1 M users at 15 s heartbeats and 12 transitions
// per user-hour. Output: one JSON object per topology (stdout or --out) and
// a markdown table on stderr. Every loop is bounded in count and time.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
process.env.PRESENCED_BIN ||= path.join(root, 'build/release/presenced');
const require = createRequire(path.join(here, 'package.json'));
const WebSocket = require('ws');

const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(`--${k}`); return i >= 0 ? argv[i + 1] : d; };
const USERS = Number(opt('users', 2000));
const SECONDS = Number(opt('seconds', 10));
const RATE = Number(opt('rate', 200));
const BURST = Number(opt('burst', 2000));
const TOPOLOGIES = opt('topologies', '2n-1r,3n-1r,2n-2s,2n-cluster').split(',');
const OUT = opt('out', null);
const DEBOUNCE = opt('debounce-ms', '0'); // the path, not the merge window
const DEADLINE = Date.now() + 20 * 60 * 1000; // the whole run, whatever happens

function pct(a, p) {
  if (!a.length) return null;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// ---- PostgreSQL (tests/pg/cluster.sh), once ----
const pgPort = 15000 + Math.floor(Math.random() * 15000);
const pgEnv = { ...process.env, PGRUN: `/run/presenced-test/pg-w7-${process.pid}`, PGPORT: String(pgPort), PGDATABASE: 'presence_w7' };
execFileSync(path.join(root, 'tests/pg/cluster.sh'), ['up'], { env: pgEnv, stdio: 'ignore' });
process.env.PRESENCED_TEST_PG = `postgresql://postgres@127.0.0.1:${pgPort}/presence_w7`;
const { startRedis, startRedisCluster, startNode } = await import('../tests/cluster/lib/nodes.mjs');
const { sleep } = await import('../tests/integration/lib/server.mjs');
const pgDown = () => { try { execFileSync(path.join(root, 'tests/pg/cluster.sh'), ['down'], { env: pgEnv, stdio: 'ignore' }); } catch { /* gone */ } };
process.on('exit', pgDown);

// ---- Redis counters: bench/redis-stats.mjs ----
const { redisStats } = await import('./redis-stats.mjs');

// The heartbeat phase: beat() sends every user's heartbeat, once a second
// for SECONDS; Redis's counters before and after.
async function heartbeats(ports, beat) {
  const s0 = redisStats(ports);
  let rounds = 0;
  const t0 = Date.now();
  while (Date.now() - t0 < SECONDS * 1000 && Date.now() < DEADLINE) {
    beat();
    rounds++;
    await sleep(1000);
  }
  return { s0, s1: redisStats(ports), beats: rounds * USERS, hbSecs: (Date.now() - t0) / 1000 };
}

// The delivery fields of a result: the transition phase's latencies
// (steady), the burst's (burst) and its duration.
function deliveries(steady, burst, burstSecs) {
  return {
    same_p50_ms: pct(steady.same, 50), same_p99_ms: pct(steady.same, 99),
    cross_p50_ms: pct(steady.cross, 50), cross_p99_ms: pct(steady.cross, 99),
    burst_cross_p99_ms: pct(burst.cross, 99),
    burst_ops: BURST, burst_ops_per_s: BURST / burstSecs,
    delivered_same: steady.same.length, delivered_cross: steady.cross.length,
  };
}

// ---- clients ----
function open(node, user) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${node.wsUrl}/v1/ws?user=${encodeURIComponent(user)}`);
    const t = setTimeout(() => reject(new Error('connect timeout')), 10000);
    ws.on('message', (d) => {
      const m = JSON.parse(d);
      if (m.type === 'welcome') { clearTimeout(t); resolve(ws); }
      ws.onmsg?.(m);
    });
    ws.on('error', reject);
  });
}

async function run(topo) {
  const nn = topo.startsWith('3n') ? 3 : 2;
  let redis, url, ports;
  if (topo.endsWith('cluster')) {
    redis = await startRedisCluster(); url = redis.url; ports = redis.nodes.map((n) => n.port);
  } else if (topo.endsWith('2s')) {
    const a = await startRedis(), b = await startRedis();
    redis = { close: async () => { await a.close(); await b.close(); } };
    url = `${a.url},${b.url}`; ports = [a.port, b.port];
  } else {
    const a = await startRedis(); redis = a; url = a.url; ports = [a.port];
  }
  const nodes = [];
  for (let i = 0; i < nn; i++) {
    nodes.push(await startNode(url, `w7n${i}`, ['--heartbeat-min-ms', '1000',
      '--heartbeat-interval-ms', '2000', '--presence-debounce-ms', DEBOUNCE, '--session-ttl-ms', '300000', '--max-connections', '19000',
      '--max-connections-per-address', '0', '--max-pending-per-address', '0', '--query-rate', '100000',
      '--query-burst', '100000', '--observer-query-rate', '0', '--msg-rate-status', '1000']));
  }
  const tag = `${topo}-${Date.now().toString(36)}`;
  const sPre = redisStats(ports);
  const users = [];
  for (let i = 0; i < USERS; i++) users.push({ id: `u${i}-${tag}`, node: nodes[i % nn] });
  for (let i = 0; i < USERS; i += 200) {
    await Promise.all(users.slice(i, i + 200).map(async (u) => { u.ws = await open(u.node, u.id); }));
  }
  await sleep(1500); // the last transitions settle

  const { s0, s1, beats, hbSecs } = await heartbeats(ports, () => {
    for (const u of users) u.ws.send('{"type":"heartbeat"}');
  });
  const leases = nn * hbSecs; // one renewal per node per second
  const hbCmds = Math.max(0, s1.cmds - s0.cmds - leases);

  // transition phase: the changed users are node 1's; one watcher per node
  const subjects = users.filter((u) => u.node === nodes[0]).slice(0, 100);
  const watchers = [];
  const sendAt = new Map();
  const lat = { same: [], cross: [] };
  for (const [k, n] of [['same', nodes[0]], ['cross', nodes[nn - 1]]]) {
    const w = await open(n, `watcher-${k}-${tag}`);
    w.onmsg = (m) => {
      const text = m.type === 'presence' && m.presence.custom && m.presence.custom.text;
      if (text && sendAt.has(text)) lat[k].push(Date.now() - sendAt.get(text));
    };
    w.send(JSON.stringify({ type: 'watch', users: subjects.map((u) => u.id) }));
    watchers.push(w);
  }
  await sleep(1500);
  const s2 = redisStats(ports);
  let sent = 0;
  const t2 = Date.now();
  while (Date.now() - t2 < SECONDS * 1000 && Date.now() < DEADLINE) {
    const per = Math.max(1, Math.round(RATE / 100));
    for (let j = 0; j < per; j++) {
      const u = subjects[sent % subjects.length];
      const text = `t${sent}`;
      sendAt.set(text, Date.now());
      u.ws.send(JSON.stringify({ type: 'custom', text }));
      sent++;
    }
    await sleep(10);
  }
  await sleep(1000);
  const s3 = redisStats(ports);
  const trCmds = s3.cmds - s2.cmds - nn * ((Date.now() - t2) / 1000);
  const trAll = s3.all - s2.all;

  // burst phase: BURST changes at once, until the cross-node watcher has the last
  const steady = { same: [...lat.same], cross: [...lat.cross] }; // the transition phase's
  lat.same.length = 0; lat.cross.length = 0;
  const t4 = Date.now();
  for (let i = 0; i < BURST; i++) {
    const u = subjects[i % subjects.length];
    const text = `b${i}`;
    sendAt.set(text, Date.now());
    u.ws.send(JSON.stringify({ type: 'custom', text }));
  }
  const last = new Set(subjects.map((_, j) => `b${BURST - subjects.length + j}`));
  const seenLast = () => lat.cross.length > 0 && [...last].every((t) => !sendAt.has(t) || watchers[1].gotLast?.has(t));
  watchers[1].gotLast = new Set();
  const prev = watchers[1].onmsg;
  watchers[1].onmsg = (m) => { prev(m); const t = m.presence?.custom?.text; if (last.has(t)) watchers[1].gotLast.add(t); };
  while (!seenLast() && Date.now() - t4 < 30000) await sleep(5);
  const burstSecs = (Date.now() - t4) / 1000;

  const res = {
    workload: 'w7', topology: topo, nodes: nn, users: USERS,
    heartbeats: beats, redis_cmds_per_heartbeat: hbCmds / beats,
    redis_cpu_ms_per_s_per_1k_users: ((s1.cpu - s0.cpu) * 1000) / hbSecs / (USERS / 1000),
    redis_bytes_per_user: (s1.mem - sPre.mem) / USERS,
    transitions: sent, redis_cmds_per_transition: trCmds / sent,
    redis_cmds_in_scripts_per_transition: (trAll - trCmds) / sent,
    ...deliveries(steady, lat, burstSecs),
  };
  for (const u of users) u.ws.terminate();
  for (const w of watchers) w.terminate();
  for (const n of nodes) await n.stop('SIGKILL');
  await redis.close();
  return res;
}

// ---- the Socket.IO peer on @socket.io/redis-adapter, two processes ----
const { io: sioConnect } = require('socket.io-client');

function startPeer(redisUrl) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(here, 'peers/socketio-presence.mjs'), '--port', '0',
      '--redis', redisUrl, '--ttl-ms', '300000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const t = setTimeout(() => reject(new Error('peer did not start')), 10000);
    child.stdout.on('data', (d) => {
      const m = /listening on (\d+)/.exec(String(d));
      if (m) { clearTimeout(t); resolve({ child, port: Number(m[1]) }); }
    });
  });
}

function sioOpen(peer, user) {
  return new Promise((resolve, reject) => {
    const s = sioConnect(`http://127.0.0.1:${peer.port}`, { transports: ['websocket'], auth: { user }, reconnection: false });
    const t = setTimeout(() => reject(new Error('sio connect timeout')), 10000);
    s.on('connect', () => { clearTimeout(t); resolve(s); });
    s.on('connect_error', reject);
  });
}

async function runSio() {
  const redis = await startRedis();
  const peers = [await startPeer(redis.url), await startPeer(redis.url)];
  const tag = Date.now().toString(36);
  const sPre = redisStats([redis.port]);
  const users = [];
  for (let i = 0; i < USERS; i++) users.push({ id: `u${i}-${tag}`, peer: peers[i % 2] });
  for (let i = 0; i < USERS; i += 200) {
    await Promise.all(users.slice(i, i + 200).map(async (u) => { u.s = await sioOpen(u.peer, u.id); }));
  }
  await sleep(1000);
  const { s0, s1, beats, hbSecs } = await heartbeats([redis.port], () => {
    for (const u of users) u.s.emit('heartbeat');
  });
  // each subject is the only member of its own room; a watcher on each peer joins them all
  const subjects = users.filter((u) => u.peer === peers[0]).slice(0, 100);
  for (const u of subjects) await new Promise((r) => u.s.emit('join', `r-${u.id}`, r));
  const lat = { same: [], cross: [] };
  const watchers = [];
  for (const [k, p] of [['same', peers[0]], ['cross', peers[1]]]) {
    const w = await sioOpen(p, `watcher-${k}-${tag}`);
    for (const u of subjects) await new Promise((r) => w.emit('join', `r-${u.id}`, r));
    w.on('presence', (m) => { if (m.id) lat[k].push(Date.now() - m.t); });
    watchers.push(w);
  }
  await sleep(1000);
  const s2 = redisStats([redis.port]);
  let sent = 0;
  const t2 = Date.now();
  while (Date.now() - t2 < SECONDS * 1000 && Date.now() < DEADLINE) {
    const per = Math.max(1, Math.round(RATE / 100));
    for (let j = 0; j < per; j++) {
      const u = subjects[sent % subjects.length];
      u.st = u.st === 'busy' ? 'online' : 'busy';
      u.s.emit('status', { status: u.st, t: Date.now(), id: `t${sent}` });
      sent++;
    }
    await sleep(10);
  }
  await sleep(1000);
  const s3 = redisStats([redis.port]);
  const steady = { same: [...lat.same], cross: [...lat.cross] }; // the transition phase's
  lat.same.length = 0; lat.cross.length = 0;
  const t4 = Date.now();
  for (let i = 0; i < BURST; i++) {
    const u = subjects[i % subjects.length];
    u.st = u.st === 'busy' ? 'online' : 'busy';
    u.s.emit('status', { status: u.st, t: Date.now(), id: `b${i}` });
  }
  while (lat.cross.length < BURST && Date.now() - t4 < 30000) await sleep(5);
  const burstSecs = (Date.now() - t4) / 1000;
  const res = {
    workload: 'w7', topology: 'socket.io-2p-1r', nodes: 2, users: USERS,
    heartbeats: beats, redis_cmds_per_heartbeat: Math.max(0, s1.cmds - s0.cmds) / beats,
    redis_cpu_ms_per_s_per_1k_users: ((s1.cpu - s0.cpu) * 1000) / hbSecs / (USERS / 1000),
    redis_bytes_per_user: Math.max(0, s1.mem - sPre.mem) / USERS, // it keeps no state in Redis
    transitions: sent, redis_cmds_per_transition: (s3.cmds - s2.cmds) / sent,
    redis_cmds_in_scripts_per_transition: 0,
    ...deliveries(steady, lat, burstSecs),
  };
  for (const u of users) u.s.disconnect();
  for (const w of watchers) w.disconnect();
  for (const p of peers) p.child.kill('SIGKILL');
  await redis.close();
  return res;
}

// Extrapolation to 1 M users (docs/cluster.md's capacity math).
function extrapolate(r) {
  const transitions = (1e6 * 12) / 3600; // per second
  const nodes = 20;
  return {
    cmds_per_s: nodes + transitions * r.redis_cmds_per_transition + (1e6 / 15) * r.redis_cmds_per_heartbeat,
    memory_gb: (r.redis_bytes_per_user * 1e6) / 1e9,
  };
}

const rows = [];
for (const t of TOPOLOGIES) {
  if (Date.now() > DEADLINE) break;
  const r = t === 'socket.io' ? await runSio() : await run(t);
  r.extrapolated_1m = extrapolate(r);
  rows.push(r);
  const line = JSON.stringify(r);
  if (OUT) fs.appendFileSync(OUT, line + '\n'); else console.log(line);
}
const f = (v, d = 1) => (v === null || v === undefined ? '–' : Number(v).toFixed(d));
console.error('| topology | cmds/heartbeat | cmds/transition | same p50/p99 ms | cross p50/p99 ms | ops/s (burst) | Redis CPU ms/s per 1k users | 1 M users: cmds/s, GB |');
console.error('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.error(`| ${r.topology} | ${f(r.redis_cmds_per_heartbeat, 3)} | ${f(r.redis_cmds_per_transition, 2)} | ${f(r.same_p50_ms)} / ${f(r.same_p99_ms)} | ${f(r.cross_p50_ms)} / ${f(r.cross_p99_ms)} | ${f(r.burst_ops_per_s, 0)} | ${f(r.redis_cpu_ms_per_s_per_1k_users, 2)} | ${f(r.extrapolated_1m.cmds_per_s, 0)}, ${f(r.extrapolated_1m.memory_gb, 2)} |`);
}
pgDown();
// Loss, never speed, fails the run: every topology must deliver on both sides.
const lost = rows.filter((r) => !r.delivered_same || !r.delivered_cross);
for (const r of lost) console.error(`w7: ${r.topology}: nothing delivered (same ${r.delivered_same}, cross ${r.delivered_cross})`);
process.exit(lost.length ? 1 : 0);
