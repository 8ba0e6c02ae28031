// http.test.mjs - socketless HTTP sessions across nodes (docs/cluster.md,
// "HTTP sessions across nodes"): a session started on node A and beaten
// through node B (as a load balancer spreads requests) stays one session,
// on A, with its deadline written to Redis at most once per 5 s however
// fast it is beaten; a leave through B ends it; and when A is killed, the
// beats that reach B take the session over under the same id, so its
// user never goes offline for watchers.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Client } from '../integration/lib/client.mjs';
import { sleep } from '../integration/lib/server.mjs';
import { withTwoNodes, uid, fnv1a64 } from './lib/nodes.mjs';

const TTL = 3000;
const ARGS = ['--session-ttl-ms', String(TTL), '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100'];

async function beat(node, body) {
  const r = await fetch(`${node.url}/v1/heartbeat`, { method: 'POST', body: JSON.stringify(body) });
  assert.equal(r.status, 200, `beat on ${node.url}`);
  return r.json();
}

async function watcher(node, user) {
  const w = await Client.open(node, {}); // no session of its own: no TTL to keep
  w.send({ type: 'watch', users: [user] });
  await w.next((m) => m.type === 'presence' && m.presence.user === user && m.presence.status === 'online');
  return w;
}

// Every command Redis runs while it is on (MONITOR); stop() gives them.
function monitor(redis) {
  const p = spawn('redis-cli', ['-p', String(redis.port), 'MONITOR'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  return { stop: () => { p.kill(); return out.split('\n'); } };
}

test('beats through node B keep node A\'s session, one session, written at most once per 5 s', async () => {
  await withTwoNodes(ARGS, async (a, b, redis) => {
    const user = uid('hb');
    const first = await beat(a, { user });
    assert.equal(first.created, true);
    const w = await watcher(b, user);
    w.drainPresence(user);
    await sleep(400); // the session counts of the start are written
    const mon = monitor(redis);
    await sleep(200);
    // A storm through B for longer than the TTL: every beat keeps A's
    // session (had B made one of its own, created would say so).
    const t0 = Date.now();
    let beats = 0;
    while (Date.now() - t0 < TTL + 1000) {
      const r = await beat(b, { user, sessionId: first.sessionId });
      assert.equal(r.created, false, JSON.stringify(r));
      assert.equal(r.sessionId, first.sessionId);
      beats++;
      await sleep(100);
    }
    const hkey = `pd:app:{u:${fnv1a64(user)}}:h`;
    const writes = mon.stop().filter((l) => l.includes('"HSET"') && l.includes(hkey));
    assert.ok(beats >= 20, `${beats} beats`);
    assert.ok(writes.length <= 1, `${writes.length} writes of the deadline for ${beats} beats in ${Date.now() - t0} ms`);
    assert.deepEqual(w.drainPresence(user), [], 'no event while it is beaten');
    const key = `pd:app:{u:${fnv1a64(user)}}:c`;
    const counts = redis.cli('HGETALL', key).split('\n');
    assert.equal(counts.length, 2, `one node holds sessions: ${counts}`);
    assert.match(counts[0], /^a\./);
    assert.equal(counts[1], '1 0');
    // Silent now: offline once, after the TTL.
    const off = await w.presenceOf(user, TTL + 3000);
    assert.equal(off.status, 'offline');
    await sleep(300);
    assert.equal(redis.cli('HLEN', `pd:app:{u:${fnv1a64(user)}}:h`), '0', 'the record goes with the session');
    w.close();
  });
});

test('a leave through node B ends node A\'s session at once', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const user = uid('hl');
    const first = await beat(a, { user });
    const w = await watcher(b, user);
    const t0 = Date.now();
    const r = await beat(b, { user, sessionId: first.sessionId, leave: true });
    assert.equal(r.ended, true);
    assert.equal((await w.presenceOf(user, 2000)).status, 'offline');
    assert.ok(Date.now() - t0 < 1500, `offline after ${Date.now() - t0} ms`);
    await sleep(300); // A's delete of the record reaches Redis
    const again = await beat(b, { user, sessionId: first.sessionId, leave: true });
    assert.equal(again.ended, false, 'nothing left to end');
    w.close();
  });
});

test('when node A is killed, beats through node B take its session over: no offline', async () => {
  const fast = [...ARGS, '--cluster-lease-ms', '1000', '--cluster-orphan-grace-ms', '1000'];
  await withTwoNodes(fast, async (a, b) => {
    const user = uid('hk');
    const first = await beat(a, { user });
    const w = await watcher(b, user);
    w.drainPresence(user);
    a.child.kill('SIGKILL');
    // Past A's lease, its grace, its sweep and a whole TTL.
    const t0 = Date.now();
    while (Date.now() - t0 < 3000 + TTL) {
      const r = await beat(b, { user, sessionId: first.sessionId });
      assert.equal(r.sessionId, first.sessionId, 'the same session, taken over');
      assert.equal(r.created, false);
      await sleep(500);
    }
    assert.deepEqual(w.drainPresence(user).map((p) => p.status), [], 'watchers saw nothing');
    const off = await w.presenceOf(user, TTL + 3000);
    assert.equal(off.status, 'offline', 'and it ends once the beats stop');
    w.close();
  });
});
