// topology.test.mjs - the same presence over other Redis topologies
// (docs/cluster.md): three standalone shards (keys really spread over
// them), a 3-master Redis Cluster (cross-node watchers, a killed node, a
// slot migration during traffic), and a watcher that flips watch/unwatch
// 500 times a second (the bucket subscription ends at SHARDNUMSUB 0).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startRedisCluster, startNode, uid, userKey, readPresence, bucketChannel, redisCli } from './lib/nodes.mjs';

// A watcher on `on` sees a user on `from` go online, busy, custom, online
// and offline, in order; reads on both nodes agree at the end.
async function crossNodeTransitions(from, on) {
  const alice = uid('alice');
  const bob = await Client.open(on, { user: uid('bob') });
  bob.send({ type: 'watch', users: [alice], ref: 'w' });
  assert.equal((await bob.presenceOf(alice)).status, 'offline');
  const ca = await Client.open(from, { user: alice });
  assert.equal((await bob.presenceOf(alice)).status, 'online');
  ca.send({ type: 'status', status: 'busy' });
  assert.equal((await bob.presenceOf(alice)).status, 'busy');
  ca.send({ type: 'custom', text: 'In a meeting', emoji: ':calendar:' });
  assert.equal((await bob.presenceOf(alice)).custom.text, 'In a meeting');
  ca.send({ type: 'status', status: 'online' });
  assert.equal((await bob.presenceOf(alice)).status, 'online');
  // a read on `on` of a user nobody there watches answers the global view
  const eve = uid('eve');
  const ce = await Client.open(from, { user: eve });
  await waitUntil(async () => (await readPresence(on, eve)).status === 'online', 'eve online in a read on the other node', 3000);
  ce.close();
  ca.send({ type: 'leave' });
  assert.equal((await bob.presenceOf(alice)).status, 'offline');
  assert.equal((await readPresence(from, alice)).status, 'offline');
  assert.equal((await readPresence(on, alice)).status, 'offline');
  ca.close();
  bob.close();
}

test('three standalone shards: cross-node watchers, and the keys are spread over the three', async () => {
  const shards = [await startRedis(), await startRedis(), await startRedis()];
  const url = shards.map((s) => s.url).join(',');
  const a = await startNode(url, 'a');
  const b = await startNode(url, 'b');
  try {
    await crossNodeTransitions(a, b);
    const names = Array.from({ length: 30 }, () => uid('many'));
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: names });
    for (const n of names) await w.presenceOf(n);
    const cs = [];
    for (const n of names) cs.push(await Client.open(a, { user: n }));
    for (const n of names) {
      let p = await w.presenceOf(n);
      while (p.status !== 'online') p = await w.presenceOf(n);
    }
    const sizes = shards.map((s) => Number(s.cli('dbsize')));
    assert.ok(sizes.every((n) => n > 0), `keys per shard: ${sizes}`);
    // each user's view is on the shard its hash tag says, and only there
    const where = names.map((n) => shards.filter((s) => s.cli('exists', userKey(n)) === '1').length);
    assert.ok(where.every((k) => k === 1), `shards holding each user: ${where}`);
    console.log(`# keys per shard after 30 users: ${sizes}`);
    for (const c of cs) c.close();
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    for (const s of shards) await s.close();
  }
});

// The master of a 3-master Cluster that serves slot, with every master's id.
function slotOwner(cluster, slot) {
  const ids = cluster.nodes.map((n) => n.cli('cluster', 'myid'));
  const lines = cluster.nodes[0].cli('cluster', 'nodes').split('\n');
  for (const l of lines) {
    const f = l.split(' ');
    for (const r of f.slice(8)) {
      if (r.startsWith('[')) continue;
      const [lo, hi] = r.split('-').map(Number);
      if (slot >= lo && slot <= (hi ?? lo)) return { ids, owner: ids.indexOf(f[0]) };
    }
  }
  throw new Error(`nobody serves slot ${slot}`);
}

// Moves slot from its master to the next one, keys included
// (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE on every
// master), as redis-cli --cluster reshard does.
function migrateSlot(cluster, slot) {
  const { ids, owner } = slotOwner(cluster, slot);
  const src = cluster.nodes[owner], dstI = (owner + 1) % 3, dst = cluster.nodes[dstI];
  dst.cli('cluster', 'setslot', slot, 'importing', ids[owner]);
  src.cli('cluster', 'setslot', slot, 'migrating', ids[dstI]);
  for (let i = 0; i < 100; i++) {
    const keys = src.cli('cluster', 'getkeysinslot', slot, 100).split('\n').filter(Boolean);
    if (!keys.length) break;
    src.cli('migrate', '127.0.0.1', dst.port, '', 0, 5000, 'keys', ...keys);
  }
  for (const n of cluster.nodes) n.cli('cluster', 'setslot', slot, 'node', ids[dstI]);
  return { from: owner, to: dstI };
}

test('Redis Cluster: cross-node watchers, a slot migration during traffic loses no transition, a killed node goes offline within 17 s', async () => {
  const rc = await startRedisCluster();
  const a = await startNode(rc.url, 'a');
  const b = await startNode(rc.url, 'b');
  try {
    await crossNodeTransitions(a, b);

    const carol = uid('carol'), gone = uid('gone');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [carol, gone] });
    await w.presenceOf(carol);
    await w.presenceOf(gone);
    const cc = await Client.open(a, { user: carol });
    const cg = await Client.open(a, { user: gone });
    assert.equal((await w.presenceOf(carol)).status, 'online');
    assert.equal((await w.presenceOf(gone)).status, 'online');
    // Traffic: carol flips status every 150 ms while her bucket channel's
    // slot, then her user key's slot, move to another master.
    const statuses = ['busy', 'away', 'dnd', 'online'];
    let k = 0, last = 'online', run = true;
    const traffic = (async () => {
      while (run) {
        last = statuses[k++ % statuses.length];
        cc.send({ type: 'status', status: last });
        await sleep(150);
      }
    })();
    const chSlot = Number(rc.nodes[0].cli('cluster', 'keyslot', bucketChannel(carol)));
    const keySlot = Number(rc.nodes[0].cli('cluster', 'keyslot', userKey(carol)));
    await sleep(500);
    const m1 = migrateSlot(rc, chSlot);
    await sleep(1000);
    const m2 = migrateSlot(rc, keySlot);
    await sleep(1000);
    run = false;
    await traffic;
    // The watcher ends with carol's last status (after the resync)...
    await waitUntil(() => {
      const all = w.seen.filter((m) => m.type === 'presence' && m.presence.user === carol);
      return all[all.length - 1].presence.status === last;
    }, `the watcher to end with carol ${last}`, 5000);
    assert.equal((await readPresence(b, carol)).status, last);
    // ... and a transition after the moves is delivered.
    w.drainPresence(carol);
    const next = last === 'busy' ? 'dnd' : 'busy';
    cc.send({ type: 'status', status: next });
    let p = await w.presenceOf(carol, 3000);
    while (p.status !== next) p = await w.presenceOf(carol, 3000);
    console.log(`# moved slot ${chSlot} (bucket) ${m1.from}->${m1.to}, slot ${keySlot} (user) ${m2.from}->${m2.to}`);

    // kill -9 node A: its users go offline on B within 17 s
    cc.ws.on('error', () => {});
    cg.ws.on('error', () => {});
    const t0 = Date.now(), killed = w.seen.length;
    a.child.kill('SIGKILL');
    await waitUntil(() => w.seen.slice(killed).some((m) => m.type === 'presence' && m.presence.user === gone && m.presence.status === 'offline'),
      'gone offline on B', 20000);
    const took = Date.now() - t0;
    assert.ok(took <= 17000, `offline after ${took} ms`);
    await waitUntil(async () => (await readPresence(b, carol)).status === 'offline', 'carol offline on B', 3000);
    console.log(`# killed node's users offline after ${took} ms`);
    w.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await rc.close();
  }
});

test('500 watch/unwatch flips per second on one user: no crash, one subscription while watched, SHARDNUMSUB 0 after the linger', async () => {
  const redis = await startRedis();
  const linger = 500;
  const a = await startNode(redis.url, 'a', ['--cluster-linger-ms', String(linger)]);
  const b = await startNode(redis.url, 'b', ['--cluster-linger-ms', String(linger), '--msg-rate-watch', '0']);
  try {
    const dora = uid('dora');
    const ch = bucketChannel(dora);
    const numsub = () => Number(redisCli(redis.port, 'pubsub', 'shardnumsub', ch).split('\n')[1]);
    const cd = await Client.open(a, { user: dora });
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [dora], ref: 'w0' });
    let p = await w.presenceOf(dora);
    while (p.status !== 'online') p = await w.presenceOf(dora);
    assert.equal(numsub(), 1, 'one subscription while watched');
    // 1000 flips in 2 s: 10 unwatch+watch pairs every 20 ms
    const t0 = Date.now();
    let flips = 0;
    for (let k = 0; k < 100; k++) {
      for (let i = 0; i < 10; i++) {
        w.send({ type: 'unwatch', users: [dora] });
        w.send({ type: 'watch', users: [dora] });
        flips++;
      }
      await sleep(Math.max(0, t0 + (k + 1) * 20 - Date.now()));
    }
    const flipMs = Date.now() - t0;
    w.send({ type: 'unwatch', users: [dora] });
    w.send({ type: 'ping', ref: 'p' });
    await w.next((m) => m.type === 'pong' || (m.type === 'ack' && m.ref === 'p'), 5000).catch(() => {});
    assert.equal(b.child.exitCode, null, 'node B is alive');
    await waitUntil(() => numsub() === 0, 'SHARDNUMSUB 0 after the linger', linger + 5000);
    // The bucket still works: watch again, see a transition.
    w.drainPresence(dora);
    // (the snapshot of a user whose bucket is still subscribed must be
    // the global view, not this node's local one)
    w.send({ type: 'watch', users: [dora], ref: 'w1' });
    assert.equal((await w.presenceOf(dora)).status, 'online');
    await waitUntil(() => numsub() === 1, 'subscribed again', 3000);
    cd.send({ type: 'status', status: 'busy' });
    p = await w.presenceOf(dora);
    while (p.status !== 'busy') p = await w.presenceOf(dora);
    w.send({ type: 'unwatch', users: [dora] });
    await waitUntil(() => numsub() === 0, 'SHARDNUMSUB 0 after the last unwatch', linger + 5000);
    console.log(`# ${flips} flips in ${flipMs} ms`);
    cd.close();
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});
