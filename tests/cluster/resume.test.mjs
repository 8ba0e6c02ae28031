// resume.test.mjs - resume across nodes (docs/cluster.md, "Resume across
// nodes"): a session whose socket is cut on node A resumes on node B
// within the grace with the same session id and `resumed:true`, its
// status, custom status and device as they were; watchers on A, B and C
// see no presence transition, the room's members on A and B see no leave
// and no join, and only B's contribution is left in Redis. Another user's
// session id (or a made-up one) is refused on B as on one node: a new
// session. After the grace, a resume is a new session, and the old one
// went offline exactly once. A client that node A's drain tells to
// reconnect resumes on node B the same way.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, sleep, waitUntil } from '../integration/lib/server.mjs';
import { startRedis, startNode, uid, fnv1a64, readPresence } from './lib/nodes.mjs';

const GRACE = 2000;
const args = ['--reconnect-grace-ms', String(GRACE)];

async function join(c, room, meta) {
  const ref = `j-${Math.random()}`;
  c.send({ type: 'join', room, meta, ref });
  const j = await c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === ref);
  assert.equal(j.type, 'room_joined', JSON.stringify(j));
  return j;
}

// The room events a client got that name user as joining or leaving.
const roomChurn = (c, room, user) => c.seen.filter((m) => m.room === room && m.type === 'room_delta' &&
  (m.joins.some((j) => j.user === user) || m.leaves.includes(user)));

async function threeNodes(fn) {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', args);
  const b = await startNode(redis.url, 'b', args);
  const c = await startNode(redis.url, 'c', args);
  try {
    await fn(a, b, c, redis);
  } finally {
    for (const n of [a, b, c]) await stopClean(n, assert);
    await redis.close();
  }
}

test('a session cut on node A resumes on node B: same id, nothing seen by watchers on A, B and C or by the room', async () => {
  await threeNodes(async (a, b, c, redis) => {
    const alice = uid('alice'), room = uid('room');
    const watchers = await Promise.all([a, b, c].map((n) => Client.open(n, { user: uid('w') })));
    for (const w of watchers) {
      w.send({ type: 'watch', users: [alice] });
      await w.presenceOf(alice);
    }
    const ca = await Client.open(a, { user: alice, device: 'mobile' });
    const sid = ca.welcome.sessionId;
    ca.send({ type: 'status', status: 'busy' });
    ca.send({ type: 'custom', text: 'In a meeting', emoji: ':calendar:' });
    await join(ca, room, { name: 'Alice' });
    const bob = await Client.open(b, { user: uid('bob') });
    await join(bob, room, { name: 'Bob' });
    const carol = await Client.open(a, { user: uid('carol') });
    await join(carol, room, { name: 'Carol' });
    for (const w of watchers)
      await waitUntil(() => w.seen.some((m) => m.type === 'presence' && m.presence.user === alice &&
        m.presence.status === 'busy' && m.presence.custom?.text === 'In a meeting'), 'busy + custom everywhere');
    await waitUntil(() => bob.seen.some((m) => m.type === 'room_delta' && m.joins.some((j) => j.user === alice)) ||
      bob.seen.some((m) => m.type === 'room_snapshot' && m.members.some((x) => x.user === alice)), 'alice in the room on B');
    await sleep(300);
    for (const w of watchers) w.drainPresence(alice);
    const churn0 = [bob, carol].map((x) => roomChurn(x, room, alice).length);

    ca.ws.on('error', () => {});
    await ca.kill(); // the socket is cut: A starts the grace and writes the record
    const cb = await Client.open(b, { user: alice, resume: sid, device: 'desktop' });
    assert.equal(cb.welcome.type, 'welcome', JSON.stringify(cb.welcome));
    assert.equal(cb.welcome.resumed, true, 'resumed on another node');
    assert.equal(cb.welcome.sessionId, sid, 'the same session id');
    await join(cb, room, { name: 'Alice' }); // as after any resume: join again
    await sleep(GRACE + 1500); // past the old holder's hold and A's grace

    for (const [i, w] of watchers.entries())
      assert.deepEqual(w.drainPresence(alice), [], `watcher on ${'abc'[i]} saw nothing`);
    assert.deepEqual([bob, carol].map((x) => roomChurn(x, room, alice).length), churn0, 'no leave, no join');
    const p = await readPresence(c, alice);
    assert.equal(p.status, 'busy');
    assert.equal(p.custom.text, 'In a meeting');
    assert.deepEqual(p.devices, { mobile: 'busy' }, 'the session keeps its device');
    const fields = redis.cli('hkeys', `pd:app:{u:${fnv1a64(alice)}}:s`).split('\n');
    assert.equal(fields.length, 1, `one contribution: ${fields}`);
    assert.ok(fields[0].startsWith('b.'), `B's: ${fields}`);
    assert.equal(redis.cli('hlen', `pd:app:{u:${fnv1a64(alice)}}:r`), '0', 'no resume record left');
    // the session is B's now: a leave there goes offline once everywhere
    cb.send({ type: 'leave' });
    for (const w of watchers) assert.equal((await w.presenceOf(alice)).status, 'offline');
    for (const x of [...watchers, bob, carol]) x.close();
  });
});

test('another user\'s session id, or a made-up one, is not resumed on node B; after the grace a resume is a new session', async () => {
  await threeNodes(async (a, b, c) => {
    const alice = uid('alice'), mallory = uid('mallory');
    const w = await Client.open(c, { user: uid('w') });
    w.send({ type: 'watch', users: [alice] });
    await w.presenceOf(alice);
    const ca = await Client.open(a, { user: alice });
    const sid = ca.welcome.sessionId;
    assert.equal((await w.presenceOf(alice)).status, 'online');
    ca.ws.on('error', () => {});
    await ca.kill();
    await sleep(200);
    // another user with alice's session id: a new session of its own, as on one node
    const cm = await Client.open(b, { user: mallory, resume: sid });
    assert.equal(cm.welcome.resumed, false);
    assert.notEqual(cm.welcome.sessionId, sid);
    const cz = await Client.open(b, { user: alice, resume: 'f'.repeat(32) });
    assert.equal(cz.welcome.resumed, false, 'a made-up id');
    assert.notEqual(cz.welcome.sessionId, 'f'.repeat(32));
    cz.send({ type: 'leave' });
    await cz.closed;
    const off = await w.presenceOf(alice, GRACE + 5000);
    assert.equal(off.status, 'offline', 'the old session ends after the grace');
    const late = await Client.open(b, { user: alice, resume: sid });
    assert.equal(late.welcome.resumed, false, 'after the grace: a new session');
    assert.notEqual(late.welcome.sessionId, sid);
    assert.equal((await w.presenceOf(alice)).status, 'online');
    await sleep(500);
    const mine = w.seen.filter((m) => m.type === 'presence' && m.presence.user === alice);
    const since = mine.findIndex((m) => m.presence.status === 'online'); // after the snapshot
    assert.equal(mine.slice(since).filter((m) => m.presence.status === 'offline').length, 1, 'offline exactly once');
    late.close();
    cm.close();
    w.close();
  });
});

test('node A drains: the client told to reconnect resumes on node B with the same session, and nobody sees it move', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'a', [...args, '--drain-window-ms', '1000']);
  const b = await startNode(redis.url, 'b', args);
  try {
    const alice = uid('alice'), room = uid('room');
    const w = await Client.open(b, { user: uid('w') });
    w.send({ type: 'watch', users: [alice] });
    await w.presenceOf(alice);
    const ca = await Client.open(a, { user: alice });
    const sid = ca.welcome.sessionId;
    ca.send({ type: 'status', status: 'dnd' });
    await join(ca, room, { name: 'Alice' });
    const bob = await Client.open(b, { user: uid('bob') });
    await join(bob, room, { name: 'Bob' });
    await waitUntil(() => w.seen.some((m) => m.type === 'presence' && m.presence.user === alice &&
      m.presence.status === 'dnd'), 'dnd on B');
    await waitUntil(() => bob.seen.some((m) => m.room === room && ((m.type === 'room_snapshot' && m.members.some((x) => x.user === alice)) ||
      (m.type === 'room_delta' && m.joins.some((j) => j.user === alice)))), 'alice in the room on B');
    await sleep(300);
    w.drainPresence(alice);
    const churn0 = roomChurn(bob, room, alice).length;
    ca.ws.on('error', () => {});
    a.child.kill('SIGTERM');
    const rec = await ca.next((m) => m.type === 'reconnect', 3000);
    assert.ok(rec.afterMs < 1000, JSON.stringify(rec));
    const closed = await ca.closed;
    assert.equal(closed.code, 1001);
    const cb = await Client.open(b, { user: alice, resume: sid });
    assert.equal(cb.welcome.resumed, true, 'resumed on B');
    assert.equal(cb.welcome.sessionId, sid);
    await join(cb, room, { name: 'Alice' });
    await sleep(3000);
    assert.deepEqual(w.drainPresence(alice), [], 'the watcher saw nothing');
    assert.equal(roomChurn(bob, room, alice).length, churn0, 'no leave, no join');
    assert.equal((await readPresence(b, alice)).status, 'dnd');
    await stopClean(a, assert); // exited 0 after its drain
    await sleep(500);
    assert.deepEqual(w.drainPresence(alice), [], 'nor when A was gone');
    for (const x of [w, bob, cb]) x.close();
  } finally {
    await a.stop('SIGKILL');
    await stopClean(b, assert);
    await redis.close();
  }
});
