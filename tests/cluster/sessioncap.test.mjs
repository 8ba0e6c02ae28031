// sessioncap.test.mjs - max-sessions-per-user counts across nodes
// (docs/cluster.md, "Session cap"): a user's sessions on every node count
// towards the cap; at the cap, a session without a live connection on any
// node (a dropped socket in its grace, a socketless HTTP session) ends to
// make room, and only when every session has a live connection is the
// new one refused, on whichever node it comes.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../integration/lib/client.mjs';
import { sleep } from '../integration/lib/server.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';

// Counts are written within 250 ms of a change, plus a round trip.
const SETTLE_MS = 700;
const ARGS = ['--max-sessions-per-user', '3', '--reconnect-grace-ms', '30000'];

const twoNodes = (fn) => withTwoNodes(ARGS, fn);

async function refused(srv, user) {
  const c = await Client.open(srv, { user });
  assert.equal(c.welcome.type, 'error', JSON.stringify(c.welcome));
  assert.equal(c.welcome.code, 'too_many_sessions');
  assert.equal((await c.closed).code, 1008);
}

async function admitted(srv, user, resume) {
  const c = await Client.open(srv, { user, resume });
  assert.equal(c.welcome.type, 'welcome', JSON.stringify(c.welcome));
  return c;
}

test('a dropped socket on node B yields to a new session on node A at the cap', async () => {
  await twoNodes(async (a, b) => {
    const user = uid('drop');
    const live = [await admitted(a, user), await admitted(a, user)];
    const dropped = await admitted(b, user);
    const sid = dropped.welcome.sessionId;
    await dropped.kill();
    await sleep(SETTLE_MS);
    live.push(await admitted(a, user)); // the 3rd live one: B's dropped session makes room
    await sleep(SETTLE_MS);
    // Had B kept it, this resume would succeed; it is a new session now,
    // and three live ones on A refuse it.
    const again = await Client.open(b, { user, resume: sid });
    assert.equal(again.welcome.type, 'error', JSON.stringify(again.welcome));
    assert.equal(again.welcome.code, 'too_many_sessions');
    await Promise.all(live.map((c) => c.close()));
  });
});

test('live sessions across two nodes refuse the next on either node; a close makes room', async () => {
  await twoNodes(async (a, b) => {
    const user = uid('live');
    const onA = [await admitted(a, user), await admitted(a, user)];
    const onB = await admitted(b, user);
    await sleep(SETTLE_MS);
    await refused(b, user);
    await refused(a, user);
    await onA[0].close(); // in its reconnect grace now: no live connection
    await sleep(SETTLE_MS);
    const next = await admitted(b, user);
    await sleep(SETTLE_MS);
    const r = await Client.open(a, { user, resume: onA[0].welcome.sessionId });
    assert.equal(r.welcome.type, 'error', 'the closed session on A was ended for the one on B');
    await Promise.all([onA[1].close(), onB.close(), next.close()]);
  });
});

test('a socketless HTTP session on node B yields to a socket on node A', async () => {
  await twoNodes(async (a, b) => {
    const user = uid('http');
    const beat = (body) => fetch(`${b.url}/v1/heartbeat`, { method: 'POST', body: JSON.stringify(body) });
    const first = await beat({ user });
    assert.equal(first.status, 200);
    const { sessionId } = await first.json();
    const live = [await admitted(a, user), await admitted(a, user)];
    await sleep(SETTLE_MS);
    live.push(await admitted(a, user));
    await sleep(SETTLE_MS);
    // The HTTP session is gone: its next beat would start a new one, and
    // the three live sockets on A refuse that.
    const again = await beat({ user, sessionId });
    assert.equal(again.status, 400);
    assert.equal((await again.json()).error.code, 'too_many_sessions');
    await Promise.all(live.map((c) => c.close()));
  });
});
