// pusher.test.mjs - Pusher presence channels across two nodes: the same
// user on two nodes is one member (one member_added, and member_removed
// only when its last socket, on either node, is gone), and a member on one
// node is in the other node's subscription_succeeded. pusher-js clients,
// the `pusher` server library as the authorizer.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { sleep, waitUntil } from '../integration/lib/server.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';
import { subscribed, hookReceiver } from '../integration/lib/pusherjs.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');

const APP = { id: '77', key: 'cluster-key', secret: 'cluster-secret' };
const ARGS = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}`, '--reconnect-grace-ms', '500',
  '--presence-debounce-ms', '50'];

function connect(node, user) {
  const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret });
  return new PusherClient(APP.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: node.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) =>
        cb(null, api.authorizeChannel(socketId, channelName, { user_id: user, user_info: { name: user } })),
    },
  });
}

test('the same user on two nodes triggers one member_added, and one member_removed after its last socket', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const ch = `presence-${uid('doc')}`;
    const watcher = connect(a, uid('w'));
    const wch = watcher.subscribe(ch);
    await subscribed(wch);
    const log = [];
    wch.bind('pusher:member_added', (m) => log.push(['added', m.id]));
    wch.bind('pusher:member_removed', (m) => log.push(['removed', m.id]));

    const user = uid('bob');
    const onA = connect(a, user);
    const onB = connect(b, user);
    const sa = await subscribed(onA.subscribe(ch));
    const sb = await subscribed(onB.subscribe(ch));
    assert.equal(sa.count, 2);
    await waitUntil(() => sb.count === 2 || onB.channel(ch).members.count === 2, 'node b sees both members', 5000);
    await sleep(1000);
    assert.deepEqual(log, [['added', user]], 'one member_added for two sockets on two nodes');

    onA.disconnect();
    await sleep(1500); // past the grace: b's socket still holds the member
    assert.deepEqual(log, [['added', user]]);
    onB.disconnect();
    await waitUntil(() => log.length === 2, 'member_removed', 8000);
    assert.deepEqual(log[1], ['removed', user]);
    await sleep(500);
    assert.equal(log.length, 2, 'exactly one member_removed');
    watcher.disconnect();
  });
});

test('events cross nodes: a client event on one node and an HTTP API event on the other, socket_id excluded on its own node', async () => {
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
    '--reconnect-grace-ms', '500'];
  await withTwoNodes(args, async (a, b) => {
    const ch = `presence-${uid('ev')}`;
    const ann = uid('ann');
    const onA = connect(a, ann);
    const onB = connect(b, uid('bob'));
    const onB2 = connect(b, uid('cat'));
    const [ca, cb, cb2] = [onA.subscribe(ch), onB.subscribe(ch), onB2.subscribe(ch)];
    await Promise.all([subscribed(ca), subscribed(cb), subscribed(cb2)]);
    await waitUntil(() => ca.members.count === 3 && cb.members.count === 3, 'both nodes see 3 members', 5000);
    const got = { a: [], b: [], b2: [] };
    for (const [k, c] of [['a', ca], ['b', cb], ['b2', cb2]]) {
      c.bind('client-typing', (d, meta) => got[k].push(['client-typing', d, meta?.user_id]));
      c.bind('news', (d) => got[k].push(['news', d]));
    }

    // A client event from node a: b's two sockets get it with the sender's user_id; a does not.
    assert.equal(ca.trigger('client-typing', { on: true }), true);
    await waitUntil(() => got.b.length === 1 && got.b2.length === 1, 'the client event on node b', 5000);
    assert.deepEqual(got.b[0], ['client-typing', { on: true }, ann], 'with the sender\'s user_id');
    assert.deepEqual(got.b2[0], ['client-typing', { on: true }, ann]);

    // The HTTP API on node a, excluding bob's socket on node b.
    const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(a.port) });
    const r = await api.trigger(ch, 'news', { n: 1 }, { socket_id: onB.connection.socket_id });
    assert.equal(r.status, 200);
    await waitUntil(() => got.a.length === 1 && got.b2.length === 2, 'the API event on both nodes', 5000);
    await sleep(500);
    assert.deepEqual(got.a, [['news', { n: 1 }]]);
    assert.deepEqual(got.b2[1], ['news', { n: 1 }]);
    assert.deepEqual(got.b, [got.b[0]], 'the excluded socket on the other node got nothing');
    assert.equal(got.a.filter((x) => x[0] === 'client-typing').length, 0, 'a client event is not echoed');
    for (const c of [onA, onB, onB2]) c.disconnect();
  });
});

test('a signed-in user on node a: sendToUser and terminate_connections through node b reach it', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const user = uid('sig');
    const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(b.port) });
    const p = new PusherClient(APP.key, {
      cluster: 'local', wsHost: '127.0.0.1', wsPort: a.port, forceTLS: false,
      enabledTransports: ['ws'], disableStats: true,
      userAuthentication: { customHandler: ({ socketId }, cb) => cb(null, api.authenticateUser(socketId, { id: user })) },
    });
    const got = [];
    p.user.bind('note', (d) => got.push(d));
    p.signin();
    await p.user.signinDonePromise;
    await waitUntil(() => p.user.serverToUserChannel?.subscribed, 'the user channel subscribed', 5000);
    assert.equal((await api.sendToUser(user, 'note', { via: 'b' })).status, 200);
    await waitUntil(() => got.length === 1, 'the event from node b', 5000);
    assert.deepEqual(got, [{ via: 'b' }]);
    assert.equal((await api.terminateUserConnections(user)).status, 200);
    await waitUntil(() => p.connection.state !== 'connected', 'the socket on node a closed', 5000);
    await sleep(1000);
    assert.notEqual(p.connection.state, 'connected', 'and it does not come back');
    p.disconnect();
  });
});

// Subscription counts of a channel without members across nodes: the
// sockets on both nodes add up in channels/{name} read on either node and
// in pusher_internal:subscription_count, and channel_occupied /
// channel_vacated come once across the two nodes (the room script's first
// and last holder), verified by the server library's WebHook.
test('a public channel\'s subscribers on two nodes: one count, one occupied, one vacated', async () => {
  const receiver = await hookReceiver();
  const { got, url } = receiver;
  const args = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:subscription-count=true:webhook=${url}`,
    '--reconnect-grace-ms', '500'];
  try {
    await withTwoNodes(args, async (a, b) => {
      const ch = uid('feed');
      const apiA = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(a.port) });
      const apiB = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(b.port) });
      const count = async (api) => (await (await api.get({ path: `/channels/${ch}`, params: { info: 'subscription_count' } })).json());
      const events = () => got.flatMap((g) => {
        const hook = apiA.webhook({ headers: g.headers, rawBody: g.body });
        assert.ok(hook.isValid(), 'a webhook with a bad signature');
        return hook.getEvents();
      }).filter((e) => e.channel === ch).map((e) => e.name);
      const ps = [connect(a, uid('x')), connect(a, uid('y')), connect(b, uid('z'))];
      const seen = [];
      try {
        const chans = ps.map((p) => p.subscribe(ch));
        chans[2].bind('pusher:subscription_count', (d) => seen.push(d.subscription_count));
        await Promise.all(chans.map((c) => subscribed(c)));
        await waitUntil(async () => (await count(apiA)).subscription_count === 3, 'node a counts both nodes', 5000);
        await waitUntil(async () => (await count(apiB)).subscription_count === 3, 'node b counts both nodes', 5000);
        assert.deepEqual(await count(apiB), { occupied: true, subscription_count: 3 });
        await waitUntil(() => seen.at(-1) === 3, 'node b\'s subscriber is told 3', 5000);
        ps[0].disconnect();
        await waitUntil(() => seen.at(-1) === 2, 'and then 2', 5000);
        await waitUntil(() => events().length >= 1, 'channel_occupied', 5000);
        ps[1].disconnect();
        await waitUntil(async () => (await count(apiB)).subscription_count === 1, 'node a\'s sockets gone', 5000);
        await sleep(700);
        assert.deepEqual(events(), ['channel_occupied'], 'one occupied for two nodes, no vacated while b holds one');
        ps[2].disconnect();
        await waitUntil(() => events().length === 2, 'channel_vacated', 5000);
        await sleep(700);
        assert.deepEqual(events(), ['channel_occupied', 'channel_vacated']);
        assert.deepEqual(await count(apiA), { occupied: false, subscription_count: 0 });
      } finally {
        ps.forEach((p) => p.disconnect());
      }
    });
  } finally {
    await receiver.close();
  }
});
