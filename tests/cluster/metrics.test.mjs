// metrics.test.mjs - the half of tests/integration/metrics.test.mjs that
// needs Redis: on a node with `redis` set (and the PostgreSQL settings
// store), after a client connected, watched and changed its privacy,
// presenced_redis_seconds counted the node's commands and the store's
// PostgreSQL round trips, every histogram is well formed, and the metrics
// served and the ones docs/api.md documents are the same set, the ones
// "with `redis` set" included.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, waitUntil } from '../integration/lib/server.mjs';
import { scrape, checkHistograms, servedNames, documentedMetrics } from '../integration/lib/metrics.mjs';
import { startRedis, startNode, uid } from './lib/nodes.mjs';

test('with redis: Redis round trips counted; served and documented metrics are the same set', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const open = [];
  try {
    const alice = uid('alice');
    const bob = uid('bob');
    const b = await Client.open(a, { user: bob });
    open.push(b);
    b.send({ type: 'watch', users: [alice], ref: 'w' });
    await b.next((m) => m.type === 'ack' && m.ref === 'w');
    const c = await Client.open(a, { user: alice });
    open.push(c);
    c.send({ type: 'privacy', lastSeen: 'contacts', ref: 'p' });
    await c.next((m) => m.type === 'ack' && m.ref === 'p');

    let m;
    let counts;
    await waitUntil(async () => {
      m = await scrape(a);
      counts = checkHistograms(assert, m);
      return counts.get('presenced_redis_seconds{}') > 0 && counts.get('presenced_store_seconds{op="set_privacy"}') > 0;
    }, 'Redis and PostgreSQL round trips counted', 10000);
    // Round trips to a local Redis: all of them well under the top bound.
    const le = (v) => m.samples.find((s) => s.name === 'presenced_redis_seconds_bucket' && s.labels.le === v).value;
    assert.equal(le('2.5'), counts.get('presenced_redis_seconds{}'));

    const served = servedNames(m);
    const docs = documentedMetrics();
    const undocumented = [...served].filter((name) => !docs.has(name));
    assert.deepEqual(undocumented, [], `served but not in docs/api.md: ${undocumented}`);
    const missing = [...docs.keys()].filter((name) => !served.has(name));
    assert.deepEqual(missing, [], `documented but not served with redis set: ${missing}`);
    for (const [name, d] of docs) assert.equal(d.type, m.types.get(name), `${name}: documented type`);
  } finally {
    for (const c of open) c.ws.close();
    await stopClean(a, assert);
    await redis.close();
  }
});
