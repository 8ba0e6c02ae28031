// admin.test.mjs - the admin API across nodes (docs/cluster.md): a kick made
// on one node ends the user's sessions on every node, and a block made on
// one node hides the blocker from the blocked watcher on another node.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { adminOk } from '../integration/lib/admin.mjs';
import { stopClean, sleep } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid } from './lib/nodes.mjs';

const KEY = 'cluster-admin-key-0123456789';

test('a kick on node A ends the user\'s sessions on node B too, with its reason', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', ['--admin-api-key', KEY]);
  const b = await startNode(redis.url, 'b', ['--admin-api-key', KEY]);
  try {
    const eve = uid('eve');
    const onA = await Client.open(a, { user: eve });
    const onB = await Client.open(b, { user: eve });
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [eve] });
    await w.next((m) => m.type === 'presence' && m.presence.user === eve && m.presence.status === 'online');
    w.drainPresence(eve); // the snapshot taken before the welcome's change, if it came first
    const r = await adminOk(a, KEY, 'POST', `/v1/admin/users/${eve}/kick`, { reason: 'account suspended' });
    assert.equal(r.kicked, 1, 'the count is this node\'s sessions');
    for (const c of [onA, onB]) {
      const ended = await c.next((m) => m.type === 'session_ended', 3000);
      assert.equal(ended.reason, 'kicked');
      assert.equal(ended.message, 'account suspended');
      assert.equal((await c.closed).code, 4000);
    }
    assert.equal((await w.presenceOf(eve, 3000)).status, 'offline');
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('a block made on node A hides the blocker from the blocked watcher on node B within 1 s', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', ['--admin-api-key', KEY]);
  const b = await startNode(redis.url, 'b', ['--admin-api-key', KEY]);
  try {
    const fay = uid('fay'), gus = uid('gus');
    const f = await Client.open(a, { user: fay });
    const g = await Client.open(b, { user: gus });
    g.send({ type: 'watch', users: [fay] });
    await g.next((m) => m.type === 'presence' && m.presence.user === fay && m.presence.status === 'online');
    g.drainPresence(fay); // the snapshot taken before the welcome's change, if it came first
    await adminOk(a, KEY, 'PUT', `/v1/admin/users/${fay}/blocks/${gus}`);
    const t0 = Date.now();
    const hidden = await g.presenceOf(fay, 3000);
    assert.equal(hidden.status, 'offline');
    assert.ok(Date.now() - t0 <= 1000, `hidden after ${Date.now() - t0} ms`);
    await sleep(300);
    assert.deepEqual(g.drainPresence(fay), [], 'nothing more about the blocker');
    f.close();
    g.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});
