// pusher-apps.test.mjs - two Pusher apps, each a namespace of its own
// users and rooms, across two nodes: a member of app 2 on node a is in
// app 2's channel on node b and not in app 1's channel of the same name
// (the same user id in both apps); member events, client events and the
// HTTP API read on the other node stay in their app; both apps' webhooks
// share one URL (so their Redis Streams queues must not be shared), each
// signed with its own secret and naming only its own users. pusher-js
// clients, the `pusher` server library as authorizer, API and verifier.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { sleep, waitUntil } from '../integration/lib/server.mjs';
import WebSocket from 'ws';
import { Client } from '../integration/lib/client.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';
import { subscribed, hookReceiver } from '../integration/lib/pusherjs.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');

const A1 = { id: '81', key: 'ns-cluster-key-1', secret: 'ns-cluster-secret-1' };
const A2 = { id: 'second', key: 'ns-cluster-key-2', secret: 'ns-cluster-secret-2' };

const api = (app, node) => new PusherServer({ appId: app.id, key: app.key, secret: app.secret,
  host: '127.0.0.1', port: String(node.port) });

function connect(app, node, user) {
  const auth = api(app, node);
  return new PusherClient(app.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: node.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) =>
        cb(null, auth.authorizeChannel(socketId, channelName, { user_id: user, user_info: { app: app.id } })),
    },
  });
}

const ids = (ch) => { const out = []; ch.members.each((m) => out.push(`${m.id}:${m.info.app}`)); return out.sort(); };

test('two apps across two nodes: members, events, reads and webhooks stay in their app', async () => {
  const receiver = await hookReceiver();
  const { got, url } = receiver;
  const args = ['--pusher-app', `${A1.id}:${A1.key}:${A1.secret}:client-events=true,` +
    `${A2.id}:${A2.key}:${A2.secret}:client-events=true`, '--pusher-webhook-url', url,
    '--reconnect-grace-ms', '500', '--presence-debounce-ms', '50'];
  try {
    await withTwoNodes(args, async (a, b) => {
      const ch = `presence-${uid('doc')}`;
      const bob = uid('bob'), watcher = uid('w');
      // app 1 and app 2 each have a watcher on node b, subscribed first.
      const w1 = connect(A1, b, watcher), w2 = connect(A2, b, watcher);
      const c1 = w1.subscribe(ch), c2 = w2.subscribe(ch);
      await Promise.all([subscribed(c1), subscribed(c2)]);
      const log1 = [], log2 = [];
      c1.bind('pusher:member_added', (m) => log1.push(['added', m.id, m.info.app]));
      c2.bind('pusher:member_added', (m) => log2.push(['added', m.id, m.info.app]));
      c1.bind('client-note', (d) => log1.push(['client-note', d]));
      c2.bind('client-note', (d) => log2.push(['client-note', d]));
      // bob of app 2 joins on node a; then bob of app 1, on node a too.
      const b2 = connect(A2, a, bob);
      const s2 = b2.subscribe(ch);
      await subscribed(s2);
      await waitUntil(() => log2.length >= 1, 'node b sees app 2\'s bob', 5000);
      assert.deepEqual(log2, [['added', bob, A2.id]]);
      assert.deepEqual(ids(c2), [`${bob}:${A2.id}`, `${watcher}:${A2.id}`].sort());
      await sleep(500);
      assert.deepEqual(log1, [], 'app 1 on node b heard nothing of app 2\'s bob');
      assert.equal(c1.members.count, 1);
      const b1 = connect(A1, a, bob);
      const s1 = b1.subscribe(ch);
      const m1 = await subscribed(s1);
      assert.equal(m1.count, 2, 'app 1\'s channel: its watcher and its bob');
      await waitUntil(() => log1.length >= 1, 'node b sees app 1\'s bob', 5000);
      assert.deepEqual(log1, [['added', bob, A1.id]]);
      assert.deepEqual(ids(c2), [`${bob}:${A2.id}`, `${watcher}:${A2.id}`].sort(), 'app 2 unchanged');

      // A client event of app 2 from node a reaches app 2 on node b only.
      s2.trigger('client-note', { app: 2 });
      await waitUntil(() => log2.some((e) => e[0] === 'client-note'), 'app 2\'s client event across nodes', 5000);
      await sleep(400);
      assert.ok(!log1.some((e) => e[0] === 'client-note'), 'app 1 got no client event');

      // A native socket of app 2 on node b (?app=): app 2's members,
      // bob from node a among them, none of app 1's; and app 2's Pusher
      // watcher sees it join. App 1's channel hears nothing of it.
      const nat = new Client(new WebSocket(`${b.wsUrl}/v1/ws?app=${A2.id}&user=${uid('nat')}`));
      await new Promise((ok, fail) => { nat.ws.once('open', ok); nat.ws.once('error', fail); });
      const me = (await nat.next((m) => m.type === 'welcome')).user;
      nat.send({ type: 'join', room: ch.slice('presence-'.length), meta: { app: A2.id }, ref: 'j' });
      const snap = await nat.next((m) => m.type === 'room_snapshot');
      assert.deepEqual(snap.members.map((m) => m.user).sort(), [bob, me, watcher].sort());
      assert.ok(snap.members.every((m) => m.meta.app === A2.id), 'app 2\'s members only');
      await waitUntil(() => log2.some((e) => e[1] === me), 'app 2\'s Pusher watcher sees the native member', 5000);
      await nat.close();
      const n1 = log1.length;

      // The HTTP API on node b reads each app's channel.
      const users = async (app) => (await (await api(app, b).get({ path: `/channels/${ch}/users` })).json())
        .users.map((u) => u.id).sort();
      assert.ok(!log1.slice(n1).concat(log1).some((e) => e[1] === me), 'app 1 never saw the native member');
      await waitUntil(async () => (await users(A2)).length === 2, 'the native member left app 2 after the grace', 8000);
      assert.deepEqual(await users(A2), [bob, watcher].sort());
      assert.deepEqual(await users(A1), [bob, watcher].sort());
      const info = async (app) => (await (await api(app, b).get({ path: `/channels/${ch}`, params: { info: 'user_count' } })).json());
      assert.deepEqual(await info(A2), { occupied: true, user_count: 2 });
      b1.disconnect();
      await waitUntil(async () => (await info(A1)).user_count === 1, 'app 1\'s bob left', 8000);
      assert.deepEqual(await info(A2), { occupied: true, user_count: 2 }, 'app 2\'s bob stays');

      // Webhooks: one URL, each request signed by the app its key names.
      const byApp = (app) => got.filter((g) => g.headers['x-pusher-key'] === app.key).flatMap((g) => {
        const hook = api(app, a).webhook({ headers: g.headers, rawBody: g.body });
        assert.ok(hook.isValid(), `a webhook of app ${app.id} not signed with its secret`);
        return hook.getEvents();
      }).filter((e) => e.channel === ch);
      await waitUntil(() => byApp(A1).some((e) => e.name === 'member_removed'), 'app 1\'s member_removed', 8000);
      await waitUntil(() => byApp(A2).filter((e) => e.name === 'member_added').length >= 2, 'app 2\'s member_added', 8000);
      assert.ok(got.every((g) => [A1.key, A2.key].includes(g.headers['x-pusher-key'])));
      const added = (app) => byApp(app).filter((e) => e.name === 'member_added').map((e) => e.user_id).sort();
      assert.deepEqual(added(A1), [bob, watcher].sort());
      assert.deepEqual(added(A2).filter((u) => u !== me), [bob, watcher].sort());
      assert.ok(added(A2).includes(me), 'app 2\'s webhook names the native member');
      assert.ok(!added(A1).includes(me), 'app 1\'s does not');
      assert.deepEqual(byApp(A2).filter((e) => e.name === 'member_removed').map((e) => e.user_id), [me],
        'app 2 lost only the native member');
      assert.equal(byApp(A1).filter((e) => e.name === 'channel_occupied').length, 1, 'one occupied per app');
      assert.equal(byApp(A2).filter((e) => e.name === 'channel_occupied').length, 1);
      assert.ok(!got.some((g) => g.body.includes('|')), 'no internal ids in any webhook');
      [w1, w2, b2].forEach((p) => p.disconnect());

      // A public channel of app 2 with a socket on each node: its count
      // adds both nodes (the "!s" entries of app 2's room); app 1's
      // channel of the same name has none.
      const feed = uid('feed');
      const ps = [connect(A2, a, uid('x')), connect(A2, b, uid('y'))];
      try {
        await Promise.all(ps.map((p) => subscribed(p.subscribe(feed))));
        const count = async (app, node) => (await (await api(app, node).get({ path: `/channels/${feed}`,
          params: { info: 'subscription_count' } })).json());
        await waitUntil(async () => (await count(A2, a)).subscription_count === 2, 'node a counts both', 5000);
        await waitUntil(async () => (await count(A2, b)).subscription_count === 2, 'node b counts both', 5000);
        assert.deepEqual(await count(A1, a), { occupied: false, subscription_count: 0 });
        assert.deepEqual(await count(A1, b), { occupied: false, subscription_count: 0 });
        const list = async (app) => Object.keys((await (await api(app, b).get({ path: '/channels' })).json()).channels);
        assert.ok((await list(A2)).includes(feed));
        assert.ok(!(await list(A1)).includes(feed), 'app 1 does not list app 2\'s channel');
      } finally {
        ps.forEach((p) => p.disconnect());
      }
    });
  } finally {
    await receiver.close();
  }
});
