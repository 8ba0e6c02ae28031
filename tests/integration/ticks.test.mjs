// Ephemeral ticks: a room whose ephemerals make ephemeral-tick-deliveries
// (messages times members) a second or more is "hot", and its ephemerals
// go out together every 33 ms, so a socket gets one writev per tick instead
// of one per message; a quieter room sends each message at once. Here the
// threshold is 1,000: 8 members at 300 a second tick, at 20 a second not. Nothing is lost or reordered either way. Runs with
// 1 and 2 workers (the room's owner and the subscribers' workers differ).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

async function metric(srv, name) {
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  return [...text.matchAll(new RegExp(`^${name}\\{worker="\\d+"\\} (\\d+)$`, 'gm'))]
    .reduce((a, m) => a + Number(m[1]), 0);
}

async function join(c, room) {
  c.send({ type: 'join', room, meta: {}, ref: `j-${room}` });
  await c.next((m) => m.type === 'room_joined' && m.ref === `j-${room}`);
}

// Sends `count` cursors round robin from `senders` at about `rate` per
// second in all (x = base, base + 1, ...). Each sender stays far below its own
// --ephemeral-rate, so none of its values is coalesced away.
async function sendCursors(senders, room, count, rate, base) {
  const t0 = Date.now();
  for (let i = 0; i < count; i++) {
    const due = t0 + (i * 1000) / rate;
    if (due > Date.now()) await sleep(due - Date.now());
    senders[i % senders.length].send({ type: 'ephemeral', room, kind: 'cursor', data: { x: base + i } });
  }
}

const cursorsOf = (c, room) => c.seen.filter((m) => m.type === 'ephemeral' && m.room === room);

// Writes per frame sent while `fn` runs, over the whole server.
async function writesPerFrame(srv, fn) {
  const f0 = await metric(srv, 'presenced_frames_out_total');
  const w0 = await metric(srv, 'presenced_writev_calls_total');
  await fn();
  const frames = (await metric(srv, 'presenced_frames_out_total')) - f0;
  const writes = (await metric(srv, 'presenced_writev_calls_total')) - w0;
  return { frames, writes };
}

for (const workers of ['1', '2']) {
  test(`a hot room's ephemerals go out per tick, a quiet room's at once (workers=${workers})`, async () => {
    const srv = await startServer(['--workers', workers, '--ephemeral-rate', '1000',
      '--ephemeral-tick-deliveries', '1000']);
    try {
      const room = id('hot');
      const senders = [];
      const senderIds = [];
      for (let i = 0; i < 4; i++) {
        senderIds.push(id('s'));
        senders.push(await Client.open(srv, { user: senderIds[i] }));
      }
      const readers = [];
      for (let i = 0; i < 4; i++) readers.push(await Client.open(srv, { user: id('r') }));
      for (const c of [...senders, ...readers]) await join(c, room);
      await sleep(200);

      // Quiet: 20 a second (160 deliveries): each reaches the readers at once.
      const quiet = await writesPerFrame(srv, async () => {
        await sendCursors(senders, room, 20, 20, 0);
        await sleep(300);
      });
      for (const r of readers) assert.equal(cursorsOf(r, room).length, 20);
      assert.ok(quiet.writes >= 0.8 * quiet.frames,
        `quiet room: ${quiet.writes} writes for ${quiet.frames} frames (not ticked)`);

      // Hot: 300 a second (2,400 deliveries). After its first full second over
      // the threshold the room ticks: several messages per write.
      await sendCursors(senders, room, 400, 300, 1000);
      const hot = await writesPerFrame(srv, async () => {
        await sendCursors(senders, room, 300, 300, 2000);
        await sleep(300);
      });
      assert.ok(hot.frames >= 5 * 300, `${hot.frames} frames`);
      assert.ok(hot.writes * 3 <= hot.frames,
        `hot room: ${hot.writes} writes for ${hot.frames} frames (ticks should batch them)`);

      // Nothing lost, nothing reordered (per sender), for every reader.
      for (const r of readers) {
        const got = cursorsOf(r, room);
        assert.equal(got.length, 20 + 400 + 300, 'every cursor delivered');
        for (const u of senderIds) {
          const xs = got.filter((m) => m.user === u).map((m) => m.data.x);
          assert.equal(xs.length, (20 + 400 + 300) / 4);
          assert.deepEqual(xs, [...xs].sort((a, b) => a - b), 'in order per sender');
        }
      }
      for (const c of [...senders, ...readers]) await c.close();
    } finally {
      await stopClean(srv, assert);
    }
  });
}

// Six pusher-js subscribers of one presence channel of srv's app APP, each
// recording the client-n events it gets as [user_id, i]; send(rounds,
// base) has each trigger one per round, 125 ms apart; check(total)
// asserts that every sender's events reached every other subscriber, in
// order, never the sender itself.
async function pusherRoom(srv, APP, tag) {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const PusherClient = require('pusher-js');
  const PusherServer = require('pusher');
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  const ch = `presence-${id(tag)}`;
  const users = [0, 1, 2, 3, 4, 5].map(() => id(tag));
  const got = new Map(users.map((u) => [u, []]));
  const chans = [];
  const clients = [];
  for (const user of users) {
    const p = new PusherClient(APP.key, {
      cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
      enabledTransports: ['ws'], disableStats: true,
      channelAuthorization: {
        customHandler: ({ socketId, channelName }, cb) =>
          cb(null, api.authorizeChannel(socketId, channelName, { user_id: user })),
      },
    });
    clients.push(p);
    const c = p.subscribe(ch);
    await new Promise((resolve) => c.bind('pusher:subscription_succeeded', resolve));
    c.bind('client-n', (d, meta) => got.get(user).push([meta.user_id, d.i]));
    chans.push(c);
  }
  const send = async (rounds, base) => {
    for (let r = 0; r < rounds; r++) {
      chans.forEach((c, k) => assert.ok(c.trigger('client-n', { i: base + r * 10 + k })));
      await sleep(125);
    }
  };
  const check = (total) => {
    for (const [k, user] of users.entries()) {
      const mine = got.get(user);
      assert.equal(mine.length, 5 * total, `every other sender's events reach ${user}`);
      assert.ok(!mine.some(([from]) => from === user), 'never echoed to the sender');
      for (const [j, other] of users.entries()) {
        if (j === k) continue;
        const is = mine.filter(([from]) => from === other).map(([, i]) => i);
        assert.deepEqual(is, [...is].sort((a, b) => a - b), 'in order per sender');
        assert.equal(is.length, total);
      }
    }
  };
  return { send, check, close: () => { for (const p of clients) p.disconnect(); } };
}

// Pusher client events in a hot room wait for the tick like ephemerals:
// one write per subscriber per tick, and still every event reaches every
// other subscriber (never the sender), in order per sender, with user_id.
test('a hot room batches Pusher client events per tick, none lost, none echoed (workers=2)', async () => {
  const APP = { id: '91', key: 'tick-key', secret: 'tick-secret' };
  const srv = await startServer(['--workers', '2', '--ephemeral-tick-deliveries', '200',
    '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`]);
  let room;
  try {
    room = await pusherRoom(srv, APP, 'pt');
    // 6 senders at 8 a second each: 48 events, 240 deliveries a second.
    await room.send(12, 0); // the first second makes the room hot
    const hot = await writesPerFrame(srv, async () => { await room.send(16, 1000); await sleep(300); });
    assert.ok(hot.frames >= 16 * 6 * 5, `${hot.frames} frames`);
    assert.ok(hot.writes * 2 <= hot.frames,
      `hot room: ${hot.writes} writes for ${hot.frames} frames (ticks should batch them)`);
    room.check(12 + 16);
  } finally {
    room?.close();
    await stopClean(srv, assert);
  }
});

// A tick's client events go to each worker as one payload: a sender gets
// the slices around its own frames (the others' events of the same tick,
// never its own), and a blocked user's socket never gets its blocker's
// events while it gets everyone else's, in order (its per-socket path).
test('a hot room\'s batched client events: senders get the others\' of the same tick, a blocker\'s never reach the blocked (workers=2)', async () => {
  const { createRequire } = await import('node:module');
  const { adminRequest } = await import('./lib/admin.mjs');
  const require = createRequire(import.meta.url);
  const PusherClient = require('pusher-js');
  const PusherServer = require('pusher');
  const APP = { id: '92', key: 'tick-key2', secret: 'tick-secret2' };
  const ADMIN_KEY = 'ticks-test-admin-key-0123456789abc';
  const srv = await startServer(['--workers', '2', '--ephemeral-tick-deliveries', '200',
    '--admin-api-key', ADMIN_KEY,
    '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`]);
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  const clients = [];
  try {
    const ch = `presence-${id('pb')}`;
    const users = [0, 1, 2, 3, 4, 5].map(() => id('pb'));
    const [blocker, blocked] = users;
    const r = await adminRequest(srv, 'PUT', `/v1/admin/users/${blocker}/blocks/${blocked}`, { key: ADMIN_KEY });
    assert.equal(r.status, 200, r.text);
    const got = new Map(users.map((u) => [u, []]));
    const chans = [];
    for (const user of users) {
      const p = new PusherClient(APP.key, {
        cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
        enabledTransports: ['ws'], disableStats: true,
        channelAuthorization: {
          customHandler: ({ socketId, channelName }, cb) =>
            cb(null, api.authorizeChannel(socketId, channelName, { user_id: user })),
        },
      });
      clients.push(p);
      const c = p.subscribe(ch);
      await new Promise((resolve) => c.bind('pusher:subscription_succeeded', resolve));
      c.bind('client-n', (d, meta) => got.get(user).push([meta.user_id, d.i]));
      chans.push(c);
    }
    // All six send in the same instant each round: in a hot room their
    // events share a tick, so each sender's socket gets a tick with its own
    // frames in the middle of the others'.
    const send = async (rounds, base) => {
      for (let round = 0; round < rounds; round++) {
        chans.forEach((c, k) => assert.ok(c.trigger('client-n', { i: base + round * 10 + k })));
        await sleep(125);
      }
    };
    await send(12, 0); // the first second makes the room hot
    const hot = await writesPerFrame(srv, async () => { await send(16, 1000); await sleep(300); });
    assert.ok(hot.writes * 2 <= hot.frames, `hot room: ${hot.writes} writes for ${hot.frames} frames`);
    for (const [k, user] of users.entries()) {
      const mine = got.get(user);
      assert.ok(!mine.some(([from]) => from === user), `never echoed to ${user}`);
      for (const [j, other] of users.entries()) {
        if (j === k) continue;
        const is = mine.filter(([from]) => from === other).map(([, i]) => i);
        if (user === blocked && other === blocker) {
          assert.deepEqual(is, [], 'a blocker\'s events never reach the blocked user');
          continue;
        }
        const want = [];
        for (let round = 0; round < 12; round++) want.push(round * 10 + j);
        for (let round = 0; round < 16; round++) want.push(1000 + round * 10 + j);
        assert.deepEqual(is, want, `${other}'s events reach ${user}, all, in order`);
      }
    }
    assert.equal(got.get(blocked).length, 4 * 28);
    assert.equal(got.get(blocker).length, 5 * 28, 'the blocker gets the blocked user\'s events');
  } finally {
    for (const p of clients) p.disconnect();
    await stopClean(srv, assert);
  }
});

// A hot room's client events wait for the room's delta window
// (room-batch-ms after the first of them), not the 33 ms ephemeral tick,
// so they batch as native patches do. With a 250 ms window, 48 events a
// second from 6 senders make about 12 per window: far fewer writes than
// the 33 ms tick's (about 1.6 events each); every event still arrives, in
// order per sender, never echoed.
test('a hot room\'s client events go out per room-batch-ms window (workers=2)', async () => {
  const APP = { id: '93', key: 'tick-key3', secret: 'tick-secret3' };
  const srv = await startServer(['--workers', '2', '--ephemeral-tick-deliveries', '200',
    '--room-batch-ms', '250',
    '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`]);
  let room;
  try {
    room = await pusherRoom(srv, APP, 'pw');
    await room.send(4, 0); // hot within its first few events
    const hot = await writesPerFrame(srv, async () => { await room.send(16, 1000); await sleep(600); });
    assert.ok(hot.frames >= 16 * 6 * 5, `${hot.frames} frames`);
    assert.ok(hot.writes * 5 <= hot.frames,
      `hot room: ${hot.writes} writes for ${hot.frames} frames (a 250 ms window should batch about 12)`);
    room.check(4 + 16);
  } finally {
    room?.close();
    await stopClean(srv, assert);
  }
});
