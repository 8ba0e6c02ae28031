// Rooms over real sockets with 1 and 4 workers: snapshots, sequenced
// deltas, two tabs as one member, membership that follows the session
// (grace and resume), metadata patches in place, resume since a sequence,
// the 1 KiB metadata limit, and the rate-limited ephemeral lane.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { openSse } from './lib/sse.mjs';

const FLAGS = ['--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '200',
  '--session-ttl-ms', '4000', '--reconnect-grace-ms', '700', '--presence-debounce-ms', '50'];

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

async function join(c, room, meta, extra = {}) {
  c.send({ type: 'join', room, meta, ref: `j-${room}`, ...extra });
  const joined = await c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === `j-${room}`);
  return joined;
}

const deltasOf = (c, room) => c.msgs.filter((m) => m.type === 'room_delta' && m.room === room);

for (const workers of ['1', '4']) {
  describe(`rooms, workers=${workers}`, () => {
    let srv;
    before(async () => { srv = await startServer(['--workers', workers, ...FLAGS]); });
    after(async () => { await stopClean(srv, assert); });

    test('join gives a snapshot; others get a join delta with a sequence number', async () => {
      const room = id('doc');
      const a = await Client.open(srv, { user: id('ann') });
      const j = await join(a, room, { name: 'Ann', color: '#e11' });
      assert.equal(j.type, 'room_joined');
      const snap = await a.next((m) => m.type === 'room_snapshot' || m.type === 'room_delta');
      const b = await Client.open(srv, { user: id('bob') });
      const jb = await join(b, room, { name: 'Bob' });
      const snapB = b.seen.find((m) => m.type === 'room_snapshot' && m.room === room);
      assert.ok(snapB, 'the joiner gets a snapshot');
      assert.deepEqual(snapB.members.map((m) => m.meta.name).sort(), ['Ann', 'Bob']);
      assert.equal(snapB.count, 2);
      const d = await a.next((m) => m.type === 'room_delta' && m.joins.length > 0 && m.joins[0].meta.name === 'Bob');
      assert.equal(d.seq, jb.seq);
      assert.ok(d.seq > (snap.seq ?? 0));
      assert.equal(d.count, 2);
      await a.close();
      await b.close();
    });

    test('two tabs are one member; closing one tab changes nothing', async () => {
      const room = id('tabs');
      const user = id('tabs');
      const obs = await Client.open(srv, { user: id('obs') });
      await join(obs, room, { name: 'Obs' });
      const t1 = await Client.open(srv, { user });
      const t2 = await Client.open(srv, { user });
      await join(t1, room, { name: 'T' });
      await obs.next((m) => m.type === 'room_delta' && m.joins.length === 1);
      const j2 = await join(t2, room, { name: 'T' });
      assert.equal(j2.count, 2, 'still two members: obs and the user');
      await t1.close();
      await sleep(1200); // beyond the grace: t1's session ended, t2 keeps the member
      assert.deepEqual(deltasOf(obs, room), []);
      t2.send({ type: 'room_leave', room, ref: 'l' });
      const left = await obs.next((m) => m.type === 'room_delta' && m.leaves.length === 1);
      assert.equal(left.leaves[0], user);
      assert.equal(left.count, 1);
      await t2.close();
      await obs.close();
    });

    test('membership follows the session: a killed socket leaves after the grace; a resumed one never leaves', async () => {
      const room = id('grace');
      const obs = await Client.open(srv, { user: id('obs') });
      await join(obs, room, {});
      const userA = id('a');
      const a = await Client.open(srv, { user: userA });
      await join(a, room, { name: 'A' });
      await obs.next((m) => m.type === 'room_delta' && m.joins.length === 1);
      const a2pre = a.welcome.sessionId;
      await a.kill();
      const a2 = await Client.open(srv, { user: userA, resume: a2pre });
      assert.equal(a2.welcome.resumed, true);
      const j = await join(a2, room, { name: 'A' });
      assert.equal(j.type, 'room_joined');
      await sleep(1200);
      assert.deepEqual(deltasOf(obs, room), [], 'a reload is invisible to the room');
      await a2.kill();
      const t0 = Date.now();
      const left = await obs.next((m) => m.type === 'room_delta' && m.leaves.length === 1, 4000);
      assert.equal(left.leaves[0], userA);
      assert.ok(Date.now() - t0 >= 600, 'not before the grace');
      await obs.close();
    });

    test('metadata patches are applied in place, never as leave + join', async () => {
      const room = id('patch');
      const obs = await Client.open(srv, { user: id('obs') });
      await join(obs, room, {});
      const a = await Client.open(srv, { user: id('pa') });
      await join(a, room, { name: 'P', color: 'red', x: 1 });
      await obs.next((m) => m.type === 'room_delta' && m.joins.length === 1);
      a.send({ type: 'patch', room, meta: { color: 'blue', x: null }, ref: 'p' });
      await a.next((m) => m.type === 'ack' && m.ref === 'p');
      const d = await obs.next((m) => m.type === 'room_delta' && m.patches.length === 1);
      assert.deepEqual(d.joins, []);
      assert.deepEqual(d.leaves, []);
      assert.deepEqual(d.patches[0].meta, { name: 'P', color: 'blue' });
      a.send({ type: 'patch', room, meta: { big: 'x'.repeat(1100) }, ref: 'big' });
      assert.equal((await a.next((m) => m.type === 'error' && m.ref === 'big')).code, 'invalid');
      await a.close();
      await obs.close();
    });

    test('one socket in several rooms, with long ids: leave one, rejoin, then the session ends them all', async () => {
      const rooms = [1, 2, 3, 4, 5].map((i) => id(`multi-room-with-a-long-identifier-${i}`));
      const user = id('a-user-id-well-over-the-inline-twenty-one');
      const obs = await Client.open(srv, { user: id('obs') });
      for (const r of rooms) await join(obs, r, {});
      const a = await Client.open(srv, { user });
      assert.equal(a.welcome.user, user);
      for (const r of rooms) assert.equal((await join(a, r, { r })).type, 'room_joined');
      for (const r of rooms) await obs.next((m) => m.type === 'room_delta' && m.room === r && m.joins.length === 1);
      a.send({ type: 'room_leave', room: rooms[1], ref: 'l1' });
      await a.next((m) => m.type === 'ack' && m.ref === 'l1');
      await obs.next((m) => m.type === 'room_delta' && m.room === rooms[1] && m.leaves.length === 1);
      const again = await join(a, rooms[0], {});
      assert.equal(again.code, 'already_joined');
      assert.equal((await join(a, rooms[1], { back: true })).type, 'room_joined');
      a.send({ type: 'patch', room: rooms[2], meta: { x: 1 }, ref: 'p' });
      await a.next((m) => m.type === 'ack' && m.ref === 'p');
      a.send({ type: 'leave', ref: 'bye' });
      for (const r of rooms) {
        const d = await obs.next((m) => m.type === 'room_delta' && m.room === r && m.leaves.includes(user));
        assert.equal(d.count, 1, `only obs is left in ${r}`);
      }
      await a.close();
      await obs.close();
    });

    test('1 KiB metadata limit on join', async () => {
      const a = await Client.open(srv, { user: id('m') });
      const ok = await join(a, id('r'), { s: 'x'.repeat(1010) }); // 1017 bytes as JSON
      assert.equal(ok.type, 'room_joined');
      const bad = await join(a, id('r'), { s: 'x'.repeat(1020) });
      assert.equal(bad.type, 'error');
      await a.close();
    });

    test('resume since a sequence gives exactly the missed deltas', async () => {
      const room = id('resume');
      const a = await Client.open(srv, { user: id('ra') });
      const j = await join(a, room, { name: 'RA' });
      const mark = { epoch: j.epoch, seq: j.seq };
      a.send({ type: 'room_leave', room });
      // While a is away, three others join.
      const others = [];
      for (let i = 0; i < 3; i++) {
        const o = await Client.open(srv, { user: id('ro') });
        await join(o, room, { i });
        others.push(o);
      }
      const b = await Client.open(srv, { user: id('rb') });
      b.send({ type: 'join', room, meta: { name: 'RB' }, since: mark, ref: 'r' });
      const jb = await b.next((m) => m.type === 'room_joined');
      assert.equal(jb.resumed, true);
      const missed = b.seen.filter((m) => m.type === 'room_delta');
      assert.ok(missed.length >= 1);
      assert.equal(missed[0].seq, mark.seq + 1, 'starts right after the mark');
      for (let i = 1; i < missed.length; i++) assert.equal(missed[i].seq, missed[i - 1].seq + 1);
      assert.equal(missed.at(-1).seq, jb.seq);
      // An unknown epoch gets a snapshot instead.
      const c = await Client.open(srv, { user: id('rc') });
      c.send({ type: 'join', room, since: { epoch: 12345, seq: 1 }, ref: 'x' });
      const jc = await c.next((m) => m.type === 'room_joined');
      assert.equal(jc.resumed, false);
      assert.ok(c.seen.find((m) => m.type === 'room_snapshot'));
      for (const o of [a, b, c, ...others]) await o.close();
    });

    test('ephemeral cursors: coalesced and rate-limited per sender, last value delivered', async () => {
      const room = id('cur');
      const a = await Client.open(srv, { user: id('ca') });
      const b = await Client.open(srv, { user: id('cb') });
      await join(a, room, {});
      await join(b, room, {});
      await sleep(100);
      const t0 = Date.now();
      for (let i = 0; i < 100; i++) {
        a.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: i, y: i } });
        await sleep(10);
      }
      await sleep(400);
      const got = b.seen.filter((m) => m.type === 'ephemeral' && m.kind === 'cursor');
      const secs = (Date.now() - t0) / 1000;
      assert.ok(got.length >= 5, `${got.length} delivered`);
      assert.ok(got.length <= Math.ceil(15 * secs) + 2, `${got.length} in ${secs.toFixed(1)} s exceeds 15/s`);
      assert.equal(got.at(-1).data.x, 99, 'the latest value always arrives');
      assert.ok(b.seen.every((m) => m.type !== 'room_delta' || !('kind' in m)), 'never mixed with deltas');
      const outsider = await Client.open(srv, { user: id('out') });
      outsider.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: 1 }, ref: 'o' });
      assert.equal((await outsider.next((m) => m.type === 'error')).ref, 'o');
      for (const c of [a, b, outsider]) await c.close();
    });

    test('GET /v1/rooms/{id} lists members, count, mode and sequence', async () => {
      const room = id('info');
      const a = await Client.open(srv, { user: id('ia') });
      const j = await join(a, room, { name: 'IA' });
      const r = await fetch(`${srv.url}/v1/rooms/${room}`);
      assert.equal(r.status, 200);
      const info = await r.json();
      assert.equal(info.room, room);
      assert.equal(info.count, 1);
      assert.equal(info.mode, 'normal');
      assert.equal(info.seq, j.seq);
      assert.equal(info.epoch, j.epoch);
      assert.equal(info.members[0].meta.name, 'IA');
      assert.equal((await fetch(`${srv.url}/v1/rooms/bad%20room`)).status, 400);
      const empty = await (await fetch(`${srv.url}/v1/rooms/${id('none')}`)).json();
      assert.equal(empty.count, 0);
      await a.close();
    });

    test('SSE /v1/rooms/{id}/events: snapshot, deltas, and resume with Last-Event-ID', async () => {
      const room = id('sse');
      const a = await Client.open(srv, { user: id('sa') });
      await join(a, room, { name: 'SA' });
      const open = async (headers = {}) => {
        const s = await openSse(`${srv.url}/v1/rooms/${room}/events`, headers);
        const room_ = (evs) => evs.filter((e) => e.event === 'room').map((e) => ({ id: e.id, m: e.data }));
        return { until: async (pred) => room_(await s.until((evs) => pred(room_(evs)))), close: s.close };
      };
      const s1 = await open();
      let ev = await s1.until((e) => e.some((x) => x.m.type === 'room_joined'));
      const snap = ev.find((x) => x.m.type === 'room_snapshot');
      assert.equal(snap.m.count, 1);
      assert.equal(snap.id, `${snap.m.epoch}-${snap.m.seq}`);
      const b = await Client.open(srv, { user: id('sb') });
      await join(b, room, { name: 'SB' });
      ev = await s1.until((e) => e.some((x) => x.m.type === 'room_delta'));
      const d1 = ev.find((x) => x.m.type === 'room_delta');
      assert.equal(d1.m.joins[0].meta.name, 'SB');
      s1.close();
      // While the stream is away, c joins; resuming from d1 yields exactly that.
      const c = await Client.open(srv, { user: id('sc') });
      await join(c, room, { name: 'SC' });
      const s2 = await open({ 'Last-Event-ID': d1.id });
      ev = await s2.until((e) => e.some((x) => x.m.type === 'room_joined'));
      const deltas = ev.filter((x) => x.m.type === 'room_delta');
      assert.equal(deltas.length, 1);
      assert.equal(deltas[0].m.seq, d1.m.seq + 1);
      assert.equal(deltas[0].m.joins[0].meta.name, 'SC');
      assert.ok(!ev.some((x) => x.m.type === 'room_snapshot'), 'resumed without a snapshot');
      s2.close();
      for (const x of [a, b, c]) await x.close();
    });

    test('room messages need a session and valid ids', async () => {
      const o = await Client.open(srv);
      o.send({ type: 'join', room: 'r1', ref: 'n' });
      assert.equal((await o.next((m) => m.type === 'error')).code, 'no_session');
      const a = await Client.open(srv, { user: id('v') });
      a.send({ type: 'join', room: 'bad room!', ref: 'b' });
      assert.equal((await a.next((m) => m.type === 'error')).code, 'invalid');
      a.send({ type: 'room_leave', room: 'never-joined', ref: 'nj' });
      assert.equal((await a.next((m) => m.type === 'error')).code, 'not_joined');
      await o.close();
      await a.close();
    });
  });
}

test('large rooms switch to interval mode and back, and say so', async () => {
  const srv = await startServer(['--workers', '2', ...FLAGS, '--room-interval-members', '4',
    '--room-interval-ms', '300']);
  try {
    const room = id('big');
    const watcher = await Client.open(srv, { user: id('w') });
    await join(watcher, room, {});
    const members = [];
    for (let i = 0; i < 4; i++) {
      const c = await Client.open(srv, { user: id('m') });
      await join(c, room, { i });
      members.push(c);
    }
    const toInterval = await watcher.next((m) => m.type === 'room_delta' && m.mode === 'interval', 5000);
    assert.ok(toInterval.count >= 4, `switched at ${toInterval.count} members`);
    // In interval mode, churn is batched per interval: 3 quick leaves -> few deltas.
    const before = watcher.seen.length;
    for (let i = 0; i < 3; i++) {
      members[i].send({ type: 'room_leave', room });
      await sleep(20);
    }
    const back = await watcher.next((m) => m.room === room && m.mode === 'normal' &&
      m.seq > toInterval.seq && (m.type === 'room_snapshot' || m.type === 'room_delta'), 5000);
    assert.equal(back.count, 2);
    const deltasSince = watcher.seen.slice(before).filter((m) => m.room === room && m.type === 'room_delta');
    assert.ok(deltasSince.length <= 2, `${deltasSince.length} deltas for 3 leaves in one interval`);
    for (const c of [watcher, ...members]) await c.close();
  } finally {
    await stopClean(srv, assert);
  }
});
