// webhooks.test.mjs - one producer per transition across nodes: both
// nodes send their webhooks to one receiver, and each transition arrives
// once, whichever node made it. Pusher format (verified by the `pusher`
// library's WebHook): the same user on two nodes is one member_added and
// one member_removed; a node killed with SIGKILL leaves its last member's
// member_removed and channel_vacated to the surviving node, once. Standard
// Webhooks (verified by `standardwebhooks`): user.online/offline once for a
// user with sessions on both nodes. The durable queue (Redis Streams):
// events delivered once with both nodes up, the stream acked and trimmed
// to empty; a node SIGKILLed while the receiver is down leaves its pending
// entries to the other node, which delivers them with the same webhook-id;
// a Redis restart with AOF keeps what was produced, and events made while
// Redis is down are added once it is back.
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { sleep, waitUntil, stopClean } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';
import { withTwoNodes, uid, fnv1a64, startRedis, startNode } from './lib/nodes.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');
const { Webhook } = require('standardwebhooks');

const APP = { id: '78', key: 'hook-cluster-key', secret: 'hook-cluster-secret' };
const SECRET = `whsec_${Buffer.from('presenced-cluster-webhook-key-0123456789').toString('base64')}`;

async function receiver() {
  const r = { got: [] };
  r.server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => { r.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString() }); res.end('ok'); });
  });
  await new Promise((ok) => r.server.listen(0, '127.0.0.1', ok));
  r.url = `http://127.0.0.1:${r.server.address().port}/hooks`;
  r.close = () => new Promise((ok) => r.server.close(ok));
  return r;
}

function connect(node, user) {
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  return new PusherClient(APP.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: node.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) =>
        cb(null, api.authorizeChannel(socketId, channelName, { user_id: user })),
    },
  });
}

const subscribed = (ch) => new Promise((resolve) => ch.bind('pusher:subscription_succeeded', resolve));

function pusherEvents(rec, channel) {
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  const out = [];
  for (const g of rec.got) {
    const hook = api.webhook({ headers: g.headers, rawBody: g.body });
    assert.ok(hook.isValid(), 'a webhook with a bad signature');
    for (const e of hook.getEvents()) if (e.channel === channel) out.push(`${e.name}${e.user_id ? ` ${e.user_id}` : ''}`);
  }
  return out;
}

test('pusher webhooks across two nodes: one member_added and one member_removed for a user on both', async () => {
  const rec = await receiver();
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:webhook=${rec.url}`,
    '--reconnect-grace-ms', '500', '--presence-debounce-ms', '50'];
  try {
    await withTwoNodes(args, async (a, b) => {
      const ch = `presence-${uid('hk')}`;
      const user = uid('bob');
      const onA = connect(a, user);
      await subscribed(onA.subscribe(ch));
      const onB = connect(b, user);
      await subscribed(onB.subscribe(ch));
      await waitUntil(() => pusherEvents(rec, ch).length >= 2, 'occupied and added');
      await sleep(800);
      assert.deepEqual(pusherEvents(rec, ch), ['channel_occupied', `member_added ${user}`]);
      onA.disconnect();
      await sleep(1500); // past the grace: b still holds the member
      assert.deepEqual(pusherEvents(rec, ch), ['channel_occupied', `member_added ${user}`]);
      onB.disconnect();
      await waitUntil(() => pusherEvents(rec, ch).length >= 4, 'removed and vacated', 8000);
      await sleep(800);
      assert.deepEqual(pusherEvents(rec, ch), ['channel_occupied', `member_added ${user}`,
        `member_removed ${user}`, 'channel_vacated']);
    });
  } finally {
    await rec.close();
  }
});

test('a node killed with its member: the survivor reports member_removed and channel_vacated once', async () => {
  const rec = await receiver();
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:webhook=${rec.url}`,
    '--reconnect-grace-ms', '500', '--cluster-lease-ms', '2000', '--cluster-orphan-grace-ms', '2000'];
  try {
    await withTwoNodes(args, async (a, b) => {
      const ch = `presence-${uid('kill')}`;
      const ann = uid('ann');
      const bob = uid('bob');
      const onA = connect(a, ann);
      await subscribed(onA.subscribe(ch));
      const onB = connect(b, bob);
      await subscribed(onB.subscribe(ch));
      await waitUntil(() => pusherEvents(rec, ch).length >= 3, 'occupied and two added');
      a.child.kill('SIGKILL');
      onA.disconnect();
      await waitUntil(() => pusherEvents(rec, ch).includes(`member_removed ${ann}`),
        'ann removed by the survivor after lease and grace', 15000);
      onB.disconnect();
      await waitUntil(() => pusherEvents(rec, ch).includes('channel_vacated'), 'vacated', 8000);
      await sleep(800);
      const evs = pusherEvents(rec, ch);
      assert.equal(evs.filter((e) => e === `member_removed ${ann}`).length, 1);
      assert.equal(evs.filter((e) => e === `member_removed ${bob}`).length, 1);
      assert.equal(evs.filter((e) => e === 'channel_vacated').length, 1);
      assert.equal(evs.filter((e) => e === 'channel_occupied').length, 1);
    });
  } finally {
    await rec.close();
  }
});

test('standard webhooks across two nodes: user.online and user.offline once for a user on both', async () => {
  const rec = await receiver();
  const wh = new Webhook(SECRET);
  const args = ['--webhook-url', rec.url, '--webhook-secret', SECRET, '--reconnect-grace-ms', '500',
    '--presence-debounce-ms', '50'];
  try {
    await withTwoNodes(args, async (a, b) => {
      const user = uid('u');
      const room = uid('r');
      const of = () => rec.got.map((g) => wh.verify(g.body, g.headers))
        .filter((e) => e.data.user === user || e.data.room === room).map((e) => e.type);
      const ca = await Client.open(a, { user });
      const cb = await Client.open(b, { user });
      ca.send({ type: 'join', room, ref: 'j' });
      await ca.next((m) => m.type === 'room_joined');
      cb.send({ type: 'join', room, ref: 'j' });
      await cb.next((m) => m.type === 'room_joined');
      await waitUntil(() => of().length >= 3, 'online, occupied, joined').catch((e) => { throw new Error(`${e.message}: ${of()} ${JSON.stringify(rec.got.map((g) => g.body))}`); });
      await sleep(800);
      assert.deepEqual(of().sort(), ['member.joined', 'room.occupied', 'user.online']);
      await ca.close();
      await sleep(1200);
      assert.equal(of().length, 3, `nothing while b holds the user: ${of()}`);
      await cb.close();
      await waitUntil(() => of().length >= 6, 'left, vacated, offline', 8000).catch((e) => { throw new Error(`${e.message}: ${of()}`); });
      await sleep(800);
      assert.deepEqual(of().sort(), ['member.joined', 'member.left', 'room.occupied', 'room.vacated',
        'user.offline', 'user.online']);
    });
  } finally {
    await rec.close();
  }
});

// ---- the durable queue in Redis Streams (docs/cluster.md "Webhooks") ----

// A receiver that answers `status` (503 = down) and keeps what it got.
async function switchable() {
  const r = await receiver();
  r.status = 200;
  r.server.removeAllListeners('request');
  r.server.on('request', (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (r.status === 200) r.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.statusCode = r.status;
      res.end(r.status === 200 ? 'ok' : 'down');
    });
  });
  return r;
}

const streamKey = (format, url) => `pd:app:{wh:${fnv1a64(`${format} ${url}`)}}:q`;
const xlen = (redis, key) => Number(redis.cli('XLEN', key));
// XPENDING's summary: the count, and per consumer its count.
function xpending(redis, key) {
  const lines = redis.cli('XPENDING', key, 'wh').split('\n');
  const count = Number(lines[0]);
  const by = {};
  if (Number.isNaN(count)) return { count: 0, by };
  for (let i = 3; i + 1 < lines.length; i += 2) by[lines[i]] = Number(lines[i + 1]);
  return { count, by };
}

function clientEvents(rec, channel) {
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  const out = [];
  for (const g of rec.got) {
    const hook = api.webhook({ headers: g.headers, rawBody: g.body });
    assert.ok(hook.isValid(), 'a webhook with a bad signature');
    for (const e of hook.getEvents()) if (e.channel === channel && e.name === 'client_event') out.push(JSON.parse(e.data).i);
  }
  return out;
}

test('streams: client events from two nodes are delivered once each, and the stream ends empty', async () => {
  const rec = await switchable();
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true:webhook=${rec.url}`];
  const clients = [];
  try {
    await withTwoNodes(args, async (a, b, redis) => {
      const ch = `presence-${uid('once')}`;
      const key = streamKey('pusher', rec.url);
      const ca = connect(a, uid('ann'));
      const cb = connect(b, uid('bob'));
      clients.push(ca, cb);
      const sa = ca.subscribe(ch);
      const sb = cb.subscribe(ch);
      await Promise.all([subscribed(sa), subscribed(sb)]);
      for (let i = 0; i < 12; i++) {
        assert.ok((i % 2 ? sb : sa).trigger('client-n', { i }));
        await sleep(120);
      }
      await waitUntil(() => clientEvents(rec, ch).length >= 12, 'twelve client_event webhooks', 10000);
      await sleep(800);
      assert.deepEqual(clientEvents(rec, ch).sort((x, y) => x - y), [...Array(12).keys()]);
      assert.match(redis.cli('XINFO', 'GROUPS', key), /^wh$/m, 'the events went through the stream');
      await waitUntil(() => xlen(redis, key) === 0 && xpending(redis, key).count === 0, 'stream acked and trimmed', 5000);
      for (const g of rec.got) assert.ok(JSON.parse(g.body).events.length <= 20);
    });
  } finally {
    for (const c of clients) c.disconnect();
    await rec.close();
  }
});

test('streams: a node killed with undelivered events: the survivor delivers them, same webhook-id', async () => {
  const rec = await switchable();
  const wh = new Webhook(SECRET);
  const args = ['--webhook-url', rec.url, '--webhook-secret', SECRET, '--presence-debounce-ms', '50',
    '--cluster-lease-ms', '2000', '--cluster-orphan-grace-ms', '2000'];
  const users = [uid('k0'), uid('k1'), uid('k2'), uid('k3')];
  try {
    await withTwoNodes(args, async (a, b, redis) => {
      const key = streamKey('standard', rec.url);
      rec.status = 503; // the receiver is down
      const cs = [];
      for (const user of users) cs.push(await Client.open(a, { user }));
      await waitUntil(() => xpending(redis, key).count >= users.length, 'every user.online read (and failing)', 30000);
      const held = Object.entries(xpending(redis, key).by).filter(([c]) => c.startsWith('a.'));
      assert.ok(held.length === 1 && held[0][1] > 0, `node a holds entries: ${JSON.stringify(xpending(redis, key))}`);
      a.child.kill('SIGKILL');
      for (const c of cs) c.close().catch(() => {});
      rec.status = 200;
      const online = () => {
        const by = new Map();
        for (const g of rec.got) {
          const e = wh.verify(g.body, g.headers);
          if (e.type === 'user.online' && users.includes(e.data.user)) {
            if (!by.has(e.data.user)) by.set(e.data.user, new Set());
            by.get(e.data.user).add(g.headers['webhook-id']);
          }
        }
        return by;
      };
      await waitUntil(() => online().size === users.length, 'every user.online delivered by b', 45000)
        .catch((e) => { throw new Error(`${e.message}: ${[...online().keys()]} ${JSON.stringify(xpending(redis, key))}`); });
      for (const [user, ids] of online()) assert.equal(ids.size, 1, `one webhook-id for ${user}: ${[...ids]}`);
      await waitUntil(() => xpending(redis, key).count === 0 && xlen(redis, key) === 0, 'stream acked and trimmed', 45000)
        .catch((e) => { throw new Error(`${e.message}: ${xlen(redis, key)} ${JSON.stringify(xpending(redis, key))}`); });
    });
  } finally {
    await rec.close();
  }
});

test('streams: a Redis restart (AOF, fsync always) keeps the produced events; events made while it is down follow', async () => {
  const rec = await switchable();
  const redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true:webhook=${rec.url}`];
  const nodes = [];
  const clients = [];
  try {
    const a = await startNode(redis.url, 'a', args);
    nodes.push(a);
    const ch = `presence-${uid('aof')}`;
    const key = streamKey('pusher', rec.url);
    rec.status = 503;
    const c = connect(a, uid('ann'));
    clients.push(c);
    const s = c.subscribe(ch);
    await subscribed(s);
    for (let i = 0; i < 4; i++) { assert.ok(s.trigger('client-n', { i })); await sleep(150); }
    // channel_occupied, member_added and the four: acknowledged as produced
    await waitUntil(() => xlen(redis, key) === 6, 'six events in the stream', 5000);
    await redis.stop();
    for (let i = 4; i < 7; i++) { assert.ok(s.trigger('client-n', { i })); await sleep(150); }
    await redis.start();
    rec.status = 200;
    await waitUntil(() => new Set(clientEvents(rec, ch)).size === 7, 'all seven delivered', 30000)
      .catch((e) => { throw new Error(`${e.message}: ${clientEvents(rec, ch)}`); });
    assert.deepEqual([...new Set(clientEvents(rec, ch))].sort((x, y) => x - y), [...Array(7).keys()]);
    await waitUntil(() => xlen(redis, key) === 0 && xpending(redis, key).count === 0, 'stream acked and trimmed', 8000);
  } finally {
    for (const cl of clients) cl.disconnect();
    for (const n of nodes) if (n.child.exitCode === null && n.child.signalCode === null) await stopClean(n, assert);
    await redis.close();
    await rec.close();
  }
});
