// run-cluster.test.mjs - `make run-cluster` (scripts/run-cluster.sh) on
// other ports: three nodes answer /readyz 200, a watcher on node 2 sees a
// user who connected to node 1, members of one room on nodes 1 and 2 see
// each other, and SIGINT (Ctrl-C) stops every process it
// started (Redis, PostgreSQL, the nodes) and frees every port.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Client } from '../integration/lib/client.mjs';
import { BIN, ROOT, MULT, waitUntil } from '../integration/lib/server.mjs';
import { uid } from './lib/nodes.mjs';
import { freePort, isGone } from './lib/ops.mjs';

async function freePorts(n) {
  const out = new Set();
  while (out.size < n) out.add(await freePort());
  return [...out];
}

// Nothing listens on port: a connection is refused.
function portIsFree(port) {
  return new Promise((res) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); res(false); });
    s.once('error', () => res(true));
  });
}

test('run-cluster: three nodes ready, one presence across them, SIGINT stops everything', async () => {
  const ports = await freePorts(5);
  const nodePorts = ports.slice(0, 3);
  const [redisPort, pgPort] = ports.slice(3);
  const child = spawn(path.join(ROOT, 'scripts/run-cluster.sh'), [], {
    env: {
      ...process.env,
      PRESENCED_BIN: BIN,
      PRESENCED_CLUSTER_PORTS: nodePorts.join(' '),
      PRESENCED_CLUSTER_REDIS_PORT: String(redisPort),
      PRESENCED_CLUSTER_PG_PORT: String(pgPort),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = once(child, 'exit');
  try {
    await waitUntil(() => /Ctrl-C stops everything/.test(out) || child.exitCode !== null,
      'run-cluster to start', 90000);
    assert.equal(child.exitCode, null, `run-cluster exited:\n${out}`);
    const pids = [...out.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    assert.equal(pids.length, 5, `redis, postgresql and three node pids:\n${out}`);
    const urls = [...out.matchAll(/(http:\/\/127\.0\.0\.1:\d+)\//g)].map((m) => m[1]);
    assert.deepEqual(urls, nodePorts.map((p) => `http://127.0.0.1:${p}`));
    const runDir = /logs in (\S+);/.exec(out)[1];
    assert.ok(fs.existsSync(runDir));

    for (const u of urls) {
      const r = await fetch(`${u}/readyz`);
      assert.equal(r.status, 200, u);
      assert.deepEqual(await r.json(), { status: 'ready' }, `${u} not degraded`);
      assert.equal((await fetch(`${u}/`)).status, 200, `${u} serves the demo page`);
    }
    const node = (u) => ({ wsUrl: u.replace('http:', 'ws:') });
    const alice = uid('alice');
    const watcher = await Client.open(node(urls[1]), { user: uid('bob') });
    watcher.send({ type: 'watch', users: [alice] });
    assert.equal((await watcher.presenceOf(alice)).status, 'offline');
    const a = await Client.open(node(urls[0]), { user: alice });
    assert.equal((await watcher.presenceOf(alice)).status, 'online', 'node 2 sees node 1\'s user');
    // the demo's room is one room across the nodes: a member on node 1
    // is in the room that a member on node 2 joins (as the demo's windows)
    const lobby = uid('lobby');
    a.send({ type: 'join', room: lobby, meta: { name: 'Alice' }, ref: 'ja' });
    await a.next((m) => m.type === 'room_joined' && m.ref === 'ja');
    watcher.send({ type: 'join', room: lobby, meta: { name: 'Bob' }, ref: 'jb' });
    await watcher.next((m) => m.type === 'room_joined' && m.ref === 'jb');
    await waitUntil(() => a.seen.some((m) => m.type === 'room_delta' && m.room === lobby &&
      m.joins.some((j) => j.meta.name === 'Bob')), 'Alice on node 1 to see Bob join on node 2', 5000);
    await waitUntil(() => watcher.seen.some((m) => (m.type === 'room_snapshot' || m.type === 'room_delta') &&
      m.room === lobby && (m.members ?? m.joins).some((j) => j.meta.name === 'Alice')),
    'Bob on node 2 to see Alice', 5000);
    a.close();
    watcher.close();

    child.kill('SIGINT');
    let timer;
    const [code] = await Promise.race([exited, new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`no exit after SIGINT:\n${out}`)), 30000 * MULT);
    })]).finally(() => clearTimeout(timer));
    assert.equal(code, 0, out);
    assert.match(out, /run-cluster: stopped/);
    await waitUntil(() => pids.every(isGone), `every process gone (${pids})`, 10000);
    for (const p of ports) assert.ok(await portIsFree(p), `port ${p} free`);
    assert.ok(!fs.existsSync(runDir), 'the run directory is removed');
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  }
});
