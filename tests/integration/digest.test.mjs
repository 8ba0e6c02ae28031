// The member digest (docs/protocol.md, "Member digest") on a real
// server, with 1 and 2 workers: every room_snapshot, room_delta and
// room_joined carries the digest of exactly the members that reader is
// shown, as the SDK's own model (clients/js/rooms.js) computes it, through
// joins, patches, leaves, invisibility and a block (the blocked reader's
// digest leaves the blocker out); HTTP reads carry the same digest.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';
import { RoomModel, memberDigest } from '../../clients/js/rooms.js';

const KEY = 'digest-admin-key-0123456789abcdef';
const FLAGS = ['--admin-api-key', KEY, '--room-batch-ms', '20', '--presence-debounce-ms', '20'];
let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;
const hex = (users) => users.reduce((d, u) => d ^ memberDigest(u), 0n).toString(16).padStart(16, '0');

// Feeds every room message c receives into a model; fails on the first
// one whose digest is not the model's.
function follow(c, room) {
  const model = new RoomModel(room);
  const bad = [];
  c.ws.on('message', (d) => {
    const m = JSON.parse(d.toString());
    if (m.room !== room || !['room_snapshot', 'room_delta', 'room_joined'].includes(m.type)) return;
    assert.match(m.digest, /^[0-9a-f]{16}$/, JSON.stringify(m));
    if (model.apply(m) === 'diverged') bad.push(m);
    if (m.type === 'room_joined' && m.epoch === model.epoch && m.seq === model.seq &&
        BigInt('0x' + m.digest) !== model._digest)
      bad.push(m);
  });
  return { model, bad };
}

async function join(c, room, meta = {}) {
  c.send({ type: 'join', room, meta, ref: 'j' });
  const m = await c.next((x) => (x.type === 'room_joined' || x.type === 'error') && x.ref === 'j');
  assert.equal(m.type, 'room_joined', JSON.stringify(m));
  return m;
}
const shown = (f) => [...f.model.members.keys()].sort();

for (const workers of ['1', '2']) {
  describe(`member digest, workers=${workers}`, () => {
    let srv;
    before(async () => { srv = await startServer(['--workers', workers, ...FLAGS]); });
    after(async () => { await stopClean(srv, assert); });

    test('every message carries the digest of the members its reader is shown', async () => {
      const room = id('room');
      const [a, b, cu, v] = [id('a'), id('b'), id('c'), id('v')];
      await adminOk(srv, KEY, 'PUT', `/v1/admin/users/${cu}/blocks/${v}`);
      const A = await Client.open(srv, { user: a });
      const V = await Client.open(srv, { user: v });
      const fa = follow(A, room), fv = follow(V, room);
      await join(A, room);
      await join(V, room);
      const B = await Client.open(srv, { user: b });
      const C = await Client.open(srv, { user: cu });
      await join(B, room, { n: 1 });
      await join(C, room);
      await waitUntil(() => shown(fa).length === 4 && shown(fv).length === 3, 'all joined');
      assert.deepEqual(shown(fv), [a, b, v].sort()); // c blocks v: not listed, not in v's digest
      B.send({ type: 'patch', room, meta: { n: 2 }, ref: 'p' });
      await B.next((x) => x.type === 'ack' && x.ref === 'p');
      await adminOk(srv, KEY, 'PUT', `/v1/admin/users/${b}/privacy`, { invisible: true });
      await waitUntil(() => !fa.model.members.has(b), 'b hidden');
      const read = await (await fetch(`${srv.url}/v1/rooms/${room}`)).json();
      assert.equal(read.digest, hex([a, cu, v]));
      const readV = await (await fetch(`${srv.url}/v1/rooms/${room}?as=${v}`)).json();
      assert.equal(readV.digest, hex([a, v]));
      C.send({ type: 'room_leave', room, ref: 'l' });
      await C.next((x) => x.type === 'ack' && x.ref === 'l');
      A.send({ type: 'room_leave', room, ref: 'l' });
      await A.next((x) => x.type === 'ack' && x.ref === 'l');
      await waitUntil(() => shown(fv).length === 1, 'a left');
      assert.deepEqual(fa.bad, []);
      assert.deepEqual(fv.bad, []);
      assert.ok(fa.model.seq > 3 && fv.model.seq > 2); // deltas were checked, not only snapshots
      for (const c of [A, B, C, V]) await c.close();
    });
  });
}
