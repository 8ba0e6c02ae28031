// webhooks.test.mjs - one producer per transition across nodes: both
// nodes send their webhooks to one receiver, and each transition arrives
// once, whichever node made it. Pusher format (verified by the `pusher`
// library's WebHook): the same user on two nodes is one member_added and
// one member_removed; a node killed with SIGKILL leaves its last member's
// member_removed and channel_vacated to the surviving node, once. Standard
// Webhooks (verified by `standardwebhooks`): user.online/offline once for a
// user with sessions on both nodes.
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { sleep, waitUntil } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';

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
