// w9.mjs - W9, restarts and deploys (docs/benchmarks.md, issue "running
// presenced in production").
//
//   node bench/w9.mjs [--clients N] [--watchers W] [--watch K]
//                     [--window-ms MS] [--grace-ms MS] [--procs P]
//                     [--scenarios single,rolling] [--out results.jsonl]
//
// N native clients (default 20,000) are spread over P client processes
// (each below the 20,000 open files of one process, each from its own
// 127.0.0.x source address). They behave as the JavaScript SDK does: on
// the server's {"type":"reconnect","afterMs":n} they wait n plus the SDK's
// jitter, then reconnect with ?resume=<sessionId>; a refused connect is
// retried with the SDK's own backoff (clients/js/backoff.js). W of them
// are watchers, each watching K of the others, and re-watch after every
// reconnect, as an application does.
//
//   single   one presenced (SQLite settings) is stopped with SIGTERM (a
//            drain over --window-ms, then the clean stop) and started
//            again on the same port and store. One process holds every
//            socket, so N is capped at 19,000 here.
//   rolling  three nodes on one Redis (PostgreSQL settings): each in turn
//            drained and restarted, its clients moving to the others.
//
// Measured: flaps (a watched user shown offline, by an event or by a
// re-watch snapshot: every client comes back, so each one is a flap; goal
// 0), the reconnect rate per second from the drain on (peak and mean over
// the seconds that had reconnects; goal: peak <= 2x mean), the time from
// the drain until every client is connected again and every watcher sees
// every watched user online (full re-sync), and Redis commands per second.
// Output: one JSON object per scenario (stdout or --out) and a markdown
// table on stderr. Every loop is bounded in count and time.
import { execFileSync, fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { createBackoff } from '../clients/js/backoff.js';
import { redisStats } from './redis-stats.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(`--${k}`); return i >= 0 ? argv[i + 1] : d; };

if (argv[0] === '--client') await clientProcess();
else await main();

// ---------------------------------------------------------------- clients
// One client process: its share of the clients, driven by the parent's
// messages ({cmd:'start', ...}, {cmd:'rewatch'}, {cmd:'stop'}); it reports
// {ev:'status', ...} every 250 ms.
async function clientProcess() {
  const require = createRequire(path.join(here, 'package.json'));
  const WebSocket = require('ws');
  const st = { codes: {}, connected: 0, flaps: 0, unknown: 0, resumed: 0, fresh: 0, refused: 0, synced: 0, watchers: 0, recon: [], hb: null };
  let cfg = null;
  let clients = [];
  let t0 = 0; // the parent's drain start, for the reconnect times

  function connect(c) {
    if (c.stopped) return;
    const url = cfg.urls[c.node];
    const q = `user=${encodeURIComponent(c.user)}&device=web${c.sid ? `&resume=${c.sid}` : ''}`;
    const ws = new WebSocket(`${url}/v1/ws?${q}`, { localAddress: cfg.src, perMessageDeflate: false });
    c.ws = ws;
    c.open = false;
    ws.on('message', (d) => onMessage(c, JSON.parse(d)));
    ws.on('error', () => {});
    ws.on('close', (code) => onClose(c, ws, code));
  }

  function onMessage(c, m) {
    if (m.type === 'welcome') {
      c.open = true;
      st.connected++;
      c.backoff.reset();
      if (c.sid) { if (m.resumed) st.resumed++; else st.fresh++; }
      if (t0 && c.sid) st.recon.push(Date.now() - t0);
      c.sid = m.sessionId;
      if (c.watch) { c.view = new Map(); c.ws.send(JSON.stringify({ type: 'watch', users: c.watch })); }
    } else if (m.type === 'presence' && c.watch) {
      see(c, m.presence);
    } else if (m.type === 'presence_list' && c.watch) {
      for (const p of m.presence) see(c, p);
    } else if (m.type === 'reconnect') {
      const after = Number.isFinite(m.afterMs) && m.afterMs > 0 ? m.afterMs : 0;
      const jitter = Math.random() * Math.min(250, 50 + after / 20); // the SDK's
      c.drainAt = Date.now() + after + jitter;
      c.moveTo = (c.node + 1 + Math.floor(Math.random() * (cfg.urls.length - 1))) % cfg.urls.length;
      const ws0 = c.ws; // this socket, not a later one
      setTimeout(() => { if (ws0.readyState === WebSocket.OPEN) ws0.close(1000); }, after + jitter);
    }
  }

  // A watched user's presence: offline is a flap (they all come back);
  // unknown is counted apart (a degraded read, not a flap).
  function see(c, p) {
    if (p.status === 'offline') st.flaps++;
    if (p.status === 'unknown') st.unknown++;
    c.view.set(p.user, p.status);
  }

  function onClose(c, ws, code) {
    if (c.ws !== ws) return;
    if (c.open && t0) st.codes[code] = (st.codes[code] || 0) + 1;
    if (c.open) st.connected--;
    c.open = false;
    c.view = null;
    if (c.stopped) return;
    let delay;
    if (c.drainAt) {
      delay = Math.max(0, c.drainAt - Date.now());
      c.drainAt = 0;
      if (cfg.urls.length > 1) c.node = c.moveTo; // another node of the cluster
    } else {
      st.refused++;
      delay = c.backoff.next();
      if (cfg.urls.length > 1) c.node = (c.node + 1) % cfg.urls.length;
    }
    setTimeout(() => connect(c), delay);
  }

  function synced() {
    let n = 0;
    for (const c of clients) {
      if (!c.watch || !c.open || !c.view || c.view.size < c.watch.length) continue;
      let ok = true;
      for (const s of c.view.values()) if (s === 'offline' || s === 'unknown') { ok = false; break; }
      if (ok) n++;
    }
    return n;
  }

  process.on('message', async (msg) => {
    if (msg.cmd === 'start') {
      cfg = msg;
      clients = msg.users.map((u, i) => ({ user: u, node: (msg.first + i) % msg.urls.length, sid: null, backoff: createBackoff(), watch: msg.watch[i] || null }));
      st.watchers = clients.filter((c) => c.watch).length;
      for (let i = 0; i < clients.length; i += 100) {
        for (const c of clients.slice(i, i + 100)) connect(c);
        await sleep(20);
      }
      st.hb = setInterval(() => { for (const c of clients) if (c.open) c.ws.send('{"type":"heartbeat"}'); }, msg.heartbeatMs);
    } else if (msg.cmd === 'mark') {
      t0 = msg.t0;
      st.codes = {};
      st.recon = [];
      st.flaps = 0; st.unknown = 0; st.resumed = 0; st.fresh = 0; st.refused = 0;
    } else if (msg.cmd === 'stop') {
      clearInterval(st.hb);
      for (const c of clients) { c.stopped = true; if (c.ws) c.ws.terminate(); }
      process.exit(0);
    }
  });
  setInterval(() => {
    process.send({ ev: 'status', codes: st.codes, connected: st.connected, flaps: st.flaps, unknown: st.unknown, resumed: st.resumed, fresh: st.fresh, refused: st.refused, synced: synced(), watchers: st.watchers, recon: st.recon.splice(0) });
  }, 250);
}

// ---------------------------------------------------------------- parent
async function main() {
  const CLIENTS = Number(opt('clients', 20000));
  const WATCHERS = Number(opt('watchers', 100));
  const WATCH = Number(opt('watch', 200));
  const WINDOW = Number(opt('window-ms', 5000));
  const GRACE = Number(opt('grace-ms', 30000));
  const PROCS = Number(opt('procs', 4));
  const SCENARIOS = opt('scenarios', 'single,rolling').split(',');
  const OUT = opt('out', null);
  const DEADLINE = Date.now() + 20 * 60 * 1000;
  const BIN = process.env.PRESENCED_BIN || path.join(root, 'build/release/presenced');
  const common = ['--drain-window-ms', String(WINDOW), '--reconnect-grace-ms', String(GRACE), '--log-level', 'info',
    '--max-connections', '19900', '--max-connections-per-address', '0', '--max-pending-per-address', '0',
    '--static-dir=', '--sdk-dir=', '--max-watch', String(Math.max(1000, WATCH))];

  // The client processes and what they last reported.
  function startClients(n, urls) {
    const tag = Date.now().toString(36);
    const users = Array.from({ length: n }, (_, i) => `w9-${tag}-${i}`);
    const procs = [];
    const per = Math.ceil(n / PROCS);
    for (let p = 0; p < PROCS; p++) {
      const mine = users.slice(p * per, (p + 1) * per);
      const watch = mine.map((_, i) => {
        if (p * per + i >= WATCHERS) return null;
        const w = [];
        for (let k = 0; k < WATCH; k++) w.push(users[(p * per + i + 1 + k * 97) % n]);
        return w;
      });
      const child = fork(fileURLToPath(import.meta.url), ['--client'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const rec = { child, last: null, recon: [] };
      child.on('message', (m) => { rec.last = m; rec.recon.push(...m.recon); });
      child.send({ cmd: 'start', users: mine, watch, urls, first: p, src: `127.0.0.${10 + p}`, heartbeatMs: 15000 });
      procs.push(rec);
    }
    const sum = (k) => procs.reduce((a, r) => a + (r.last ? r.last[k] : 0), 0);
    return {
      procs, n, sum,
      mark(t0) { for (const r of procs) { r.recon = []; r.child.send({ cmd: 'mark', t0 }); } },
      recon() { return procs.flatMap((r) => r.recon); },
      // the close codes of open sockets since the mark, summed
      codes() {
        const out = {};
        for (const r of procs) for (const [k, v] of Object.entries(r.last ? r.last.codes : {})) out[k] = (out[k] || 0) + v;
        return out;
      },
      // every client connected and every watcher sees everyone online
      settled() { return procs.every((r) => r.last) && sum('connected') === n && sum('synced') === sum('watchers'); },
      async stop() { for (const r of procs) { r.child.send({ cmd: 'stop' }); await once(r.child, 'exit'); } },
    };
  }

  async function until(fn, ms) {
    const t = Date.now();
    while (!fn()) {
      if (Date.now() - t > ms || Date.now() > DEADLINE) return false;
      await sleep(100);
    }
    return true;
  }

  // The reconnect rate: the peak over any sliding second, and the mean
  // over the span from the first reconnect to the last (at least the
  // window: a drain spreads them over it), both per second; per_s is the
  // count in each whole second after the drain began.
  function rate(times) {
    if (!times.length) return { reconnects: 0, peak_per_s: 0, mean_per_s: 0, first_ms: null, last_ms: null, per_s: [] };
    const t = [...times].sort((a, b) => a - b);
    let peak = 0;
    for (let i = 0, j = 0; i < t.length; i++) {
      while (t[i] - t[j] >= 1000) j++;
      peak = Math.max(peak, i - j + 1);
    }
    const span = Math.max(WINDOW, t[t.length - 1] - t[0]) / 1000;
    const per = new Map();
    for (const x of t) per.set(Math.floor(x / 1000), (per.get(Math.floor(x / 1000)) || 0) + 1);
    return { reconnects: t.length, peak_per_s: peak, mean_per_s: t.length / span, first_ms: t[0], last_ms: t[t.length - 1], per_s: [...per.entries()] };
  }

  // One drain + restart, measured from its SIGTERM (t0).
  async function restartOne(cl, stopFn, startFn, redisPorts) {
    const s0 = redisPorts ? redisStats(redisPorts) : null;
    // Redis's commands, sampled each second: the busiest second
    let prev = s0, peakCmds = 0;
    const sampler = redisPorts && setInterval(() => {
      const s = redisStats(redisPorts);
      peakCmds = Math.max(peakCmds, s.cmds - prev.cmds);
      prev = s;
    }, 1000);
    const t0 = Date.now();
    cl.mark(t0);
    await sleep(300); // the mark reaches every process before the drain
    const stopAt = Date.now();
    await stopFn();
    const exitedMs = Date.now() - stopAt;
    await startFn();
    const upMs = Date.now() - stopAt;
    const ok = await until(() => cl.settled() && Date.now() - stopAt > WINDOW, GRACE + WINDOW + 60000);
    const resyncMs = Date.now() - stopAt;
    await sleep(1000); // late reports
    if (sampler) clearInterval(sampler);
    const s1 = redisPorts ? redisStats(redisPorts) : null;
    const r = rate(cl.recon().map((t) => t - (stopAt - t0)));
    return {
      settled: ok, drain_exit_ms: exitedMs, back_up_ms: upMs, full_resync_ms: ok ? resyncMs : null,
      flaps: cl.sum('flaps'), unknown_seen: cl.sum('unknown'), resumed: cl.sum('resumed'), new_sessions: cl.sum('fresh'),
      refused_connects: cl.sum('refused'), close_codes: cl.codes(), ...r,
      peak_over_mean: r.mean_per_s ? r.peak_per_s / r.mean_per_s : null,
      redis_cmds_per_s: s0 ? (s1.cmds - s0.cmds) / ((Date.now() - t0) / 1000) : null,
      redis_cmds_peak_per_s: s0 ? peakCmds : null,
      redis_all_cmds_per_s: s0 ? (s1.all - s0.all) / ((Date.now() - t0) / 1000) : null,
    };
  }

  function spawnNode(args) {
    const child = spawn(BIN, ['--bind', '127.0.0.1', ...common, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const port = new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`presenced did not start:\n${err}`)), 20000);
      child.stderr.on('data', (d) => {
        err += d;
        const m = /listening on http:\/\/[^ ]*:(\d+) /.exec(err);
        if (m) { clearTimeout(t); resolve(Number(m[1])); }
      });
      child.on('exit', (c) => { clearTimeout(t); reject(new Error(`presenced exited ${c}:\n${err}`)); });
    });
    return { child, port, stop: async () => { child.kill('SIGTERM'); await once(child, 'exit'); } };
  }

  async function single() {
    const n = Math.min(CLIENTS, 19000);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-w9-'));
    const store = path.join(dir, 'presenced.db');
    let node = spawnNode(['--port', '0', '--store', store]);
    const port = await node.port;
    const cl = startClients(n, [`ws://127.0.0.1:${port}`]);
    try {
      if (!await until(() => cl.settled(), 120000)) throw new Error(`w9 single: clients did not settle (${cl.sum('connected')}/${n})`);
      const r = await restartOne(cl, () => node.stop(), async () => {
        node = spawnNode(['--port', String(port), '--store', store]);
        await node.port;
      });
      return { workload: 'w9', scenario: 'single', nodes: 1, clients: n, watchers: WATCHERS, watch: WATCH, window_ms: WINDOW, grace_ms: GRACE, ...r };
    } finally {
      await cl.stop();
      node.child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  async function rolling() {
    const pgPort = 15000 + Math.floor(Math.random() * 15000);
    const pgEnv = { ...process.env, PGRUN: `/run/presenced-test/pg-w9-${process.pid}`, PGPORT: String(pgPort), PGDATABASE: 'presence_w9' };
    execFileSync(path.join(root, 'tests/pg/cluster.sh'), ['up'], { env: pgEnv, stdio: 'ignore' });
    const pg = `postgresql://postgres@127.0.0.1:${pgPort}/presence_w9`;
    process.env.PRESENCED_TEST_PG = pg;
    const { startRedis } = await import('../tests/cluster/lib/nodes.mjs');
    const redis = await startRedis();
    const nodeArgs = (i, port) => ['--port', String(port), '--redis', redis.url, '--node-id', `w9n${i}`, '--store', pg, '--workers', '2'];
    const nodes = [];
    let cl = null;
    try {
      for (let i = 0; i < 3; i++) { const nd = spawnNode(nodeArgs(i, 0)); nd.p = await nd.port; nodes.push(nd); }
      cl = startClients(CLIENTS, nodes.map((nd) => `ws://127.0.0.1:${nd.p}`));
      if (!await until(() => cl.settled(), 180000)) throw new Error(`w9 rolling: clients did not settle (${cl.sum('connected')}/${CLIENTS})`);
      const steps = [];
      for (let i = 0; i < 3; i++) {
        steps.push(await restartOne(cl, () => nodes[i].stop(), async () => {
          nodes[i] = spawnNode(nodeArgs(i, nodes[i].p));
          nodes[i].p = await nodes[i].port;
        }, [redis.port]));
      }
      const sumk = (k) => steps.reduce((a, s) => a + (s[k] || 0), 0);
      const maxk = (k) => Math.max(...steps.map((s) => s[k] || 0));
      return {
        workload: 'w9', scenario: 'rolling', nodes: 3, clients: CLIENTS, watchers: WATCHERS, watch: WATCH, window_ms: WINDOW, grace_ms: GRACE,
        settled: steps.every((s) => s.settled), flaps: sumk('flaps'), unknown_seen: sumk('unknown_seen'), resumed: sumk('resumed'),
        new_sessions: sumk('new_sessions'), refused_connects: sumk('refused_connects'), reconnects: sumk('reconnects'),
        peak_per_s: maxk('peak_per_s'), mean_per_s: steps.reduce((a, s) => a + s.mean_per_s, 0) / steps.length,
        peak_over_mean: Math.max(...steps.map((s) => (s.mean_per_s ? s.peak_per_s / s.mean_per_s : 0))), // the worst step's
        full_resync_ms: steps.every((s) => s.full_resync_ms !== null) ? maxk('full_resync_ms') : null,
        redis_cmds_per_s: maxk('redis_cmds_per_s'), redis_cmds_peak_per_s: maxk('redis_cmds_peak_per_s'),
        redis_all_cmds_per_s: maxk('redis_all_cmds_per_s'), steps,
      };
    } finally {
      if (cl) await cl.stop();
      for (const nd of nodes) nd.child.kill('SIGKILL');
      await redis.close();
      try { execFileSync(path.join(root, 'tests/pg/cluster.sh'), ['down'], { env: pgEnv, stdio: 'ignore' }); } catch { /* gone */ }
    }
  }

  const rows = [];
  for (const s of SCENARIOS) {
    if (Date.now() > DEADLINE) break;
    const r = s === 'single' ? await single() : await rolling();
    rows.push(r);
    const line = JSON.stringify(r);
    if (OUT) fs.appendFileSync(OUT, line + '\n'); else console.log(line);
  }
  const f = (v, d = 0) => (v === null || v === undefined ? '–' : Number(v).toFixed(d));
  console.error('| scenario | clients | flaps | resumed / new sessions | reconnects/s peak / mean | peak/mean | full re-sync s | Redis cmds/s mean / peak |');
  console.error('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.error(`| ${r.scenario} | ${r.clients} | ${r.flaps} | ${r.resumed} / ${r.new_sessions} | ${f(r.peak_per_s)} / ${f(r.mean_per_s)} | ${f(r.peak_over_mean, 2)} | ${f(r.full_resync_ms / 1000, 1)} | ${f(r.redis_cmds_per_s)} / ${f(r.redis_cmds_peak_per_s)} |`);
  }
  // A run that never settled is a failure; flaps and rates are results.
  const bad = rows.filter((r) => !r.settled);
  for (const r of bad) console.error(`w9: ${r.scenario}: the clients never all came back and re-synced`);
  process.exit(bad.length ? 1 : 0);
}
