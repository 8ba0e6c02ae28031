// reassert.test.mjs - anti-entropy (cluster-reassert-ms, docs/cluster.md):
// what pub/sub lost, or what Redis lost without a disconnect, is repaired
// within one period. The losses are made by hand in Redis: a view changed
// without being published, and a node's contribution deleted.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid, userKey } from './lib/nodes.mjs';

test('a view that was never published, and a lost contribution, are repaired within one period', async () => {
  const redis = await startRedis();
  const args = ['--cluster-reassert-ms', '2000'];
  const a = await startNode(redis.url, 'a', args);
  const b = await startNode(redis.url, 'b', args);
  try {
    const hal = uid('hal');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [hal] });
    assert.equal((await w.presenceOf(hal)).status, 'offline');
    const h = await Client.open(a, { user: hal });
    assert.equal((await w.presenceOf(hal)).status, 'online');

    // 1. A's contribution vanishes from Redis (as if written to a Redis that
    //    then lost it): A puts it again within the period.
    const key = userKey(hal);
    const contribs = key.replace(/:a$/, ':s');
    assert.equal(redis.cli('hlen', contribs), '1');
    redis.cli('del', contribs);
    await waitUntil(() => redis.cli('hlen', contribs) === '1', 'A puts its contribution again', 5000);

    // 2. A change that reached Redis but whose publication was lost: B's
    //    watcher sees it within the period, from B's own read. (Set by hand:
    //    a larger version, status busy.)
    const v = JSON.parse(redis.cli('hget', key, 'v'));
    const lost = { ...v, s: 3, d: v.d.map((x) => (x ? 3 : 0)), ver: v.ver + 1 };
    redis.cli('hset', key, 'v', JSON.stringify(lost));
    const seen = await w.presenceOf(hal, 6000);
    assert.equal(seen.status, 'busy', 'the repaired view');
    h.close();
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});
