// The Pusher Channels protocol with the real libraries: pusher-js 8 (the
// Node build) as the client and the `pusher` server library as the
// back end (channel authorization and the HTTP API), against presenced
// with --pusher-app. Presence members across two users and two tabs,
// member_added/removed once per user, private channels and their
// signatures, client events (not echoed, user_id on presence channels),
// REST-triggered events with socket_id exclusion, and the refusals: a bad
// signature, a replayed auth for another socket_id, a channel_data that
// does not match its signature, an unknown app key and an unsigned API call.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest } from './lib/admin.mjs';
import { connected, subscribed, recordMembers } from './lib/pusherjs.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');
if (process.env.PUSHER_LOG) PusherClient.logToConsole = true;

const APP = { id: '4711', key: 'test-key-1', secret: 'test-secret-1' };
const FLAGS = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
  '--reconnect-grace-ms', '500', '--presence-debounce-ms', '50', '--session-ttl-ms', '4000',
  '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000',
  '--admin-api-key', 'pusher-test-admin-key-0123456789'];
const ADMIN_KEY = 'pusher-test-admin-key-0123456789';

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

function backend(srv) {
  return new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
}

// A pusher-js client whose authorizer is the server library (the user's
// presence data given per client, as an app's auth endpoint would).
function connect(srv, user, info = {}) {
  const api = backend(srv);
  const p = new PusherClient(APP.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) => {
        const data = channelName.startsWith('presence-') ? { user_id: user, user_info: info } : undefined;
        cb(null, api.authorizeChannel(socketId, channelName, data));
      },
    },
  });
  return p;
}

// A raw socket speaking the protocol, to send what pusher-js never would.
async function raw(srv, key = APP.key) {
  const ws = new WebSocket(`${srv.wsUrl}/app/${key}?protocol=7&client=js&version=8.6.0`);
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  const first = await waitUntil(() => msgs[0], 'the first frame');
  return { ws, msgs, first, send: (o) => ws.send(JSON.stringify(o)) };
}

describe('pusher protocol', () => {
  let srv;
  before(async () => { srv = await startServer(['--workers', '2', ...FLAGS]); });
  after(async () => { await stopClean(srv, assert); });

  test('handshake: socket_id as the server libraries want it, activity_timeout, pong', async () => {
    const r = await raw(srv);
    assert.equal(r.first.event, 'pusher:connection_established');
    const data = JSON.parse(r.first.data);
    assert.match(data.socket_id, /^\d+\.\d+$/);
    assert.equal(data.activity_timeout, 120);
    r.send({ event: 'pusher:ping', data: {} });
    const pong = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:pong'), 'pong');
    assert.ok(pong);
    r.ws.close();
  });

  test('an unknown app key gets pusher:error 4001 and close 4001', async () => {
    const ws = new WebSocket(`${srv.wsUrl}/app/nope?protocol=7`);
    const msgs = [];
    ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
    const [code] = await new Promise((r) => ws.once('close', (c) => r([c])));
    assert.equal(code, 4001);
    assert.equal(msgs[0].event, 'pusher:error');
    assert.equal(msgs[0].data.code, 4001);
  });

  test('presence: two users, two tabs of one user are one member, last tab removes it', async () => {
    const chName = `presence-${uniq('doc')}`;
    const ann = connect(srv, 'ann', { name: 'Ann' });
    const chA = ann.subscribe(chName);
    const subA = await subscribed(chA);
    assert.equal(subA.count, 1);
    assert.equal(subA.me.id, 'ann');
    const logA = recordMembers(chA);

    const bob1 = connect(srv, 'bob', { name: 'Bob' });
    const ch1 = bob1.subscribe(chName);
    const sub1 = await subscribed(ch1);
    assert.equal(sub1.count, 2);
    assert.deepEqual(sub1.get('ann').info, { name: 'Ann' });
    assert.deepEqual(sub1.get('bob').info, { name: 'Bob' });
    await waitUntil(() => logA.length >= 1, 'member_added of bob');
    assert.deepEqual(logA, [['added', 'bob', { name: 'Bob' }]]);

    const log1 = recordMembers(ch1);
    const bob2 = connect(srv, 'bob', { name: 'Bob' });
    const ch2 = bob2.subscribe(chName);
    const sub2 = await subscribed(ch2);
    assert.equal(sub2.count, 2, 'a second tab is the same member');
    await sleep(300);
    assert.deepEqual(logA, [['added', 'bob', { name: 'Bob' }]], 'no member_added for a second tab');
    assert.deepEqual(log1, [], 'the first tab sees nothing of its own second tab');

    bob2.disconnect();
    await sleep(1200); // past the reconnect grace and the debounce
    assert.deepEqual(logA, [['added', 'bob', { name: 'Bob' }]], 'closing one of two tabs changes nothing');
    bob1.disconnect();
    await waitUntil(() => logA.length >= 2, 'member_removed of bob', 4000);
    assert.deepEqual(logA[1], ['removed', 'bob']);
    assert.equal(chA.members.count, 1);
    ann.disconnect();
  });

  test('a native client in the same room sees the Pusher member, and vice versa', async () => {
    const room = uniq('mixed');
    const ann = connect(srv, 'ann-mixed', { name: 'Ann' });
    const ch = ann.subscribe(`presence-${room}`);
    await subscribed(ch);
    const log = recordMembers(ch);
    const nat = await Client.open(srv, { user: 'nat-mixed' });
    nat.send({ type: 'join', room, meta: { name: 'Nat' }, ref: 'j' });
    const snap = await nat.next((m) => m.type === 'room_snapshot');
    assert.deepEqual(snap.members.map((m) => m.user).sort(), ['ann-mixed', 'nat-mixed']);
    await waitUntil(() => log.length >= 1, 'member_added of the native user');
    assert.deepEqual(log[0], ['added', 'nat-mixed', { name: 'Nat' }]);
    await nat.close();
    ann.disconnect();
  });

  test('private channels: server-library signatures work; a forged one is refused', async () => {
    const chName = `private-${uniq('p')}`;
    const a = connect(srv, 'a');
    await subscribed(a.subscribe(chName));
    const r = await raw(srv);
    const sid = JSON.parse(r.first.data).socket_id;
    r.send({ event: 'pusher:subscribe', data: { channel: chName, auth: `${APP.key}:${'0'.repeat(64)}` } });
    const err = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:subscription_error'), 'error');
    assert.equal(err.channel, chName);
    assert.equal(err.data.status, 401);
    // Another socket's valid auth, replayed here, is refused too.
    const other = backend(srv).authorizeChannel('1234.5678', chName);
    r.send({ event: 'pusher:subscribe', data: { channel: `${chName}`, ...other } });
    await waitUntil(() => r.msgs.filter((m) => m.event === 'pusher:subscription_error').length >= 2, 'second error');
    // And its own is accepted.
    r.send({ event: 'pusher:subscribe', data: { channel: chName, ...backend(srv).authorizeChannel(sid, chName) } });
    await waitUntil(() => r.msgs.find((m) => m.event === 'pusher_internal:subscription_succeeded'), 'success');
    r.ws.close();
    a.disconnect();
  });

  test('presence: a channel_data that does not match its signature is refused', async () => {
    const chName = `presence-${uniq('forge')}`;
    const r = await raw(srv);
    const sid = JSON.parse(r.first.data).socket_id;
    const good = backend(srv).authorizeChannel(sid, chName, { user_id: 'mallory' });
    r.send({ event: 'pusher:subscribe', data: { channel: chName, auth: good.auth,
      channel_data: JSON.stringify({ user_id: 'admin' }) } });
    const err = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:subscription_error'), 'error');
    assert.equal(err.data.status, 401);
    assert.ok(!r.msgs.some((m) => m.event === 'pusher_internal:subscription_succeeded'));
    r.ws.close();
  });

  test('client events reach the others, not the sender, with user_id on presence', async () => {
    const chName = `presence-${uniq('ce')}`;
    const a = connect(srv, 'ce-a');
    const b = connect(srv, 'ce-b');
    const chA = a.subscribe(chName);
    const chB = b.subscribe(chName);
    await Promise.all([subscribed(chA), subscribed(chB)]); // bound before either can arrive
    const gotA = [];
    const gotB = [];
    chA.bind('client-typing', (d, meta) => gotA.push([d, meta]));
    chB.bind('client-typing', (d, meta) => gotB.push([d, meta]));
    chA.trigger('client-typing', { on: true });
    await waitUntil(() => gotB.length === 1, 'the event at b');
    assert.deepEqual(gotB[0][0], { on: true });
    assert.equal(gotB[0][1].user_id, 'ce-a');
    await sleep(200);
    assert.equal(gotA.length, 0, 'not echoed to the sender');
    a.disconnect();
    b.disconnect();
  });

  test('HTTP API: trigger reaches subscribers; socket_id is excluded; bad signatures get 401', async () => {
    const chName = uniq('news');
    const a = connect(srv, 'x');
    const b = connect(srv, 'y');
    const chA = a.subscribe(chName);
    const chB = b.subscribe(chName);
    await Promise.all([subscribed(chA), subscribed(chB)]); // bound before either can arrive
    const gotA = [];
    const gotB = [];
    chA.bind('headline', (d) => gotA.push(d));
    chB.bind('headline', (d) => gotB.push(d));
    const api = backend(srv);
    const res = await api.trigger(chName, 'headline', { text: 'hello' }, { socket_id: a.connection.socket_id });
    assert.equal(res.status, 200);
    await waitUntil(() => gotB.length === 1, 'the event at b');
    assert.deepEqual(gotB[0], { text: 'hello' });
    await sleep(200);
    assert.equal(gotA.length, 0, 'the excluded socket gets nothing');
    const batch = await api.triggerBatch([{ channel: chName, name: 'headline', data: { text: 'two' } }]);
    assert.equal(batch.status, 200);
    await waitUntil(() => gotA.length === 1 && gotB.length === 2, 'the batch at both');

    const wrong = new PusherServer({ appId: APP.id, key: APP.key, secret: 'not-the-secret',
      host: '127.0.0.1', port: String(srv.port), useTLS: false });
    await assert.rejects(wrong.trigger(chName, 'headline', { text: 'forged' }), (e) => e.status === 401);
    const unsigned = await fetch(`${srv.url}/apps/${APP.id}/events`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', channel: chName, data: '{}' }) });
    assert.equal(unsigned.status, 401);
    for (const id of ['4712', `${APP.id}1`, APP.id.slice(0, 2)]) { // another id, or one that shares a prefix
      const other = new PusherServer({ appId: id, key: APP.key, secret: APP.secret,
        host: '127.0.0.1', port: String(srv.port), useTLS: false });
      await assert.rejects(other.trigger(chName, 'headline', { text: 'elsewhere' }), (e) => e.status === 404);
    }
    const big = await api.trigger(chName, 'headline', 'x'.repeat(11000)).catch((e) => e);
    assert.equal(big.status, 413);
    await sleep(200);
    assert.equal(gotB.length, 2, 'nothing refused was delivered');
    a.disconnect();
    b.disconnect();
  });

  // pusher-js with user authentication through the server library.
  function signedIn(srv, user, { watchlist } = {}) {
    const api = backend(srv);
    const p = new PusherClient(APP.key, {
      cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
      enabledTransports: ['ws'], disableStats: true,
      userAuthentication: {
        customHandler: ({ socketId }, cb) =>
          cb(null, api.authenticateUser(socketId, { id: user, user_info: { name: user }, ...(watchlist ? { watchlist } : {}) })),
      },
    });
    p.signin();
    return p;
  }
  const dataOf = (m) => (typeof m.data === 'string' ? JSON.parse(m.data) : m.data);
  const presenceOf = async (user) => (await (await fetch(`${srv.url}/v1/presence?user=${user}`)).json()).users[0];

  test('pusher:signin: the user is online, and sendToUser reaches its #server-to-user channel only', async () => {
    const [ann, bob] = [uniq('sig-ann'), uniq('sig-bob')];
    const pa = signedIn(srv, ann);
    const pb = signedIn(srv, bob);
    const got = { a: [], b: [] };
    pa.user.bind('hello', (d) => got.a.push(d));
    pb.user.bind('hello', (d) => got.b.push(d));
    await pa.user.signinDonePromise;
    await pb.user.signinDonePromise;
    assert.equal(pa.user.user_data.id, ann);
    await waitUntil(async () => (await presenceOf(ann)).status === 'online', 'the signed-in user online to native readers');
    // pusher-js subscribes to #server-to-user-<id> after the sign-in; give it a moment to land.
    await waitUntil(() => pa.user.serverToUserChannel?.subscribed && pb.user.serverToUserChannel?.subscribed, 'the user channels subscribed');
    const r = await backend(srv).sendToUser(ann, 'hello', { n: 1 });
    assert.equal(r.status, 200);
    await waitUntil(() => got.a.length === 1, 'the event on ann\'s user channel');
    await sleep(300);
    assert.deepEqual(got, { a: [{ n: 1 }], b: [] });
    pa.disconnect();
    pb.disconnect();
    await waitUntil(async () => (await presenceOf(ann)).status === 'offline', 'offline after the socket and its grace', 8000);
  });

  test('pusher:signin refusals: a bad signature, another socket\'s auth, another user\'s user channel', async () => {
    const r = await raw(srv);
    const sid = JSON.parse(r.first.data).socket_id;
    const userData = JSON.stringify({ id: 'mallory' });
    r.send({ event: 'pusher:signin', data: { user_data: userData, auth: `${APP.key}:${'0'.repeat(64)}` } });
    const closed = new Promise((res) => r.ws.once('close', (c) => res(c)));
    const err = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:error'), 'pusher:error');
    assert.equal(err.data.code, 4009);
    assert.equal(await closed, 4009);

    // Auth signed for another socket is refused the same way.
    const other = await raw(srv);
    const stolen = backend(srv).authenticateUser(sid, { id: 'mallory' });
    other.send({ event: 'pusher:signin', data: stolen });
    const closed2 = new Promise((res) => other.ws.once('close', (c) => res(c)));
    assert.equal(await closed2, 4009);

    // A signed-in socket may subscribe to its own user channel only.
    const s = await raw(srv);
    const sid3 = JSON.parse(s.first.data).socket_id;
    const eve = uniq('eve');
    s.send({ event: 'pusher:signin', data: backend(srv).authenticateUser(sid3, { id: eve }) });
    const ok = await waitUntil(() => s.msgs.find((m) => m.event === 'pusher:signin_success'), 'signin_success');
    assert.equal(typeof ok.data, 'string', 'data is a JSON string, as Pusher sends it');
    assert.equal(JSON.parse(dataOf(ok).user_data).id, eve);
    s.send({ event: 'pusher:subscribe', data: { channel: '#server-to-user-someone-else' } });
    const se = await waitUntil(() => s.msgs.find((m) => m.event === 'pusher:subscription_error'), 'subscription_error');
    assert.equal(dataOf(se).status, 403);
    s.send({ event: 'pusher:subscribe', data: { channel: `#server-to-user-${eve}` } });
    await waitUntil(() => s.msgs.find((m) => m.event === 'pusher_internal:subscription_succeeded'), 'its own channel');
    // An unsigned socket has no user channel at all.
    const u = await raw(srv);
    u.send({ event: 'pusher:subscribe', data: { channel: `#server-to-user-${eve}` } });
    const ue = await waitUntil(() => u.msgs.find((m) => m.event === 'pusher:subscription_error'), 'subscription_error');
    assert.equal(dataOf(ue).status, 403);
    s.ws.close();
    u.ws.close();
  });

  test('watchlist: online of the watched users at sign-in, then online and offline as they change, once each', async () => {
    const [ann, bob, cat] = [uniq('wl-ann'), uniq('wl-bob'), uniq('wl-cat')];
    const pb = signedIn(srv, bob);
    await pb.user.signinDonePromise;
    await waitUntil(async () => (await presenceOf(bob)).status === 'online', 'bob online');
    const pa = signedIn(srv, ann, { watchlist: [bob, cat, bob] });
    const log = [];
    pa.user.watchlist.bind('online', (e) => log.push(['online', ...e.user_ids]));
    pa.user.watchlist.bind('offline', (e) => log.push(['offline', ...e.user_ids]));
    await pa.user.signinDonePromise;
    await waitUntil(() => log.length === 1, 'bob listed online after the sign-in');
    assert.deepEqual(log, [['online', bob]], 'cat, offline, is not listed; bob once');
    const pc = connect(srv, cat);
    await subscribed(pc.subscribe(`presence-${uniq('wl')}`)); // a presence subscription is a session too
    await waitUntil(() => log.length === 2, 'cat online');
    assert.deepEqual(log[1], ['online', cat]);
    pb.disconnect();
    await waitUntil(() => log.length === 3, 'bob offline after its grace', 8000);
    assert.deepEqual(log[2], ['offline', bob]);
    await sleep(500);
    assert.equal(log.length, 3, 'one event per change');
    pa.disconnect();
    pc.disconnect();
  });

  test('watchlist: an invisible user is offline to the watcher and never shows online', async () => {
    const [ann, dan] = [uniq('wl2-ann'), uniq('wl2-dan')];
    const pd = signedIn(srv, dan);
    await pd.user.signinDonePromise;
    const pa = signedIn(srv, ann, { watchlist: [dan] });
    const log = [];
    pa.user.watchlist.bind('online', (e) => log.push(['online', ...e.user_ids]));
    pa.user.watchlist.bind('offline', (e) => log.push(['offline', ...e.user_ids]));
    await waitUntil(() => log.length === 1, 'dan online');
    const r = await adminRequest(srv, 'PUT', `/v1/admin/users/${dan}/privacy`, { key: ADMIN_KEY, body: { invisible: true } });
    assert.equal(r.status, 200);
    await waitUntil(() => log.length === 2, 'dan turned invisible: offline');
    assert.deepEqual(log[1], ['offline', dan]);
    const pd2 = signedIn(srv, dan); // a second socket while invisible
    await pd2.user.signinDonePromise;
    await sleep(700);
    assert.deepEqual(log, [['online', dan], ['offline', dan]], 'nothing while invisible');
    for (const p of [pa, pd, pd2]) p.disconnect();
  });

  test('terminate_connections closes every socket of the user with 4009, and pusher-js does not come back', async () => {
    const user = uniq('term');
    const a = signedIn(srv, user);
    const b = connect(srv, user);
    const other = signedIn(srv, uniq('bystander'));
    await a.user.signinDonePromise;
    await subscribed(b.subscribe(`presence-${uniq('tr')}`));
    await other.user.signinDonePromise;
    const codes = [];
    for (const p of [a, b]) p.connection.bind('error', (e) => codes.push(e?.error?.data?.code));
    const r = await backend(srv).terminateUserConnections(user);
    assert.equal(r.status, 200);
    await waitUntil(() => a.connection.state !== 'connected' && b.connection.state !== 'connected', 'both sockets closed');
    await sleep(1500);
    assert.notEqual(a.connection.state, 'connected', 'no reconnect after 4009');
    assert.notEqual(b.connection.state, 'connected');
    assert.ok(codes.includes(4009), `pusher:error 4009 seen: ${JSON.stringify(codes)}`);
    assert.equal(other.connection.state, 'connected', 'another user\'s socket stays');
    await waitUntil(async () => (await presenceOf(user)).status === 'offline', 'offline at once (a kick has no grace)', 3000);
    other.disconnect();
  });

  test('HTTP API reads: channels/{name} with user_count and channels/{name}/users, hidden members absent', async () => {
    const room = uniq('rd');
    const ch = `presence-${room}`;
    const api = backend(srv);
    const get = async (path, params) => {
      try { const r = await api.get({ path, params }); return [r.status, await r.json()]; } catch (e) { return [e.status, e.body]; }
    };
    assert.deepEqual(await get(`/channels/${ch}`, { info: 'user_count' }), [200, { occupied: false, user_count: 0 }]);
    const [ann, bob] = [uniq('rd-ann'), uniq('rd-bob')];
    const pa = connect(srv, ann);
    const pb = connect(srv, bob);
    await Promise.all([subscribed(pa.subscribe(ch)), subscribed(pb.subscribe(ch))]);
    assert.deepEqual(await get(`/channels/${ch}`, { info: 'user_count' }), [200, { occupied: true, user_count: 2 }]);
    assert.deepEqual(await get(`/channels/${ch}`), [200, { occupied: true }]);
    const [st, body] = await get(`/channels/${ch}/users`);
    assert.equal(st, 200);
    assert.deepEqual(body.users.map((u) => u.id).sort(), [ann, bob].sort());
    // bob turns invisible: the API reads him as absent.
    await adminRequest(srv, 'PUT', `/v1/admin/users/${bob}/privacy`, { key: ADMIN_KEY, body: { invisible: true } });
    await waitUntil(async () => (await get(`/channels/${ch}/users`))[1].users.length === 1, 'bob hidden from the read');
    assert.deepEqual((await get(`/channels/${ch}/users`))[1], { users: [{ id: ann }] });
    assert.deepEqual(await get(`/channels/${ch}`, { info: 'user_count' }), [200, { occupied: true, user_count: 1 }]);
    // Bad requests (the other channels' reads: pusher-channels.test.mjs).
    assert.equal((await get('/channels/private-x/users'))[0], 400);
    assert.deepEqual(await get('/channels/private-x'), [200, { occupied: false }]);
    assert.equal((await get('/channels/presence-a/other'))[0], 404);
    pa.disconnect();
    pb.disconnect();
  });

  test('binary frames are refused', async () => {
    const r = await raw(srv);
    r.ws.send(Buffer.from([1, 2, 3]));
    const [code] = await new Promise((res) => r.ws.once('close', (c) => res([c])));
    assert.equal(code, 1003);
  });
});

test('pusher-app: a bad value is refused at start with a message', async () => {
  await assert.rejects(startServer(['--pusher-app', 'only-an-id']), /ID:KEY:SECRET/);
  await assert.rejects(startServer(['--pusher-app', '1:k:s,1:k2:s2']), /two apps have the id "1"/);
  await assert.rejects(startServer(['--pusher-app', '1:k:s,2:k:s2']), /two apps have the key "k"/);
  await assert.rejects(startServer(['--pusher-app', '1:k:s,2:k2']), /ID:KEY:SECRET/);
});

test('member-limit: a presence channel with that many members refuses a new user (4100), never a member\'s second tab', async () => {
  const srv = await startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:member-limit=2`,
    '--reconnect-grace-ms', '300', '--presence-debounce-ms', '50']);
  const clients = [];
  const connect2 = (user) => { const p = connect(srv, user); clients.push(p); return p; };
  try {
    const ch = `presence-${uniq('cap')}`;
    const a = connect2('cap-a');
    const b = connect2('cap-b');
    await subscribed(a.subscribe(ch));
    await subscribed(b.subscribe(ch));
    const c = connect2('cap-c');
    const err = await new Promise((resolve) => {
      const cc = c.subscribe(ch);
      cc.bind('pusher:subscription_error', resolve);
      cc.bind('pusher:subscription_succeeded', () => resolve(null));
    });
    assert.ok(err, 'the third user was let in');
    assert.equal(err.status, 4100);
    assert.equal(err.type, 'LimitReached');
    const a2 = connect2('cap-a'); // a second tab of a member
    const m = await subscribed(a2.subscribe(ch));
    assert.equal(m.count, 2);
    b.disconnect();
    await sleep(800); // past the grace: b is gone, there is room
    const c2 = connect2('cap-c'); // c again, on a socket of its own
    const ok = await subscribed(c2.subscribe(ch));
    assert.equal(ok.count, 2);
  } finally {
    for (const p of clients) p.disconnect(); // else pusher-js reconnects forever
    await stopClean(srv, assert);
  }
});

test('blocks: a Pusher socket of a blocked user does not see the blocker in a presence channel', async () => {
  const srv = await startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
    '--admin-api-key', ADMIN_KEY, '--reconnect-grace-ms', '300', '--presence-debounce-ms', '50']);
  const clients = [];
  const open = (user) => { const p = connect(srv, user); clients.push(p); return p; };
  try {
    const ch = `presence-${uniq('blk')}`;
    const [u, v, w] = [uniq('blocker'), uniq('blocked'), uniq('other')];
    const r = await adminRequest(srv, 'PUT', `/v1/admin/users/${u}/blocks/${v}`, { key: ADMIN_KEY });
    assert.equal(r.status, 200, r.text);
    const pu = open(u);
    const cu = pu.subscribe(ch);
    await subscribed(cu);
    const pv = open(v);
    const cv = pv.subscribe(ch);
    const sv = await subscribed(cv);
    assert.equal(sv.count, 1, 'the blocked user sees only itself');
    assert.deepEqual(Object.keys(sv.members), [v]);
    const log = recordMembers(cv);
    const seen = [];
    cv.bind('client-ping', (d, meta) => seen.push(meta?.user_id));
    const pw = open(w);
    await subscribed(pw.subscribe(ch));
    await waitUntil(() => log.length === 1, 'the other member arrives');
    cu.trigger('client-ping', { from: 'blocker' });
    pw.channel(ch).trigger('client-ping', { from: 'other' });
    await waitUntil(() => seen.length >= 1, 'the other member\'s client event');
    pu.disconnect(); // the blocker leaves: nothing for v
    await sleep(900);
    assert.deepEqual(log, [['added', w, {}]]);
    assert.deepEqual(seen, [w]);
  } finally {
    for (const p of clients) p.disconnect();
    await stopClean(srv, assert);
  }
});

test('blocks: a client event from a blocker on a private channel (no user_id in the frame) does not reach the blocked user', async () => {
  const srv = await startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
    '--admin-api-key', ADMIN_KEY, '--reconnect-grace-ms', '300', '--presence-debounce-ms', '50']);
  const clients = [];
  const open = (user) => { const p = connect(srv, user); clients.push(p); return p; };
  try {
    const ch = `private-${uniq('blkev')}`;
    const [u, v, w] = [uniq('blocker'), uniq('blocked'), uniq('other')];
    const r = await adminRequest(srv, 'PUT', `/v1/admin/users/${u}/blocks/${v}`, { key: ADMIN_KEY });
    assert.equal(r.status, 200, r.text);
    const [pu, pv, pw] = [open(u), open(v), open(w)];
    // A socket's user comes from its presence subscription (or signin): each
    // subscribes to a presence channel first, then to the private one.
    const lobby = `presence-${uniq('lobby')}`;
    await Promise.all([pu, pv, pw].map((p) => subscribed(p.subscribe(lobby))));
    const [cu, cv, cw] = [pu.subscribe(ch), pv.subscribe(ch), pw.subscribe(ch)];
    await Promise.all([subscribed(cu), subscribed(cv), subscribed(cw)]);
    const seen = { v: [], w: [], u: [] };
    cv.bind('client-ping', (d) => seen.v.push(d.from));
    cw.bind('client-ping', (d) => seen.w.push(d.from));
    cu.bind('client-ping', (d) => seen.u.push(d.from));
    assert.equal(cu.trigger('client-ping', { from: 'u' }), true);
    assert.equal(cw.trigger('client-ping', { from: 'w' }), true);
    await waitUntil(() => seen.w.length === 1 && seen.v.length === 1 && seen.u.length === 1, 'the client events');
    await sleep(300);
    assert.deepEqual(seen.v, ['w'], 'nothing from the blocker');
    assert.deepEqual(seen.w, ['u']);
  } finally {
    for (const p of clients) p.disconnect();
    await stopClean(srv, assert);
  }
});
