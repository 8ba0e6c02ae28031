// nodes.mjs - the pieces of a multi-node test: real redis-server processes
// on free loopback ports (one per shard, or a 3-master Cluster), and
// presenced nodes that share them and the suite's PostgreSQL
// ($PRESENCED_TEST_PG, started by tests/cluster/run.sh).
import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep } from '../../integration/lib/server.mjs';

export const PG = process.env.PRESENCED_TEST_PG;

async function freePort() {
  for (let i = 0; i < 50; i++) {
    const p = 20000 + Math.floor(Math.random() * 12000);
    const ok = await new Promise((res) => {
      const s = net.createServer().once('error', () => res(false)).listen(p, '127.0.0.1', () => s.close(() => res(true)));
    });
    // a Cluster node also binds port + 10000 (its bus)
    const bus = ok && await new Promise((res) => {
      const s = net.createServer().once('error', () => res(false)).listen(p + 10000, '127.0.0.1', () => s.close(() => res(true)));
    });
    if (ok && bus) return p;
  }
  throw new Error('no free port');
}

export function redisCli(port, ...args) {
  return execFileSync('redis-cli', ['-p', String(port), ...args.map(String)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
}

// One redis-server process; stop() kills it, restart() starts it again on
// the same port (empty: no persistence), pause()/resume() SIGSTOP/SIGCONT.
export async function startRedis(extra = []) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-redis-'));
  const r = { port, dir, url: `redis://127.0.0.1:${port}`, child: null };
  r.start = async () => {
    r.child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '',
      '--appendonly', 'no', '--dir', dir, ...extra], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      try { if (redisCli(port, 'ping') === 'PONG') return; } catch { /* not yet */ }
      await sleep(50);
    }
    throw new Error(`redis on ${port} did not start`);
  };
  r.stop = async () => {
    if (!r.child || r.child.exitCode !== null || r.child.signalCode !== null) return;
    r.child.kill('SIGKILL');
    await once(r.child, 'exit');
  };
  r.restart = async () => { await r.stop(); await r.start(); };
  r.pause = () => r.child.kill('SIGSTOP');
  r.resume = () => r.child.kill('SIGCONT');
  r.cli = (...a) => redisCli(port, ...a);
  r.close = async () => { if (r.child) r.child.kill('SIGCONT'); await r.stop(); fs.rmSync(dir, { recursive: true, force: true }); };
  await r.start();
  return r;
}

// A 3-master Redis Cluster on loopback (stack.md §6.1, on free ports).
export async function startRedisCluster() {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-rc-'));
    nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', path.join(d, 'nodes.conf'),
      '--cluster-node-timeout', '5000']));
  }
  execFileSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    if (nodes.every((n) => /cluster_state:ok/.test(n.cli('cluster', 'info')))) break;
    await sleep(50);
  }
  return {
    nodes,
    url: `redis-cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    close: async () => { for (const n of nodes) await n.close(); },
  };
}

// A presenced node of the cluster on `redis` (a URL).
export async function startNode(redis, id, args = []) {
  if (!PG) throw new Error('PRESENCED_TEST_PG is not set: run tests/cluster/run.sh');
  return startServer(['--redis', redis, '--node-id', id, '--store', PG, '--workers', '2',
    '--cluster-lease-ms', '5000', '--cluster-orphan-grace-ms', '10000', ...args]);
}

// One Redis and two nodes 'a' and 'b' started with args, for fn(a, b,
// redis); then every node that fn did not kill is stopped cleanly (exit
// 0, no sanitizer report) and Redis goes.
export async function withTwoNodes(args, fn) {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', args);
  const b = await startNode(redis.url, 'b', args);
  try {
    await fn(a, b, redis);
  } finally {
    for (const n of [a, b]) if (n.child.exitCode === null && n.child.signalCode === null) await stopClean(n, assert);
    await redis.close();
  }
}

// A user id no other test (or earlier run against the same database) used.
let seq = 0;
export function uid(name) { return `${name}-${process.pid}-${Date.now().toString(36)}-${seq++}`; }

// The Redis key of a user's global view (docs/cluster.md): the hash tag is
// 16 hex digits of FNV-1a-64 of the id.
export function fnv1a64(s) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(s)) { h ^= BigInt(b); h = (h * 0x100000001b3n) & 0xffffffffffffffffn; }
  return h.toString(16).padStart(16, '0');
}
export function userKey(user, app = 'app') { return `pd:${app}:{u:${fnv1a64(user)}}:a`; }

// GET /v1/presence of one user on node: the user object and how long the
// answer took (ms).
export async function readPresence(node, user) {
  const t0 = Date.now();
  const r = await fetch(`${node.url}/v1/presence?user=${encodeURIComponent(user)}`, { signal: AbortSignal.timeout(10000) });
  const u = (await r.json()).users[0];
  return { ...u, took: Date.now() - t0 };
}

// Whether a presence object says offline (the statuses a watcher sees).
export const isOffline = (p) => p.status === 'offline';

// The watch-bucket channel of a user (docs/cluster.md):
// pd:<app>:{w:<FNV-1a-64(uid) mod 1024>}.
export function bucketChannel(user, app = 'app') {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(user)) { h ^= BigInt(b); h = (h * 0x100000001b3n) & 0xffffffffffffffffn; }
  return `pd:${app}:{w:${h % 1024n}}`;
}
