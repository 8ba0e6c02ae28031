// ghosts.test.mjs - readers ignore a dead node's epoch before its sweep
// (docs/cluster.md, "Node death without ghosts"): node A is killed and its
// sweep is held off (the test claims A's sweep key first, as a sweeper
// that died would have); within lease + grace A's users stay online
// everywhere, and once lease + grace has passed every reader on the other
// nodes shows them offline: HTTP reads, a new watcher's snapshot, a
// watcher that was there all along, and room reads. A's lease and user
// index are still in Redis: the sweep did not run.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid, fnv1a64, readPresence } from './lib/nodes.mjs';

const LEASE = 2000, GRACE = 3000;
const timing = ['--cluster-lease-ms', String(LEASE), '--cluster-orphan-grace-ms', String(GRACE)];

async function join(c, room, meta) {
  const ref = `j-${Math.random()}`;
  c.send({ type: 'join', room, meta, ref });
  const j = await c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === ref);
  assert.equal(j.type, 'room_joined', JSON.stringify(j));
}

const roomUsers = async (node, room) =>
  (await (await fetch(`${node.url}/v1/rooms/${room}`)).json()).members.map((m) => m.user).sort();

test('kill -9 with the sweep held off: readers on the other nodes show the users offline once lease + grace has passed', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', timing);
  const b = await startNode(redis.url, 'b', timing);
  const c = await startNode(redis.url, 'c', timing);
  try {
    const gone = uid('gone'), bob = uid('bob'), room = uid('room');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [gone] });
    await w.presenceOf(gone);
    const g = await Client.open(a, { user: gone });
    g.ws.on('error', () => {});
    g.send({ type: 'status', status: 'busy' });
    await join(g, room, { name: 'Gone' });
    const cb = await Client.open(b, { user: bob });
    await join(cb, room, { name: 'Bob' });
    await waitUntil(async () => (await readPresence(c, gone)).status === 'busy', 'busy on C');
    await waitUntil(async () => (await roomUsers(c, room)).length === 2, 'both in the room on C');
    const member = redis.cli('zrange', 'pd:app:{c}:nodes', '0', '-1').split('\n').find((m) => m.startsWith('a.'));
    assert.ok(member, 'node a has a lease');
    const index = `pd:app:{n:${fnv1a64(member)}}:u:${member}`;

    a.child.kill('SIGKILL');
    const t0 = Date.now();
    // the claim of a sweeper that died: nobody sweeps A for 10 min
    assert.equal(redis.cli('set', `pd:app:{c}:sweep:${member}`, 'test', 'NX', 'PX', '600000'), 'OK');

    // within the lease: A's users stay (the grace lets them move without an event)
    await sleep(LEASE / 2);
    assert.equal((await readPresence(c, gone)).status, 'busy', 'online within the lease');
    assert.deepEqual(w.drainPresence(gone).filter((p) => p.status === 'offline'), []);

    // past lease + grace (and a renewal): every reader shows the user offline
    await waitUntil(async () => (await readPresence(c, gone)).status === 'offline',
      'offline on C', LEASE + GRACE + 6000);
    const took = Date.now() - t0;
    assert.ok(took >= LEASE + GRACE - 500, `offline only after lease + grace (${took} ms)`);
    console.log(`a killed node's user read offline after ${took} ms, no sweep`);
    assert.equal((await readPresence(b, gone)).status, 'offline', 'offline on B');
    const off = await w.presenceOf(gone, 5000); // the watcher that was there all along
    assert.equal(off.status, 'offline');
    assert.ok(off.lastSeen, 'with a last seen');
    const w2 = await Client.open(c, { user: uid('w2') }); // a new watcher's snapshot
    w2.send({ type: 'watch', users: [gone] });
    assert.equal((await w2.presenceOf(gone)).status, 'offline');
    // each node goes by its own renewals: one may list A up to a renewal later
    for (const n of [b, c])
      await waitUntil(async () => (await roomUsers(n, room)).join() === bob, `room read on ${n === b ? 'B' : 'C'}`,
        LEASE / 5 + 1000);

    // the sweep did not run: A's lease and its user index are still there
    assert.notEqual(redis.cli('zscore', 'pd:app:{c}:nodes', member), '', 'A still has a lease entry');
    assert.equal(redis.cli('sismember', index, gone), '1', 'A\'s index still lists the user');
    await sleep(500);
    assert.deepEqual(w.drainPresence(gone), [], 'exactly one offline');
    for (const x of [w, w2, cb]) x.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await stopClean(c, assert);
    await redis.close();
  }
});
