// presence.test.mjs - users' presence across nodes over one Redis
// (docs/cluster.md): a watcher on node B sees node A's transitions in
// order, two tabs on two nodes are one user, a killed node's users go
// offline elsewhere within 17 s, users who reconnect elsewhere within the
// grace cause no event, and a privacy change on A holds on B within 1 s.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { startServer, stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid, userKey } from './lib/nodes.mjs';

async function readPresence(node, user) {
  const r = await fetch(`${node.url}/v1/presence?user=${encodeURIComponent(user)}`);
  return (await r.json()).users[0];
}

test('a watcher on node B sees node A\'s transitions in order, with strictly increasing versions in Redis', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const alice = uid('alice');
    const bob = await Client.open(b, { user: uid('bob') });
    bob.send({ type: 'watch', users: [alice], ref: 'w' });
    assert.equal((await bob.presenceOf(alice)).status, 'offline');
    const vers = [];
    const ver = () => vers.push(BigInt(redis.cli('hget', userKey(alice), 'ver')));
    const ca = await Client.open(a, { user: alice });
    assert.equal((await bob.presenceOf(alice)).status, 'online');
    ver();
    ca.send({ type: 'status', status: 'busy' });
    assert.equal((await bob.presenceOf(alice)).status, 'busy');
    ver();
    ca.send({ type: 'custom', text: 'In a meeting', emoji: ':calendar:' });
    const p = await bob.presenceOf(alice);
    assert.equal(p.custom.text, 'In a meeting');
    assert.equal(p.status, 'busy', 'a custom status keeps the explicit busy');
    ver();
    ca.send({ type: 'status', status: 'online' });
    assert.equal((await bob.presenceOf(alice)).status, 'online');
    ver();
    ca.send({ type: 'leave' });
    const off = await bob.presenceOf(alice);
    ver();
    assert.equal(off.status, 'offline');
    assert.ok(off.lastSeen, 'offline with a last seen');
    for (let i = 1; i < vers.length; i++) assert.ok(vers[i] > vers[i - 1], `versions ${vers}`);
    // reads answer the same on both nodes
    assert.equal((await readPresence(a, alice)).status, 'offline');
    assert.equal((await readPresence(b, alice)).status, 'offline');
    bob.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('two tabs on two nodes are one user: merged devices, one offline at the end', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const carol = uid('carol');
    const w = await Client.open(a, { user: uid('w') });
    w.send({ type: 'watch', users: [carol] });
    assert.equal((await w.presenceOf(carol)).status, 'offline');
    const t1 = await Client.open(a, { user: carol, device: 'desktop' });
    assert.equal((await w.presenceOf(carol)).status, 'online');
    const t2 = await Client.open(b, { user: carol, device: 'mobile' });
    const both = await w.presenceOf(carol);
    assert.deepEqual(both.devices, { desktop: 'online', mobile: 'online' });
    assert.equal((await readPresence(b, carol)).status, 'online');
    t2.send({ type: 'status', status: 'dnd' });
    const mixed = await w.presenceOf(carol);
    assert.equal(mixed.status, 'online', 'most-available across nodes');
    assert.equal(mixed.devices.mobile, 'dnd');
    t1.send({ type: 'leave' });
    assert.equal((await w.presenceOf(carol)).status, 'dnd', 'the session on B keeps the user');
    t2.send({ type: 'leave' });
    assert.equal((await w.presenceOf(carol)).status, 'offline');
    await sleep(500);
    assert.equal(w.drainPresence(carol).length, 0, 'exactly one offline');
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('kill -9 a node: its users go offline elsewhere within 17 s; users who moved within the grace cause no event', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const gone = uid('gone'), mover = uid('mover');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [gone, mover] });
    await w.presenceOf(gone);
    await w.presenceOf(mover);
    const g = await Client.open(a, { user: gone });
    const m = await Client.open(a, { user: mover });
    assert.equal((await w.presenceOf(gone)).status, 'online');
    assert.equal((await w.presenceOf(mover)).status, 'online');
    g.ws.on('error', () => {});
    m.ws.on('error', () => {});
    const t0 = Date.now();
    a.child.kill('SIGKILL');
    await sleep(1000);
    const m2 = await Client.open(b, { user: mover }); // reconnects to B within the grace
    const off = await w.presenceOf(gone, 20000);
    const took = Date.now() - t0;
    assert.equal(off.status, 'offline');
    assert.ok(took <= 17000, `offline after ${took} ms`);
    await sleep(2000);
    assert.deepEqual(w.drainPresence(mover), [], 'the user who moved produced no event');
    assert.equal((await readPresence(b, mover)).status, 'online');
    m2.close();
    w.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await redis.close();
  }
});

test('invisible set on node A is hidden on node B within 1 s of the acknowledgement', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const dora = uid('dora');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [dora] });
    await w.presenceOf(dora);
    const d = await Client.open(a, { user: dora });
    assert.equal((await w.presenceOf(dora)).status, 'online');
    d.send({ type: 'privacy', invisible: true, ref: 'p' });
    await d.next((m) => m.type === 'ack' && m.ref === 'p');
    const t0 = Date.now();
    const hidden = await w.presenceOf(dora, 3000);
    assert.equal(hidden.status, 'offline');
    assert.ok(Date.now() - t0 <= 1000, `hidden after ${Date.now() - t0} ms`);
    await waitUntil(async () => (await readPresence(b, dora)).status === 'offline', 'B reads dora offline', 1000);
    d.close();
    w.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('with redis set, a SQLite settings store is refused at start, saying why', async () => {
  await assert.rejects(startServer(['--redis', 'redis://127.0.0.1:1', '--node-id', 'x']),
    /settings store must be shared by every node: set store to a postgresql:\/\/ URI/);
  await assert.rejects(startServer(['--redis', 'redis://127.0.0.1:1', '--node-id', 'bad id', '--store', 'postgresql://x@127.0.0.1:1/x']),
    /invalid value "bad id" for node-id/);
  await assert.rejects(startServer(['--redis', 'http://127.0.0.1:1', '--store', 'postgresql://x@127.0.0.1:1/x']),
    /redis: /);
});
