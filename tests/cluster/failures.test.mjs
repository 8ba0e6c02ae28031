// failures.test.mjs - Redis itself failing under two nodes
// (docs/cluster.md, "Degraded, never disconnected"): a Redis paused with
// SIGSTOP for 30 s, and a Redis killed and started again empty. Clients
// must stay connected, nobody may go offline for anyone because Redis
// went away, reads must answer at once (flagged degraded), and after
// Redis is back both nodes must agree again within 15 s.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid, userKey, readPresence } from './lib/nodes.mjs';

// Every presence message about any of users that client got since mark
// (an index into client.seen).
function presencesSince(client, mark, users) {
  return client.seen.slice(mark).filter((m) => m.type === 'presence' && users.includes(m.presence.user))
    .map((m) => m.presence);
}

// Opens a watcher of users on node and waits for each snapshot to be
// `status`; returns the client and the mark after the snapshots.
async function watcher(node, users, status) {
  const w = await Client.open(node, { user: uid('w') });
  w.send({ type: 'watch', users, ref: 'w' });
  for (const u of users) {
    let p = await w.presenceOf(u);
    for (let i = 0; i < 20 && p.status !== status[u]; i++) p = await w.presenceOf(u);
    assert.equal(p.status, status[u], `${u}'s snapshot`);
  }
  return w;
}

// Waits until the latest presence of user that w got is `status`.
async function waitStatus(w, user, status, ms, what) {
  const t0 = Date.now();
  await waitUntil(() => {
    const all = w.seen.filter((m) => m.type === 'presence' && m.presence.user === user);
    return all.length && all[all.length - 1].presence.status === status;
  }, what, ms);
  return Date.now() - t0;
}

// The nodes' logs (at debug level: views, puts and gets), for a failure's
// report.
function dumpLogs(nodes) {
  for (const [name, n] of Object.entries(nodes)) {
    console.log(`# --- node ${name} log (last 150 lines)`);
    for (const l of n.stderr.split('\n').slice(-150)) console.log(`# ${l}`);
  }
}

function trackCloses(clients) {
  const closes = [];
  for (const [name, c] of Object.entries(clients)) c.closed.then((x) => closes.push(`${name}: ${x.code}`));
  return closes;
}

test('SIGSTOP Redis for 30 s: nobody disconnected, nobody offline, reads answer at once flagged degraded, converged 15 s after SIGCONT', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', ['--log-level', 'debug']);
  const b = await startNode(redis.url, 'b', ['--log-level', 'debug']);
  try {
    const ua = uid('ua'), ua2 = uid('ua2'), ub = uid('ub'), stranger = uid('never');
    const users = [ua, ua2, ub];
    const ca = await Client.open(a, { user: ua });
    const ca2 = await Client.open(a, { user: ua2 });
    const cb = await Client.open(b, { user: ub });
    const online = { [ua]: 'online', [ua2]: 'online', [ub]: 'online' };
    const wa = await watcher(a, users, online);
    const wb = await watcher(b, users, online);
    const marks = { a: wa.seen.length, b: wb.seen.length };
    const closes = trackCloses({ ca, ca2, cb, wa, wb });

    redis.pause();
    const t0 = Date.now();
    // A transition in the first moments of the pause, before the node
    // knows Redis is gone (its put is written and times out).
    await sleep(200);
    ca2.send({ type: 'status', status: 'busy' });
    await waitStatus(wa, ua2, 'busy', 4000, 'the watcher on A to see ua2 busy during the pause');
    await sleep(Math.max(0, 5000 - (Date.now() - t0)));

    // Reads during the pause answer within about redis-timeout-ms, and
    // say they are estimates.
    for (const [node, name] of [[a, 'A'], [b, 'B']]) {
      for (const u of [ua, ua2, ub, stranger]) {
        const p = await readPresence(node, u);
        assert.ok(p.took < 2500, `read of ${u} on ${name} took ${p.took} ms`);
        assert.equal(p.degraded, true, `read of ${u} on ${name} during the pause: ${JSON.stringify(p)}`);
        if (u !== stranger) assert.notEqual(p.status, 'offline', `${u} on ${name} during the pause`);
      }
    }
    // A transition well into the pause reaches the watcher on the same node at once.
    const t1 = Date.now();
    ca.send({ type: 'status', status: 'dnd' });
    await waitStatus(wa, ua, 'dnd', 2000, 'the watcher on A to see ua dnd during the pause');
    assert.ok(Date.now() - t1 < 2000);
    cb.send({ type: 'status', status: 'away' });
    await waitStatus(wb, ub, 'away', 2000, 'the watcher on B to see ub away during the pause');

    await sleep(Math.max(0, 30000 - (Date.now() - t0)));
    redis.resume();
    const t2 = Date.now();
    // Transitions made during the pause on one node reach the other.
    await waitStatus(wb, ua, 'dnd', 15000, 'B to see ua dnd after SIGCONT');
    await waitStatus(wb, ua2, 'busy', 15000, 'B to see ua2 busy after SIGCONT');
    await waitStatus(wa, ub, 'away', 15000, 'A to see ub away after SIGCONT');
    const want = { [ua]: 'dnd', [ua2]: 'busy', [ub]: 'away' };
    await waitUntil(async () => {
      for (const u of users) {
        const pa = await readPresence(a, u), pb = await readPresence(b, u);
        if (pa.status !== want[u] || pb.status !== want[u] || pa.degraded || pb.degraded) return false;
      }
      return true;
    }, 'reads on both nodes to agree, not degraded', Math.max(1000, 15000 - (Date.now() - t2)));
    const rebuilt = Date.now() - t2;
    // A transition after the rebuild is delivered across nodes.
    cb.send({ type: 'status', status: 'online' });
    await waitStatus(wa, ub, 'online', 3000, 'A to see ub online after the rebuild');
    // Nobody went offline for anyone, at any time (waiting past the
    // orphan grace after SIGCONT: no node sweeps another that merely looked
    // dead when Redis resumed); no socket closed.
    await sleep(Math.max(2000, 13000 - (Date.now() - t2)));
    for (const [w, m, name] of [[wa, marks.a, 'A'], [wb, marks.b, 'B']]) {
      const off = presencesSince(w, m, users).filter((p) => p.status === 'offline');
      assert.deepEqual(off, [], `offline events on the watcher on ${name}`);
    }
    assert.deepEqual(closes, [], 'no client disconnected');
    console.log(`# rebuilt ${rebuilt} ms after SIGCONT`);
    for (const c of [ca, ca2, cb, wa, wb]) c.close();
  } catch (err) {
    dumpLogs({ a, b });
    throw err;
  } finally {
    redis.resume();
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('Redis answering nothing for 8 s (CLIENT PAUSE ALL): a node that looked dead when Redis came back is not swept', async () => {
  // Unlike SIGSTOP, commands written on connections the nodes gave up on
  // are dropped, so the nodes' first renewals after the pause come one by
  // one (backoff jitter), and the first sees the other's lease expired.
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const ua = uid('ua'), ub = uid('ub');
    const ca = await Client.open(a, { user: ua });
    const cb = await Client.open(b, { user: ub });
    const online = { [ua]: 'online', [ub]: 'online' };
    const wa = await watcher(a, [ua, ub], online);
    const wb = await watcher(b, [ua, ub], online);
    const marks = { a: wa.seen.length, b: wb.seen.length };
    const closes = trackCloses({ ca, cb, wa, wb });
    redis.cli('client', 'pause', 8000, 'all');
    await sleep(8000);
    const t0 = Date.now();
    await waitUntil(async () => {
      for (const u of [ua, ub]) {
        const pa = await readPresence(a, u), pb = await readPresence(b, u);
        if (pa.status !== 'online' || pb.status !== 'online' || pa.degraded || pb.degraded) return false;
      }
      return true;
    }, 'reads on both nodes to agree, not degraded', 15000);
    console.log(`# rebuilt ${Date.now() - t0} ms after the pause`);
    // past lease + grace after the pause: nobody swept
    await sleep(Math.max(0, 14000 - (Date.now() - t0)));
    for (const [w, m, name] of [[wa, marks.a, 'A'], [wb, marks.b, 'B']]) {
      const off = presencesSince(w, m, [ua, ub]).filter((p) => p.status === 'offline');
      assert.deepEqual(off, [], `offline events on the watcher on ${name}`);
    }
    for (const u of [ua, ub]) assert.equal((await readPresence(a, u)).status, 'online');
    assert.match(redis.cli('zrange', 'pd:app:{c}:nodes', 0, -1), /^a\.[0-9a-f]{16}\nb\.|^b\.[0-9a-f]{16}\na\./);
    assert.deepEqual(closes, [], 'no client disconnected');
    cb.send({ type: 'status', status: 'busy' });
    await waitStatus(wa, ub, 'busy', 3000, 'A to see ub busy after the pause');
    for (const c of [ca, cb, wa, wb]) c.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('a node cut off alone past lease + grace is swept; back, it takes a new epoch and its users are online again elsewhere', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const ua = uid('ua');
    const ca = await Client.open(a, { user: ua });
    const wb = await watcher(b, [ua], { [ua]: 'online' });
    const before = redis.cli('zrange', 'pd:app:{c}:nodes', 0, -1).split('\n').find((m) => m.startsWith('a.'));
    a.child.kill('SIGSTOP'); // to Redis and B, A is gone; to A, nothing happened
    await waitStatus(wb, ua, 'offline', 20000, 'B to see ua offline once A is swept');
    await sleep(1000);
    a.child.kill('SIGCONT');
    const t0 = Date.now();
    await waitStatus(wb, ua, 'online', 15000, 'B to see ua online again after A is back');
    console.log(`# re-asserted ${Date.now() - t0} ms after SIGCONT`);
    const now = redis.cli('zrange', 'pd:app:{c}:nodes', 0, -1).split('\n').filter((m) => m.startsWith('a.'));
    assert.equal(now.length, 1, `one lease of A: ${now}`);
    assert.notEqual(now[0], before, 'a new epoch');
    assert.ok(redis.cli('hkeys', userKey(ua).replace(/:a$/, ':s')).split('\n').every((f) => f === now[0]),
      'only the new epoch\'s contribution');
    await waitUntil(async () => (await readPresence(b, ua)).status === 'online', 'B reads ua online', 3000);
    ca.send({ type: 'leave' });
    await waitStatus(wb, ua, 'offline', 3000, 'B to see ua leave');
    wb.close();
  } finally {
    a.child.kill('SIGCONT');
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});

test('Redis restarted empty: the nodes re-assert their users and leases; both agree within 15 s', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a');
  const b = await startNode(redis.url, 'b');
  try {
    const alice = uid('alice'), carol = uid('carol'), dave = uid('dave');
    const users = [alice, carol, dave];
    const cal = await Client.open(a, { user: alice });
    const cca = await Client.open(a, { user: carol });
    const cda = await Client.open(b, { user: dave });
    const online = { [alice]: 'online', [carol]: 'online', [dave]: 'online' };
    const wb = await watcher(b, users, online);
    const wa = await watcher(a, users, online);
    const marks = { a: wa.seen.length, b: wb.seen.length };
    const closes = trackCloses({ cal, cca, cda, wa, wb });
    const before = redis.cli('zrange', 'pd:app:{c}:nodes', 0, -1).split('\n');
    assert.equal(before.length, 2, `two leases: ${before}`);

    await redis.stop();
    cca.send({ type: 'status', status: 'busy' }); // during the outage
    await sleep(1500);
    await redis.start(); // same port, no data
    const t0 = Date.now();
    await waitStatus(wb, carol, 'busy', 15000, 'B to see carol busy after the restart');
    const want = { [alice]: 'online', [carol]: 'busy', [dave]: 'online' };
    await waitUntil(async () => {
      for (const u of users) {
        const pa = await readPresence(a, u), pb = await readPresence(b, u);
        if (pa.status !== want[u] || pb.status !== want[u] || pa.degraded || pb.degraded) return false;
      }
      return true;
    }, 'reads on both nodes to agree after the restart', Math.max(1000, 15000 - (Date.now() - t0)));
    // Every local user was put again, and both leases are registered again.
    for (const u of users) assert.ok(redis.cli('hget', userKey(u), 'v').includes('"s":'), `${u} re-asserted`);
    await waitUntil(() => {
      const m = redis.cli('zrange', 'pd:app:{c}:nodes', 0, -1).split('\n').filter(Boolean);
      return m.some((x) => x.startsWith('a.')) && m.some((x) => x.startsWith('b.'));
    }, 'both leases re-registered', 5000);
    console.log(`# converged ${Date.now() - t0} ms after the restart`);
    assert.deepEqual(closes, [], 'no client disconnected');
    // What the nodes hold is the truth again: leaving goes offline
    // everywhere (no field of a stale epoch keeps anyone online).
    cal.send({ type: 'leave' });
    cda.send({ type: 'leave' });
    await waitStatus(wb, alice, 'offline', 3000, 'B to see alice offline');
    await waitStatus(wa, dave, 'offline', 3000, 'A to see dave offline');
    assert.equal((await readPresence(a, alice)).status, 'offline');
    assert.equal((await readPresence(b, dave)).status, 'offline');
    const sflap = (w, m) => presencesSince(w, m, [carol]).filter((p) => p.status === 'offline');
    assert.deepEqual(sflap(wa, marks.a), [], 'carol never offline on A');
    assert.deepEqual(sflap(wb, marks.b), [], 'carol never offline on B');
    for (const c of [cal, cca, cda, wa, wb]) c.close();
  } finally {
    await stopClean(a, assert);
    await stopClean(b, assert);
    await redis.close();
  }
});
