// rooms.test.mjs - rooms across nodes over Redis (docs/cluster.md, "Rooms
// across nodes"): members on node A and node B of one room id are one
// room; a joiner's first snapshot already lists the other node's members;
// metadata patches, cursors and leaves cross nodes; two tabs on two nodes are one
// member; a killed node's members leave elsewhere within 17 s; a member
// who turns invisible on A is gone from B's room within 1 s; the same on a
// 3-master Redis Cluster.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startRedisCluster, startNode, uid, fnv1a64 } from './lib/nodes.mjs';
import { memberDigest } from '../../clients/js/rooms.js';

const hex = (users) => users.reduce((d, u) => d ^ memberDigest(u), 0n).toString(16).padStart(16, '0');

// Both nodes' reads of room list the same members with the same digest,
// the one the SDK computes for users.
async function sameDigest(a, b, room, users) {
  const [ia, ib] = await Promise.all([a, b].map(async (n) => (await fetch(`${n.url}/v1/rooms/${room}`)).json()));
  assert.equal(ia.digest, hex(users), `A: ${JSON.stringify(ia)}`);
  assert.equal(ib.digest, ia.digest, `B: ${JSON.stringify(ib)}`);
}

// Waits until Redis holds user as a member of room (its node's put is
// applied: about 10 ms plus a round trip after the join's answer).
async function shared(redis, room, user, ms = 3000) {
  const key = `pd:app:{r:${fnv1a64(room)}}:m`;
  const hkeys = (r) => { try { return String(r.cli('hkeys', key)); } catch { return ''; } };
  const all = () => (redis.nodes ?? [redis]).map(hkeys).join('\n');
  await waitUntil(() => all().split('\n').some((f) => f.endsWith(` ${user}`)),
    `${user} in ${key}`, ms);
}

async function join(c, room, meta) {
  const ref = `j-${room}-${Math.random()}`;
  c.send({ type: 'join', room, meta, ref });
  const j = await c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === ref);
  assert.equal(j.type, 'room_joined', JSON.stringify(j));
  return j;
}

// The room as a client's messages built it: user -> meta.
function model(c, room) {
  const m = new Map();
  for (const x of c.seen) {
    if (x.room !== room) continue;
    if (x.type === 'room_snapshot') {
      m.clear();
      for (const e of x.members) m.set(e.user, e.meta);
    } else if (x.type === 'room_delta') {
      for (const e of x.joins) m.set(e.user, e.meta);
      for (const u of x.leaves) m.delete(u);
      for (const e of x.patches) m.set(e.user, e.meta);
    }
  }
  return m;
}
const members = (c, room) => [...model(c, room).keys()].sort();
const deltas = (c, room) => c.seen.filter((x) => x.type === 'room_delta' && x.room === room);

// Ann on node A and Bob on node B in a new room, Bob seeing Ann.
async function annAndBob(redis, a, b, name) {
  const room = uid(name);
  const ann = uid('ann'), bob = uid('bob');
  const ca = await Client.open(a, { user: ann });
  await join(ca, room, { name: 'Ann' });
  await shared(redis, room, ann);
  const cb = await Client.open(b, { user: bob });
  await join(cb, room, { name: 'Bob' });
  assert.deepEqual(members(cb, room), [ann, bob].sort());
  return { room, ann, bob, ca, cb };
}

async function twoNodes(redisUrl, args = []) {
  const a = await startNode(redisUrl, 'a', args);
  const b = await startNode(redisUrl, 'b', args);
  return [a, b];
}

async function crossNodeRoom(redis) {
  const [a, b] = await twoNodes(redis.url);
  try {
    const room = uid('doc');
    const ann = uid('ann'), bob = uid('bob'), carol = uid('carol');
    const ca = await Client.open(a, { user: ann });
    await join(ca, room, { name: 'Ann' });
    await shared(redis, room, ann);
    const cb = await Client.open(b, { user: bob });
    await join(cb, room, { name: 'Bob' });
    const snap = cb.seen.find((x) => x.type === 'room_snapshot' && x.room === room);
    assert.ok(snap, 'the joiner on B gets a snapshot');
    assert.deepEqual(snap.members.map((e) => e.user).sort(), [ann, bob].sort(),
      'the first snapshot on B already lists the member on A');
    await waitUntil(() => members(ca, room).includes(bob), 'Ann on A sees Bob join on B', 3000);
    assert.equal(model(ca, room).get(bob).name, 'Bob');

    // a metadata patch on A reaches B, as a patch (no leave, no join)
    ca.send({ type: 'patch', room, meta: { typing: true }, ref: 'p' });
    await waitUntil(() => model(cb, room).get(ann)?.typing === true, 'the patch crosses', 3000);
    assert.ok(!deltas(cb, room).some((d) => d.leaves.includes(ann)), 'no leave for a patch');

    // the ephemeral lane crosses nodes: the last cursor of a burst arrives
    for (let i = 1; i <= 20; i++) ca.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: i } });
    await waitUntil(() => cb.seen.some((x) => x.type === 'ephemeral' && x.room === room &&
      x.user === ann && x.kind === 'cursor' && x.data.x === 20), 'Ann\'s last cursor on B', 3000);
    const cursors = cb.seen.filter((x) => x.type === 'ephemeral' && x.user === ann);
    assert.ok(cursors.length < 20, `coalesced by the sender's node: ${cursors.length} of 20`);

    // two tabs of carol, one on each node: one member
    const t1 = await Client.open(a, { user: carol });
    await join(t1, room, { name: 'Carol' });
    await waitUntil(() => members(cb, room).includes(carol), 'carol on A shows on B', 3000);
    const t2 = await Client.open(b, { user: carol });
    const j2 = await join(t2, room, { name: 'Carol' });
    assert.equal(j2.count, 3, 'ann, bob and carol: her two tabs are one member');
    assert.equal(j2.digest, hex([ann, bob, carol]), 'the joiner on B gets the digest of all three');
    await sameDigest(a, b, room, [ann, bob, carol]);
    const before = deltas(ca, room).length + deltas(cb, room).length;
    t1.send({ type: 'room_leave', room, ref: 'l1' });
    await sleep(800);
    assert.ok(members(ca, room).includes(carol) && members(cb, room).includes(carol),
      'carol stays while her tab on B is in the room');
    assert.equal(deltas(ca, room).length + deltas(cb, room).length, before,
      'one tab leaving while the other stays sends nothing');
    t2.send({ type: 'room_leave', room, ref: 'l2' });
    await waitUntil(() => !members(ca, room).includes(carol) && !members(cb, room).includes(carol), 'carol leaves on both nodes with her last tab', 3000);

    // Bob leaves on B: Ann sees it; sequence numbers on each node stay gap-free
    cb.send({ type: 'room_leave', room, ref: 'lb' });
    await waitUntil(() => !members(ca, room).includes(bob), 'Bob\'s leave crosses', 3000);
    // a read on B, where nobody holds the room any more, still lists Ann
    await sleep(200);
    const info = await (await fetch(`${b.url}/v1/rooms/${room}`)).json();
    assert.deepEqual(info.members.map((m) => m.user), [ann], JSON.stringify(info));
    await sameDigest(a, b, room, [ann]);
    const last = (c) => deltas(c, room).at(-1);
    assert.equal(last(ca).digest, hex([ann]), 'the last delta on A carries the digest of Ann alone');
    const seqs = deltas(ca, room).map((d) => d.seq);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `seqs ${seqs}`);
    for (const c of [ca, cb, t1, t2]) c.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
  }
}

test('one room across two nodes on one Redis: snapshot, joins, patches, two tabs, leaves', async () => {
  const redis = await startRedis();
  try {
    await crossNodeRoom(redis);
  } finally {
    await redis.close();
  }
});

test('one room across two nodes on a 3-master Redis Cluster', async () => {
  const cluster = await startRedisCluster();
  try {
    await crossNodeRoom(cluster);
  } finally {
    await cluster.close();
  }
});

test('kill -9 of a node: its room members leave on the other node within 17 s', async () => {
  const redis = await startRedis();
  const [a, b] = await twoNodes(redis.url);
  try {
    const { room, ann, bob, cb } = await annAndBob(redis, a, b, 'k');
    const t0 = Date.now();
    a.child.kill('SIGKILL');
    await waitUntil(() => !members(cb, room).includes(ann), 'Ann leaves on B', 20000);
    const took = Date.now() - t0;
    assert.ok(took <= 17000, `left after ${took} ms`);
    console.log(`a killed node's room member left after ${took} ms`);
    assert.deepEqual(members(cb, room), [bob]);
    // a read on B agrees
    const info = await (await fetch(`${b.url}/v1/rooms/${room}`)).json();
    assert.deepEqual(info.members.map((m) => m.user), [bob]);
    cb.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await redis.close();
  }
});

test('kill -9 of one of three nodes: its room member leaves on both others, whichever swept it', async () => {
  const redis = await startRedis();
  const [a, b] = await twoNodes(redis.url);
  const c = await startNode(redis.url, 'c');
  try {
    const { room, ann, bob, cb } = await annAndBob(redis, a, b, 'k3');
    const carol = uid('carol');
    const cc = await Client.open(c, { user: carol });
    await join(cc, room, { name: 'Carol' });
    await waitUntil(() => members(cb, room).includes(carol), 'Carol on B', 5000);
    a.child.kill('SIGKILL');
    // One of B and C sweeps A; the other may see A gone from the leases
    // before its own grace for A ended: it must drop A's members too.
    await waitUntil(() => !members(cb, room).includes(ann) && !members(cc, room).includes(ann),
      'Ann leaves on B and on C', 20000);
    await sameDigest(b, c, room, [bob, carol]);
    cb.close();
    cc.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await stopClean(c, assert);
    await redis.close();
  }
});

test('Redis restarted empty: each node puts its members again and both nodes read the same room', async () => {
  const redis = await startRedis();
  const [a, b] = await twoNodes(redis.url);
  try {
    const { room, ann, bob, ca, cb } = await annAndBob(redis, a, b, 'rr');
    await redis.restart();
    const t0 = Date.now();
    await shared(redis, room, ann, 15000);
    await shared(redis, room, bob, 15000);
    console.log(`the room was put again ${Date.now() - t0} ms after Redis came back`);
    await waitUntil(async () => {
      try { await sameDigest(a, b, room, [ann, bob]); return true; } catch { return false; }
    }, 'both nodes read Ann and Bob', 15000);
    const info = await (await fetch(`${b.url}/v1/rooms/${room}`)).json();
    assert.deepEqual(info.members.find((m) => m.user === ann).meta, { name: 'Ann' }, 'A\'s member, as A put it again');
    // and the room goes on: a join on A after the restart reaches B
    const carol = uid('carol');
    const cc = await Client.open(a, { user: carol });
    await join(cc, room, { name: 'Carol' });
    await waitUntil(() => members(cb, room).includes(carol), 'Carol on B', 5000);
    await sameDigest(a, b, room, [ann, bob, carol]);
    for (const c of [ca, cb, cc]) c.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('a member who turns invisible on A is gone from the room on B within 1 s', async () => {
  const redis = await startRedis();
  const [a, b] = await twoNodes(redis.url);
  try {
    const { room, ann, ca, cb } = await annAndBob(redis, a, b, 'inv');
    ca.send({ type: 'privacy', invisible: true, ref: 'inv' });
    await ca.next((m) => m.ref === 'inv');
    const t0 = Date.now();
    await waitUntil(() => !members(cb, room).includes(ann), 'Ann hidden on B', 3000);
    const hid = Date.now() - t0;
    assert.ok(hid <= 1000, `hidden after ${hid} ms`);
    console.log(`an invisible member left the room on the other node after ${hid} ms`);
    ca.close();
    cb.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});
