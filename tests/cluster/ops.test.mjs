// ops.test.mjs - what a load balancer and a scraper see of a node's
// dependencies (docs/api.md): /readyz stays 200 while Redis or the
// PostgreSQL settings store is unreachable, naming each one in
// "degraded", and /metrics has presenced_dependency_up per dependency and
// the cluster's counters; a client connected through it all stays
// connected.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { startServer, stopClean, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid } from './lib/nodes.mjs';
import { readyz, metric, canControlPg, pgctl } from './lib/ops.mjs';

const up = (node, dep) => metric(node, 'presenced_dependency_up', `dependency="${dep}"`);

test('Redis stopped: /readyz 200 with degraded ["redis"], dependency_up 0; back: 1, not degraded', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  try {
    await waitUntil(async () => (await up(a, 'redis')) === 1, 'redis up');
    assert.deepEqual(await readyz(a), { status: 200, json: { status: 'ready' } });
    assert.equal(await up(a, 'store'), 1);
    const alice = uid('alice');
    const c = await Client.open(a, { user: alice });
    await waitUntil(async () => (await metric(a, 'presenced_cluster_puts_total')) >= 1, 'a put counted');
    await waitUntil(async () => (await metric(a, 'presenced_cluster_nodes_live')) === 1, 'one live node');
    for (const m of ['gets_total', 'views_received_total', 'nodes_swept_total'])
      assert.equal(typeof await metric(a, `presenced_cluster_${m}`), 'number', m);

    await redis.stop();
    await waitUntil(async () => (await up(a, 'redis')) === 0, 'redis down in /metrics');
    assert.deepEqual(await readyz(a), { status: 200, json: { status: 'ready', degraded: ['redis'] } });
    assert.equal(await up(a, 'store'), 1, 'the store is not Redis');

    await redis.start();
    await waitUntil(async () => (await up(a, 'redis')) === 1, 'redis up again', 15000);
    assert.deepEqual(await readyz(a), { status: 200, json: { status: 'ready' } });
    assert.equal(c.ws.readyState, 1, 'the client stayed connected through the outage');
    c.close();
  } finally {
    await stopClean(a, assert);
    await redis.close();
  }
});

test('PostgreSQL stopped: /readyz 200 with degraded ["store"], dependency_up 0; back: 1', { skip: !canControlPg && 'needs tests/cluster/run.sh' }, async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  try {
    await waitUntil(async () => (await up(a, 'redis')) === 1, 'redis up');
    assert.equal(await up(a, 'store'), 1);
    pgctl('stop');
    await waitUntil(async () => (await up(a, 'store')) === 0, 'store down in /metrics', 10000);
    assert.deepEqual(await readyz(a), { status: 200, json: { status: 'ready', degraded: ['store'] } });
    pgctl('start');
    await waitUntil(async () => (await up(a, 'store')) === 1, 'store up again', 10000);
    assert.deepEqual(await readyz(a), { status: 200, json: { status: 'ready' } });
  } finally {
    pgctl('start'); // the rest of the suite needs it
    await stopClean(a, assert);
    await redis.close();
  }
});

test('a single node (no redis): /readyz as before, a store gauge, no redis gauge nor cluster counters', async () => {
  const s = await startServer();
  try {
    // "listening" is logged as the listener opens; ready follows once every
    // worker runs (503 "starting" until then)
    await waitUntil(async () => (await readyz(s)).status === 200, 'ready', 5000);
    assert.deepEqual(await readyz(s), { status: 200, json: { status: 'ready' } });
    assert.equal(await up(s, 'store'), 1);
    assert.equal(await up(s, 'redis'), undefined);
    assert.equal(await metric(s, 'presenced_cluster_puts_total'), undefined);
  } finally {
    await stopClean(s, assert);
  }
});
