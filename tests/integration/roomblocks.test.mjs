// Blocks inside rooms, with 1 and 2 workers: a user blocked by U sees a
// room with U in it exactly as the same room without U (a differential
// test: two rooms, the same steps, U only in one; the blocked viewer's
// transcripts must match after normalising ids, times, seq and the
// deltas left empty by the filter), while everyone else still sees U. A
// block while both are in a room makes U leave the viewer's model (a
// fresh snapshot), an unblock brings U back. HTTP room reads and room
// event streams of a reader with an identity (?as=) are filtered alike.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { openSse } from './lib/sse.mjs';
import { adminOk } from './lib/admin.mjs';

const KEY = 'roomblocks-admin-key-0123456789abcdef';
const FLAGS = ['--admin-api-key', KEY, '--room-batch-ms', '20', '--presence-debounce-ms', '20',
  '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100', '--session-ttl-ms', '30000',
  '--reconnect-grace-ms', '2000'];

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

const admin = (srv, method, p) => adminOk(srv, KEY, method, p);
const block = (srv, owner, target) => admin(srv, 'PUT', `/v1/admin/users/${owner}/blocks/${target}`);
const unblock = (srv, owner, target) => admin(srv, 'DELETE', `/v1/admin/users/${owner}/blocks/${target}`);

async function join(c, room, meta) {
  c.send({ type: 'join', room, meta, ref: 'j' });
  const m = await c.next((x) => (x.type === 'room_joined' || x.type === 'error') && x.ref === 'j');
  assert.equal(m.type, 'room_joined', JSON.stringify(m));
  return m;
}
async function leave(c, room) {
  c.send({ type: 'room_leave', room, ref: 'l' });
  await c.next((x) => x.type === 'ack' && x.ref === 'l');
}
async function patch(c, room, meta) {
  c.send({ type: 'patch', room, meta, ref: 'p' });
  await c.next((x) => x.type === 'ack' && x.ref === 'p');
}
// Waits until c has seen a message of room that matches pred.
async function sees(c, room, pred, what) {
  await c.next((m) => m.room === room && pred(m), 5000).catch((e) => {
    throw new Error(`${what}: ${e.message}`);
  });
}
const hasUser = (list, u) => (list || []).some((x) => (typeof x === 'string' ? x : x.user) === u);
const deltaWith = (key, u) => (m) => m.type === 'room_delta' && hasUser(m[key], u);

// The room messages c saw, with room, epoch, seq and times normalised
// and the deltas without any change dropped.
function transcript(c, room) {
  return c.seen.filter((m) => m.room === room).map((m) => {
    const x = structuredClone(m);
    x.room = 'R';
    delete x.epoch;
    delete x.seq;
    for (const k of ['members', 'joins', 'patches'])
      for (const mem of x[k] || []) mem.joinedAt = 0;
    return x;
  }).filter((m) => !(m.type === 'room_delta' && !m.joins.length && !m.leaves.length &&
    !m.patches.length));
}

for (const workers of ['1', '2']) {
  describe(`blocks inside rooms, workers=${workers}`, () => {
    let srv;
    before(async () => { srv = await startServer(['--workers', workers, ...FLAGS]); });
    after(async () => { await stopClean(srv, assert); });

    test('a blocked viewer sees the room as if the blocker were not in it', async () => {
      const [u, v, o, w] = [id('u'), id('v'), id('o'), id('w')];
      const withU = id('with'), without = id('without');
      await block(srv, u, v);
      const U = await Client.open(srv, { user: u });
      const V = await Client.open(srv, { user: v });
      const O = await Client.open(srv, { user: o });
      const W = await Client.open(srv, { user: w });

      for (const r of [withU, without]) await join(O, r, { name: 'O' });
      await join(U, withU, { name: 'U' });
      for (const r of [withU, without]) await join(V, r, { name: 'V' });
      // the others still see U
      assert.ok(O.seen.some((m) => m.room === withU && (hasUser(m.members, u) || hasUser(m.joins, u))));

      await patch(U, withU, { name: 'U2' });
      await sees(O, withU, deltaWith('patches', u), 'O sees U patch');
      for (const r of [withU, without]) {
        await patch(O, r, { name: 'O2' });
        await sees(V, r, deltaWith('patches', o), 'V sees O patch');
      }

      U.send({ type: 'ephemeral', room: withU, kind: 'cursor', data: { x: 1 } });
      await sees(O, withU, (m) => m.type === 'ephemeral' && m.user === u, 'O sees U cursor');
      for (const r of [withU, without]) {
        O.send({ type: 'ephemeral', room: r, kind: 'cursor', data: { x: 2 } });
        await sees(V, r, (m) => m.type === 'ephemeral' && m.user === o, 'V sees O cursor');
      }

      for (const r of [withU, without]) {
        await join(W, r, { name: 'W' });
        await sees(V, r, deltaWith('joins', w), 'V sees W join');
      }
      await leave(U, withU);
      await sees(O, withU, deltaWith('leaves', u), 'O sees U leave');
      await join(U, withU, { name: 'U3' });
      await sees(O, withU, deltaWith('joins', u), 'O sees U join again');
      for (const r of [withU, without]) {
        await leave(W, r);
        await sees(V, r, deltaWith('leaves', w), 'V sees W leave');
      }
      await sleep(100);

      assert.ok(!V.seen.some((m) => JSON.stringify(m).includes(u)), 'nothing of U reaches V');
      const a = transcript(V, withU), b = transcript(V, without);
      assert.deepEqual(a, b);
      assert.ok(a.length >= 6, JSON.stringify(a));
      // counts: without U everywhere
      const lastA = V.seen.filter((m) => m.room === withU && m.count !== undefined).at(-1);
      assert.equal(lastA.count, 2); // O and V
      const lastO = O.seen.filter((m) => m.room === withU && m.count !== undefined).at(-1);
      assert.equal(lastO.count, 3); // O, V and U
      for (const c of [U, V, O, W]) await c.close();
    });

    test('block and unblock while both are in the room', async () => {
      const [u, v, o] = [id('u'), id('v'), id('o')];
      const room = id('doc');
      const U = await Client.open(srv, { user: u });
      const V = await Client.open(srv, { user: v });
      const O = await Client.open(srv, { user: o });
      await join(U, room, { name: 'U' });
      await join(O, room, { name: 'O' });
      await join(V, room, { name: 'V' });
      const first = V.seen.find((m) => m.type === 'room_snapshot' && hasUser(m.members, u));
      assert.ok(first);
      const joinedAt = first.members.find((m) => m.user === u).joinedAt;

      V.seen = []; V.msgs = [];
      O.seen = []; O.msgs = [];
      await block(srv, u, v);
      const snap = await V.next((m) => m.room === room && m.type === 'room_snapshot');
      assert.ok(!hasUser(snap.members, u), JSON.stringify(snap));
      assert.equal(snap.count, 2);
      assert.deepEqual(snap.members.map((m) => m.user).sort(), [o, v].sort());

      await patch(U, room, { name: 'U2' });
      U.send({ type: 'ephemeral', room, kind: 'typing', data: true });
      await sees(O, room, (m) => m.type === 'ephemeral' && m.user === u, 'O sees U typing');
      await patch(O, room, { name: 'O2' });
      await sees(V, room, deltaWith('patches', o), 'V sees O patch');
      assert.ok(!V.seen.some((m) => JSON.stringify(m).includes(u)), 'nothing of U after the block');
      assert.ok(!O.seen.some((m) => m.type === 'room_snapshot'), 'O gets no snapshot');
      assert.ok(V.seen.filter((m) => m.room === room && m.count !== undefined).every((m) => m.count === 2));

      await unblock(srv, u, v);
      const back = await V.next((m) => m.room === room && m.type === 'room_snapshot' && hasUser(m.members, u));
      assert.equal(back.count, 3);
      assert.equal(back.members.find((m) => m.user === u).meta.name, 'U2');
      // the room's joinedAt, as before the block (protocol.md: one per member)
      assert.equal(back.members.find((m) => m.user === u).joinedAt, joinedAt);
      await patch(U, room, { name: 'U3' });
      await sees(V, room, deltaWith('patches', u), 'V sees U patch after the unblock');

      // a block while U is not in the room: nothing visible changes, and
      // U's later join stays hidden
      await leave(U, room);
      await sees(V, room, deltaWith('leaves', u), 'V sees U leave');
      V.seen = []; V.msgs = [];
      await block(srv, u, v);
      await sleep(100);
      assert.ok(!V.seen.some((m) => m.type === 'room_snapshot'), 'no snapshot when U is not shown');
      await join(U, room, { name: 'U4' });
      await sees(O, room, deltaWith('joins', u), 'O sees U join');
      await patch(O, room, { name: 'O3' });
      await sees(V, room, deltaWith('patches', o), 'V sees O patch');
      assert.ok(!V.seen.some((m) => JSON.stringify(m).includes(u)), 'U join hidden from V');
      for (const c of [U, V, O]) await c.close();
    });

    test('a blocked viewer joining late, and resuming, gets a filtered snapshot', async () => {
      const [u, v, o] = [id('u'), id('v'), id('o')];
      const room = id('doc');
      await block(srv, u, v);
      const U = await Client.open(srv, { user: u });
      const O = await Client.open(srv, { user: o });
      await join(U, room, { name: 'U' });
      await join(O, room, { name: 'O' });
      const V = await Client.open(srv, { user: v });
      const j = await join(V, room, { name: 'V' });
      assert.equal(j.count, 2);
      const snap = V.seen.find((m) => m.type === 'room_snapshot');
      assert.deepEqual(snap.members.map((m) => m.user).sort(), [o, v].sort());
      await leave(V, room);
      V.send({ type: 'join', room, since: { epoch: j.epoch, seq: j.seq - 1 }, ref: 'r' });
      const j2 = await V.next((m) => m.type === 'room_joined' && m.ref === 'r');
      assert.equal(j2.count, 2);
      assert.ok(!V.seen.some((m) => JSON.stringify(m).includes(u)), 'nothing of U reaches V');
      for (const c of [U, V, O]) await c.close();
    });

    test('HTTP room reads and room event streams leave the blocker out', async () => {
      const [u, v, o] = [id('u'), id('v'), id('o')];
      const room = id('doc'), alone = id('alone'), never = id('never');
      await block(srv, u, v);
      const U = await Client.open(srv, { user: u });
      const O = await Client.open(srv, { user: o });
      await join(U, room, { name: 'U' });
      await join(O, room, { name: 'O' });
      await join(U, alone, { name: 'U' });
      const get = async (r, as) => {
        const res = await fetch(`${srv.url}/v1/rooms/${r}${as ? `?as=${as}` : ''}`);
        assert.equal(res.status, 200);
        return res.json();
      };
      const forV = await get(room, v);
      assert.equal(forV.count, 1);
      assert.deepEqual(forV.members.map((m) => m.user), [o]);
      for (const who of [o, undefined]) {
        const other = await get(room, who);
        assert.equal(other.count, 2);
        assert.deepEqual(other.members.map((m) => m.user).sort(), [o, u].sort());
      }
      // a room of blockers only reads like a room nobody is in
      const a = await get(alone, v), b = await get(never, v);
      assert.deepEqual({ ...a, room: 'R' }, { ...b, room: 'R' });
      assert.equal((await get(alone, o)).count, 1);

      const sv = await openSse(`${srv.url}/v1/rooms/${room}/events?as=${v}`);
      const so = await openSse(`${srv.url}/v1/rooms/${room}/events?as=${o}`);
      const snapOf = (evs) => evs.find((e) => e.data.type === 'room_snapshot');
      await sv.until(snapOf);
      await so.until(snapOf);
      assert.deepEqual(snapOf(sv.events).data.members.map((m) => m.user), [o]);
      assert.equal(snapOf(sv.events).data.count, 1);
      assert.equal(snapOf(so.events).data.count, 2);
      await patch(U, room, { name: 'U2' });
      U.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: 1 } });
      await patch(O, room, { name: 'O2' });
      const oPatch = (evs) => evs.some((e) => e.data.type === 'room_delta' && hasUser(e.data.patches, o));
      await sv.until(oPatch);
      await so.until(oPatch);
      assert.ok(oPatch(sv.events), 'V stream sees O patch');
      assert.ok(!sv.events.some((e) => JSON.stringify(e.data).includes(u)), 'nothing of U on V stream');
      assert.ok(so.events.some((e) => e.data.type === 'room_delta' && hasUser(e.data.patches, u)),
        'O stream sees U patch');

      // unblock: V's stream gets a fresh snapshot with U; block again: without
      await unblock(srv, u, v);
      const withU = (evs) => evs.some((e) => e.data.type === 'room_snapshot' && hasUser(e.data.members, u));
      await sv.until(withU);
      assert.ok(withU(sv.events), 'fresh snapshot with U after the unblock');
      assert.equal((await get(room, v)).count, 2);
      const n0 = sv.events.length;
      await block(srv, u, v);
      const without = (evs) => evs.slice(n0).some((e) => e.data.type === 'room_snapshot' &&
        !hasUser(e.data.members, u));
      await sv.until(without);
      assert.ok(without(sv.events), 'fresh snapshot without U after the block');
      await patch(U, room, { name: 'U3' });
      await patch(O, room, { name: 'O3' });
      const o3 = (evs) => evs.some((e) => e.data.type === 'room_delta' &&
        (e.data.patches || []).some((p) => p.user === o && p.meta.name === 'O3'));
      await sv.until(o3);
      assert.ok(o3(sv.events));
      assert.ok(!sv.events.slice(n0).some((e) => JSON.stringify(e.data).includes('U3')), 'U3 hidden');
      sv.close(); so.close();
      for (const c of [U, O]) await c.close();
    });
  });
}
