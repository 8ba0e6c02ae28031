// Hidden users leave no trace in errors and times (issue 16, items 7, 8,
// 9, 12): a non-member's patch/ephemeral gets the same error whether the room
// holds only hidden members or does not exist, room_full counts only the
// members others can see, room_joined of a room of hidden members says
// epoch 0 like its snapshot, an invisible member's joinedAt reads as the
// moment she became visible, and a user cannot block herself.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep, MULT } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk, adminRequest } from './lib/admin.mjs';

const KEY = 'hidden-admin-key-0123456789abcdef';
const FLAGS = ['--admin-api-key', KEY, '--room-batch-ms', '20', '--presence-debounce-ms', '20',
  '--room-max-members', '2'];

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;
const admin = (srv, method, p, body) => adminOk(srv, KEY, method, p, body);

async function reply(c, msg, ref) {
  c.send({ ...msg, ref });
  const m = await c.next((x) => (x.type === 'ack' || x.type === 'error' || x.type === 'room_joined') &&
    x.ref === ref);
  delete m.ref;
  return m;
}

for (const workers of ['1', '2']) {
  describe(`hidden users in errors and times, workers=${workers}`, () => {
    let srv;
    before(async () => { srv = await startServer(['--workers', workers, ...FLAGS]); });
    after(async () => { await stopClean(srv, assert); });

    test('a user cannot block herself (400), blocking another still works', async () => {
      const u = id('u');
      const r = await adminRequest(srv, 'PUT', `/v1/admin/users/${u}/blocks/${u}`, { key: KEY });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.code, 'self_block');
      assert.equal((await admin(srv, 'PUT', `/v1/admin/users/${u}/blocks/${id('t')}`)).changed, 1);
      // Unblocking oneself stays a harmless no-op.
      assert.equal((await admin(srv, 'DELETE', `/v1/admin/users/${u}/blocks/${u}`)).changed, 0);
    });

    test('patch/ephemeral from a non-member: a room of hidden members answers like no room', async () => {
      const x = id('x'), o = id('o'), room = id('room'), none = id('none');
      await admin(srv, 'PUT', `/v1/admin/users/${x}/privacy`, { invisible: true });
      const X = await Client.open(srv, { user: x });
      const O = await Client.open(srv, { user: o });
      assert.equal((await reply(X, { type: 'join', room }, 'j')).type, 'room_joined');
      const answers = [];
      for (const r of [room, none]) {
        answers.push(await reply(O, { type: 'patch', room: r, meta: { a: 1 } }, 'p'));
        answers.push(await reply(O, { type: 'ephemeral', room: r, kind: 'cursor', data: 1 }, 'e'));
      }
      assert.deepEqual(answers[0], answers[2]);
      assert.deepEqual(answers[1], answers[3]);
      assert.equal(answers[0].message, 'no such room');
      await X.close();
      await O.close();
    });

    test('room_full counts only the members others can see', async () => {
      const x = id('x'), a = id('a'), b = id('b'), c = id('c'), room = id('room');
      await admin(srv, 'PUT', `/v1/admin/users/${x}/privacy`, { invisible: true });
      const [X, A, B, C] = await Promise.all([x, a, b, c].map((user) => Client.open(srv, { user })));
      assert.equal((await reply(X, { type: 'join', room }, 'j')).type, 'room_joined');
      assert.equal((await reply(A, { type: 'join', room }, 'j')).type, 'room_joined');
      // Cap 2: A and B fill it as if X were not there.
      assert.equal((await reply(B, { type: 'join', room }, 'j')).type, 'room_joined');
      const full = await reply(C, { type: 'join', room }, 'j');
      assert.equal(full.code, 'room_full', JSON.stringify(full));
      for (const k of [X, A, B, C]) await k.close();
    });

    test('room_joined reads like its snapshot when every member is hidden (epoch 0, seq 0)', async () => {
      const x = id('x'), y = id('y'), room = id('room');
      for (const u of [x, y]) await admin(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { invisible: true });
      const X = await Client.open(srv, { user: x });
      const Y = await Client.open(srv, { user: y });
      assert.equal((await reply(X, { type: 'join', room }, 'j')).type, 'room_joined');
      const j = await reply(Y, { type: 'join', room }, 'j');
      const snap = Y.seen.find((m) => m.type === 'room_snapshot' && m.room === room);
      assert.equal(snap.epoch, 0, JSON.stringify(snap));
      assert.deepEqual([j.epoch, j.seq, j.count], [snap.epoch, snap.seq, snap.count], JSON.stringify(j));
      await X.close();
      await Y.close();
    });

    test("an invisible member's joinedAt is the moment she became visible", async () => {
      const x = id('x'), o = id('o'), room = id('room');
      await admin(srv, 'PUT', `/v1/admin/users/${x}/privacy`, { invisible: true });
      const X = await Client.open(srv, { user: x });
      const O = await Client.open(srv, { user: o });
      assert.equal((await reply(X, { type: 'join', room }, 'j')).type, 'room_joined');
      await sleep(600 * MULT);
      const before = Date.now();
      await admin(srv, 'PUT', `/v1/admin/users/${x}/privacy`, { invisible: false });
      const j = await reply(O, { type: 'join', room }, 'j');
      const deadline = Date.now() + 5000 * MULT;
      let mem;
      while (!(mem = (await (await fetch(`${srv.url}/v1/rooms/${room}`)).json()).members.find((m) => m.user === x))) {
        assert.ok(Date.now() < deadline, `X never appeared: ${JSON.stringify(j)}`);
        await sleep(20);
      }
      assert.ok(mem.joinedAt >= before - 50, `joinedAt ${mem.joinedAt} is before she became visible (${before})`);
      await X.close();
      await O.close();
    });
  });
}
