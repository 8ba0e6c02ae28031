// A burst of joins rides the room's batch (room-batch-ms): 150 sockets
// joining one room at once cost about one delta per member per window, not
// the 11,175 (150 * 149 / 2) of one delta per join to every member so far.
// Every member still ends with the full, consistent member list, and a lone
// joiner still sees itself in its own snapshot.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const N = 150;
let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

// Applies c's snapshot and deltas of room in order; returns the member set.
function model(c, room) {
  let members = null;
  let seq = 0;
  for (const m of c.seen) {
    if (m.room !== room) continue;
    if (m.type === 'room_snapshot') {
      members = new Set(m.members.map((x) => x.user));
      seq = m.seq;
    } else if (m.type === 'room_delta' && members) {
      assert.equal(m.seq, seq + 1, 'deltas are contiguous');
      seq = m.seq;
      for (const j of m.joins) members.add(j.user);
      for (const l of m.leaves) members.delete(l);
    }
  }
  return members ?? new Set();
}

for (const workers of ['1', '2']) {
  describe(`join burst, workers=${workers}`, () => {
    let srv;
    before(async () => { srv = await startServer(['--workers', workers]); });
    after(async () => { await stopClean(srv, assert); });

    test(`${N} joins at once: every member sees all, in O(N) deliveries`, async () => {
      const room = id('burst');
      const cs = [];
      for (let i = 0; i < N; i++) cs.push(await Client.open(srv, { user: id('u') }));
      for (const c of cs) c.send({ type: 'join', room, ref: 'j' });
      await Promise.all(cs.map((c) => c.next((m) => m.type === 'room_joined' && m.ref === 'j', 10000)));
      const deadline = Date.now() + 10000;
      while (cs.some((c) => model(c, room).size !== N)) {
        assert.ok(Date.now() < deadline, 'every member reaches the full list');
        await new Promise((r) => setTimeout(r, 50));
      }
      const deliveries = cs.reduce((k, c) => k + c.seen.filter((m) => m.type === 'room_delta' && m.room === room).length, 0);
      console.log(`# join burst of ${N}, workers=${workers}: ${deliveries} delta deliveries`);
      assert.ok(deliveries <= 4 * N, `deliveries ${deliveries} <= ${4 * N} (one per join to all: ${N * (N - 1) / 2})`);
      await Promise.all(cs.map((c) => c.close()));
    });

    test('a lone joiner still sees itself in its own snapshot', async () => {
      const room = id('lone');
      const a = await Client.open(srv, { user: id('a') });
      a.send({ type: 'join', room, ref: 'j' });
      await a.next((m) => m.type === 'room_joined');
      await new Promise((r) => setTimeout(r, 120)); // past the batch window
      const b = await Client.open(srv, { user: id('b') });
      b.send({ type: 'join', room, ref: 'j' });
      const jb = await b.next((m) => m.type === 'room_joined');
      const snap = b.seen.find((m) => m.type === 'room_snapshot' && m.room === room);
      assert.equal(snap.members.length, 2);
      assert.equal(snap.seq, jb.seq);
      await a.close();
      await b.close();
    });
  });
}
