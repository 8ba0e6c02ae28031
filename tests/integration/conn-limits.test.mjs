// conn-limits.test.mjs - what one connection may hold (issue 15, item 2):
// rooms per connection (max-rooms-per-connection) and watches per
// connection (max-watch), each refused with its own error while the
// connection stays usable.
import assert from 'node:assert/strict';
import test from 'node:test';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

async function join(c, room) {
  c.send({ type: 'join', room, ref: `j-${room}` });
  return c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === `j-${room}`);
}

test('a connection in max-rooms-per-connection rooms is refused more with too_many_rooms', async () => {
  const srv = await startServer(['--workers', '2', '--max-rooms-per-connection', '3']);
  try {
    const a = await Client.open(srv, { user: `rl-${process.pid}` });
    for (const r of ['r1', 'r2', 'r3']) assert.equal((await join(a, r)).type, 'room_joined');
    const over = await join(a, 'r4');
    assert.equal(over.type, 'error');
    assert.equal(over.code, 'too_many_rooms');
    // Refused means not applied: leaving r4 finds nothing; after leaving
    // one, a new room may be joined.
    a.send({ type: 'room_leave', room: 'r4', ref: 'l4' });
    assert.equal((await a.next((m) => m.ref === 'l4')).code, 'not_joined');
    a.send({ type: 'room_leave', room: 'r1', ref: 'l1' });
    assert.equal((await a.next((m) => m.ref === 'l1')).type, 'ack');
    assert.equal((await join(a, 'r4')).type, 'room_joined');
    // Another connection has its own allowance.
    const b = await Client.open(srv, { user: `rl2-${process.pid}` });
    for (const r of ['r1', 'r2', 'r3']) assert.equal((await join(b, r)).type, 'room_joined');
    a.close();
    b.close();
  } finally {
    await stopClean(srv, assert);
  }
});

test('a watch list over max-watch is refused with too_many_watched', async () => {
  const srv = await startServer(['--workers', '2', '--max-watch', '2']);
  try {
    const w = await Client.open(srv);
    w.send({ type: 'watch', users: ['u1', 'u2'], ref: 'w1' });
    assert.equal((await w.next((m) => m.ref === 'w1')).type, 'ack');
    w.send({ type: 'watch', users: ['u3'], ref: 'w2' });
    const over = await w.next((m) => m.ref === 'w2');
    assert.equal(over.type, 'error');
    assert.equal(over.code, 'too_many_watched');
    w.close();
  } finally {
    await stopClean(srv, assert);
  }
});
