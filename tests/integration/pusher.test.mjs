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

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');
if (process.env.PUSHER_LOG) PusherClient.logToConsole = true;

const APP = { id: '4711', key: 'test-key-1', secret: 'test-secret-1' };
const FLAGS = ['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
  '--reconnect-grace-ms', '500', '--presence-debounce-ms', '50', '--session-ttl-ms', '4000',
  '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000'];

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

function connected(p) {
  return new Promise((resolve, reject) => {
    if (p.connection.state === 'connected') return resolve(p.connection.socket_id);
    p.connection.bind('connected', () => resolve(p.connection.socket_id));
    p.connection.bind('failed', () => reject(new Error('failed')));
  });
}

function subscribed(ch, ms = 5000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no subscription_succeeded on ${ch.name}`)), ms);
    ch.bind('pusher:subscription_succeeded', (m) => { clearTimeout(t); resolve(m); });
    ch.bind('pusher:subscription_error', (e) => { clearTimeout(t); reject(new Error(`subscription_error ${JSON.stringify(e)}`)); });
  });
}

// Records the member events a presence channel sees.
function recordMembers(ch) {
  const log = [];
  ch.bind('pusher:member_added', (m) => log.push(['added', m.id, m.info]));
  ch.bind('pusher:member_removed', (m) => log.push(['removed', m.id]));
  return log;
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
    const big = await api.trigger(chName, 'headline', 'x'.repeat(11000)).catch((e) => e);
    assert.equal(big.status, 413);
    await sleep(200);
    assert.equal(gotB.length, 2, 'nothing refused was delivered');
    a.disconnect();
    b.disconnect();
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
  await assert.rejects(startServer(['--pusher-app', '1:k:s,2:k2:s2']), /one Pusher app/);
});
