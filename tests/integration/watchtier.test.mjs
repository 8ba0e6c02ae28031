// Watch tiers: "tier":"list" gets one presence_list frame per
// watch-batch-ms window with every user that changed; "tier":"live" (the
// default) still gets each transition as its own presence frame.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--presence-debounce-ms', '20', '--watch-batch-ms', '1000']);
});
after(async () => { await stopClean(srv, assert); });

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

async function watcher(users, tier) {
  const w = await Client.open(srv, { user: id('w') });
  w.send({ type: 'watch', users, ref: 'w', ...(tier ? { tier } : {}) });
  await w.next((m) => m.ref === 'w' && m.type === 'ack');
  for (const u of users) await w.next((m) => m.type === 'presence' && m.presence.user === u); // snapshots
  w.msgs.length = 0;
  return w;
}

test('ten users coming online: one frame to a list-tier watcher, ten to a live one', async () => {
  const users = Array.from({ length: 10 }, () => id('u'));
  const list = await watcher(users, 'list');
  const live = await watcher(users);
  const cs = await Promise.all(users.map((user) => Client.open(srv, { user })));
  const frame = await list.next((m) => m.type === 'presence_list', 5000);
  const seen = new Set(frame.presence.map((p) => p.user));
  // All ten came online inside one window (they opened well within 1 s).
  assert.deepEqual([...seen].sort(), [...users].sort());
  assert.ok(frame.presence.every((p) => p.status === 'online'));
  assert.equal(list.msgs.filter((m) => m.type === 'presence').length, 0, 'no single frames on the list tier');
  for (const u of users) await live.next((m) => m.type === 'presence' && m.presence.user === u && m.presence.status === 'online');
  assert.equal(live.seen.filter((m) => m.type === 'presence_list').length, 0, 'live tier unchanged');
  await Promise.all(cs.map((c) => c.close()));
  const off = await list.next((m) => m.type === 'presence_list', 8000);
  assert.equal(off.presence.length, 10);
  assert.ok(off.presence.every((p) => p.status === 'offline'));
  await list.close();
  await live.close();
});

test('a bad tier is refused', async () => {
  const w = await Client.open(srv, { user: id('w') });
  w.send({ type: 'watch', users: [id('x')], ref: 'b', tier: 'slow' });
  const e = await w.next((m) => m.ref === 'b');
  assert.equal(e.type, 'error');
  assert.equal(e.code, 'invalid');
  await w.close();
});
