// Laravel Echo 2.5.0 (its Pusher connector, over pusher-js 8's Node build)
// against presenced with --pusher-app, as a Laravel front end uses it: the
// channel authorizer is the app's back end, here the `pusher` server
// library signing with the app secret, and events come from the HTTP API
// through the same library (as Laravel's broadcaster sends them).
//  - Echo.join(): here() lists both users with their user_info, joining()
//    and leaving() fire once for the other user, the latter after
//    Echo.leave() (an unsubscribe on an open socket) and after a closed
//    socket's reconnect grace.
//  - Echo.private().listen(): an event triggered through the HTTP API, by
//    its dotted name and by Laravel's namespaced class name (App\Events\…,
//    backslashes in the event name).
//  - whisper()/listenForWhisper() between two clients on a private channel
//    (client events: the app has client-events=true), not echoed.
//  - a channel authorization signed with the wrong secret reaches Echo's
//    error() callback with status 401, and nothing of the channel arrives.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import Echo from 'laravel-echo';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';

const require = createRequire(import.meta.url);
const Pusher = require('pusher-js');
const PusherServer = require('pusher');
if (process.env.PUSHER_LOG) Pusher.logToConsole = true;

const APP = { id: '4712', key: 'echo-key-1', secret: 'echo-secret-1' };
const GRACE = 500;
const FLAGS = ['--workers', '2', '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
  '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '50'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

function backend(srv, secret = APP.secret) {
  return new PusherServer({ appId: APP.id, key: APP.key, secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
}

// An Echo instance for `user` whose authorizer signs as the app's back end
// would (Laravel's /broadcasting/auth): presence data on presence channels.
// `secret` lets a test sign with the wrong one.
function echoFor(srv, user, { name = user, secret = APP.secret } = {}) {
  const api = backend(srv, secret);
  const echo = new Echo({
    broadcaster: 'pusher', Pusher, key: APP.key, cluster: 'mt1',
    wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false, enabledTransports: ['ws'], disableStats: true,
    authorizer: (channel) => ({
      authorize: (socketId, cb) => {
        const data = channel.name.startsWith('presence-') ? { user_id: user, user_info: { id: user, name } } : undefined;
        try { cb(null, api.authorizeChannel(socketId, channel.name, data)); } catch (e) { cb(e, null); }
      },
    }),
  });
  return echo;
}

// Resolves when the Echo channel is subscribed; rejects on its error().
function subscribed(channel, ms = 5000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no subscription of ${channel.name} within ${ms} ms`)), ms);
    channel.subscribed(() => { clearTimeout(t); resolve(); });
    channel.error((e) => { clearTimeout(t); reject(new Error(`error on ${channel.name}: ${JSON.stringify(e)}`)); });
  });
}

const ids = (members) => members.map((m) => m.id).sort();

describe('laravel-echo (pusher connector)', () => {
  let srv;
  const open = [];
  const make = (...a) => { const e = echoFor(srv, ...a); open.push(e); return e; };
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => {
    for (const e of open) e.disconnect();
    await stopClean(srv, assert);
  });

  test('join: here() lists both users, joining() and leaving() after Echo.leave() fire once for the other', async () => {
    const room = uniq('room');
    const [ann, bob] = [uniq('ann'), uniq('bob')];
    const ea = make(ann, { name: 'Ann' });
    const hereA = [];
    const joinedA = [];
    const leftA = [];
    const chA = ea.join(room)
      .here((m) => hereA.push(m))
      .joining((m) => joinedA.push(m))
      .leaving((m) => leftA.push(m));
    await waitUntil(() => hereA.length === 1, 'here() at ann');
    assert.deepEqual(hereA[0], [{ id: ann, name: 'Ann' }]);
    assert.equal(chA.name, `presence-${room}`);

    const eb = make(bob, { name: 'Bob' });
    const hereB = [];
    const joinedB = [];
    eb.join(room).here((m) => hereB.push(m)).joining((m) => joinedB.push(m));
    await waitUntil(() => hereB.length === 1, 'here() at bob');
    assert.deepEqual(ids(hereB[0]), [ann, bob].sort());
    assert.deepEqual(hereB[0].find((m) => m.id === ann), { id: ann, name: 'Ann' });
    await waitUntil(() => joinedA.length === 1, 'joining() of bob at ann');
    assert.deepEqual(joinedA, [{ id: bob, name: 'Bob' }]);

    eb.leave(room);
    await waitUntil(() => leftA.length === 1, 'leaving() of bob at ann after Echo.leave()', 3000);
    assert.deepEqual(leftA, [{ id: bob, name: 'Bob' }]);
    assert.equal(eb.connectionStatus(), 'connected', 'Echo.leave() leaves the channel, not the connection');
    await sleep(GRACE + 300);
    assert.equal(leftA.length, 1, 'leaving() once');
    assert.deepEqual(joinedA.length, 1, 'no second joining()');
    assert.deepEqual(joinedB, [], 'bob saw nobody join after him');
    assert.deepEqual(hereA.length, 1, 'here() only at the subscription');
  });

  test('join: a user whose socket closes is leaving() for the other after the reconnect grace', async () => {
    const room = uniq('room');
    const [ann, bob] = [uniq('ann'), uniq('bob')];
    const ea = make(ann);
    const leftA = [];
    const joinedA = [];
    const chA = ea.join(room).joining((m) => joinedA.push(m)).leaving((m) => leftA.push(m));
    await subscribed(chA);
    const eb = make(bob);
    await subscribed(eb.join(room));
    await waitUntil(() => joinedA.length === 1, 'joining() of bob');
    const t0 = Date.now();
    eb.disconnect();
    await waitUntil(() => leftA.length === 1, 'leaving() of bob after his socket closed', 4000);
    assert.ok(Date.now() - t0 >= GRACE - 50, `leaving() after ${Date.now() - t0} ms, before the ${GRACE} ms grace`);
    assert.equal(leftA[0].id, bob);
  });

  test('private: listen() receives events triggered through the HTTP API, by dotted and by namespaced name', async () => {
    const name = uniq('orders');
    const ea = make(uniq('ann'));
    const got = [];
    const ch = ea.private(name)
      .listen('.my-event', (d) => got.push(['my-event', d]))
      .listen('OrderShipped', (d) => got.push(['OrderShipped', d]));
    await subscribed(ch);
    const api = backend(srv);
    const r1 = await api.trigger(`private-${name}`, 'my-event', { text: 'hello' });
    assert.equal(r1.status, 200);
    // Laravel broadcasts an event class by its fully qualified name.
    const r2 = await api.trigger(`private-${name}`, 'App\\Events\\OrderShipped', { order: { id: 7 } });
    assert.equal(r2.status, 200);
    await waitUntil(() => got.length === 2, 'both events at the listener');
    assert.deepEqual(got, [['my-event', { text: 'hello' }], ['OrderShipped', { order: { id: 7 } }]]);
    // An event on another channel does not reach it.
    await api.trigger(`private-${uniq('other')}`, 'my-event', { text: 'elsewhere' });
    await sleep(200);
    assert.equal(got.length, 2);
  });

  test('private: whisper() reaches the other client\'s listenForWhisper(), not the whisperer', async () => {
    const name = uniq('chat');
    const ea = make(uniq('ann'));
    const eb = make(uniq('bob'));
    const gotA = [];
    const gotB = [];
    const chA = ea.private(name).listenForWhisper('typing', (d) => gotA.push(d));
    const chB = eb.private(name).listenForWhisper('typing', (d) => gotB.push(d));
    await Promise.all([subscribed(chA), subscribed(chB)]);
    chA.whisper('typing', { name: 'Ann', typing: true });
    await waitUntil(() => gotB.length === 1, 'the whisper at bob');
    assert.deepEqual(gotB, [{ name: 'Ann', typing: true }]);
    chB.whisper('typing', { name: 'Bob', typing: false });
    await waitUntil(() => gotA.length === 1, 'the whisper at ann');
    assert.deepEqual(gotA, [{ name: 'Bob', typing: false }]);
    await sleep(200);
    assert.equal(gotA.length, 1, 'not echoed to bob');
    assert.equal(gotB.length, 1, 'not echoed to ann');
  });

  test('a channel authorization signed with the wrong secret reaches error() with status 401', async () => {
    const name = uniq('vault');
    const bad = make(uniq('mallory'), { secret: 'not-the-secret' });
    const errs = [];
    const seen = [];
    let ok = false;
    const ch = bad.private(name)
      .subscribed(() => { ok = true; })
      .error((e) => errs.push(e))
      .listen('.my-event', (d) => seen.push(d));
    bad.join(uniq('room')).error((e) => errs.push(e)).here(() => { ok = true; });
    await waitUntil(() => errs.length === 2, 'error() on both channels');
    for (const e of errs) {
      assert.equal(e.status, 401, JSON.stringify(e));
      assert.equal(e.type, 'AuthError', JSON.stringify(e));
    }
    await backend(srv).trigger(ch.name, 'my-event', { secret: true });
    await sleep(300);
    assert.equal(ok, false, 'never subscribed');
    assert.deepEqual(seen, [], 'nothing of the channel arrives');
    assert.equal(bad.connectionStatus(), 'connected', 'a refused channel does not close the connection');
  });
});
