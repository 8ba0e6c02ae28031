// admin-nodes.test.mjs - GET /v1/admin/nodes across nodes (docs/api.md):
// each node lists itself first (self, its node id and this start's epoch),
// then every other live node with the summary it put in Redis (counts,
// health); a stopped node drops out of the list once its lease and summary
// are gone. The admin page draws its nodes panel from this answer.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { adminOk } from '../integration/lib/admin.mjs';
import { stopClean, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid } from './lib/nodes.mjs';

const KEY = 'cluster-nodes-key-0123456789';
const nodesOf = async (n) => (await adminOk(n, KEY, 'GET', '/v1/admin/nodes')).nodes;

test('every live node is listed with its id, epoch, counts and health; a stopped one drops out', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', ['--admin-api-key', KEY, '--cluster-lease-ms', '1500']);
  const b = await startNode(redis.url, 'b', ['--admin-api-key', KEY, '--cluster-lease-ms', '1500']);
  const clients = [];
  try {
    clients.push(await Client.open(b, { user: uid('u1') }), await Client.open(b, { user: uid('u2'), device: 'mobile' }));
    clients.push(await Client.open(a, { user: uid('u3') }));
    // b's summary reaches Redis within a second of its counts changing.
    await waitUntil(async () => (await nodesOf(a)).find((n) => n.node === 'b')?.sessions === 2, 'b listed on a with 2 sessions', 8000);
    const onA = await nodesOf(a);
    assert.deepEqual(onA.map((n) => [n.node, n.self]), [['a', true], ['b', false]]);
    const [selfA, otherB] = onA;
    assert.match(selfA.epoch, /^[0-9a-f]+$/);
    assert.match(otherB.epoch, /^[0-9a-f]+$/);
    assert.notEqual(selfA.epoch, otherB.epoch);
    assert.deepEqual([selfA.sessions, selfA.usersOnline, selfA.ready, selfA.degraded], [1, 1, true, []]);
    assert.deepEqual([otherB.sessions, otherB.usersOnline, otherB.workers, otherB.ready, otherB.degraded], [2, 2, 2, true, []]);
    assert.ok(otherB.startedAt > 0 && otherB.uptimeMs >= 0);
    // b sees the same two, itself first, with the same epochs.
    const onB = await nodesOf(b);
    assert.deepEqual(onB.map((n) => [n.node, n.epoch, n.self]), [['b', otherB.epoch, true], ['a', selfA.epoch, false]]);
    // b stops: a lists itself alone once b's lease is gone.
    for (const c of clients.splice(0, 2)) await c.close();
    await stopClean(b, assert);
    await waitUntil(async () => (await nodesOf(a)).length === 1, 'b gone from the list', 10000);
    assert.equal((await nodesOf(a))[0].node, 'a');
  } finally {
    for (const c of clients) c.ws.terminate();
    for (const n of [a, b]) if (n.child.exitCode === null && n.child.signalCode === null) await stopClean(n, assert);
    await redis.close();
  }
});
