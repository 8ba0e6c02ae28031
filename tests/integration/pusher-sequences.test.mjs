// Scenarios ported from pusher-js's own integration specs (spec/javascripts/
// integration/core/pusher_spec/test_builder.js: subscribe/unsubscribe
// sequences issued back to back, member data/count, client events to
// others only) and soketi's presence and HTTP API tests, rewritten for
// node:test against presenced: pusher-js 8 as the client, the `pusher`
// server library as the back end. Each sequence ends subscribed or not; a
// REST event sent afterwards must arrive exactly when it ends subscribed,
// on a public, a private and a presence channel.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');

const APP = { id: '4713', key: 'seq-key-1', secret: 'seq-secret-1' };
let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// The sequences of test_builder.js, and whether each ends subscribed.
const SEQUENCES = [
  ['sub', true],
  ['sub-unsub', false],
  ['sub-unsub-sub', true],
  ['sub-sub', true],
  ['sub-sub-unsub', false],
  ['sub-unsub-unsub', false],
  ['sub-unsub-sub-unsub', false],
  ['sub-unsub-sub-sub', true],
  ['sub-sub-unsub-sub', true],
  ['unsub-sub', true],
];

describe('pusher-js subscribe/unsubscribe sequences (ported from pusher-js)', () => {
  let srv, api;
  before(async () => {
    srv = await startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
      '--reconnect-grace-ms', '300', '--presence-debounce-ms', '50']);
    api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
      host: '127.0.0.1', port: String(srv.port), useTLS: false });
  });
  after(async () => { await stopClean(srv, assert); });

  function client(user) {
    return new PusherClient(APP.key, {
      cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
      enabledTransports: ['ws'], disableStats: true,
      channelAuthorization: {
        customHandler: ({ socketId, channelName }, cb) => cb(null, api.authorizeChannel(socketId, channelName,
          channelName.startsWith('presence-') ? { user_id: user, user_info: { name: user } } : undefined)),
      },
    });
  }
  const connected = (p) => new Promise((r) => {
    if (p.connection.state === 'connected') r();
    else p.connection.bind('connected', r);
  });

  for (const prefix of ['', 'private-', 'presence-']) {
    for (const [seq, ends] of SEQUENCES) {
      test(`${prefix || 'public '}${seq}: ${ends ? 'receives' : 'does not receive'} a REST event`, async () => {
        const p = client(uniq('u'));
        await connected(p);
        const name = `${prefix}${uniq('seq')}`;
        // What reaches the socket, whatever channel object pusher-js keeps.
        const got = [];
        p.connection.bind('message', (m) => { if (m.event === 'ev' && m.channel === name) got.push(m); });
        for (const op of seq.split('-')) {
          if (op === 'sub') p.subscribe(name);
          else p.unsubscribe(name);
        }
        // Wait for the server to have seen the last operation: a channel
        // that ends subscribed has its subscription_succeeded; one that
        // does not gets a round trip (a ping) before the event is sent.
        if (ends) {
          await waitUntil(() => p.channel(name)?.subscribed, 'subscribed');
        } else {
          await sleep(300);
        }
        await api.trigger(name, 'ev', { i: 1 });
        if (ends) await waitUntil(() => got.length > 0, 'the event');
        else await sleep(400);
        assert.equal(got.length, ends ? 1 : 0);
        p.disconnect();
      });
    }
  }

  test('member data and count, client events reach the others only (ported from pusher-js)', async () => {
    const ch = `presence-${uniq('members')}`;
    const a = client('seq-a');
    const b = client('seq-b');
    const ca = a.subscribe(ch);
    await new Promise((r) => ca.bind('pusher:subscription_succeeded', r));
    const added = new Promise((r) => ca.bind('pusher:member_added', r));
    const cb = b.subscribe(ch);
    await new Promise((r) => cb.bind('pusher:subscription_succeeded', r));
    const m = await added;
    assert.equal(m.id, 'seq-b');
    assert.deepEqual(m.info, { name: 'seq-b' });
    assert.equal(ca.members.count, 2);
    assert.deepEqual(cb.members.me, { id: 'seq-b', info: { name: 'seq-b' } });
    const atA = [], atB = [];
    ca.bind('client-hi', (d) => atA.push(d));
    cb.bind('client-hi', (d) => atB.push(d));
    assert.equal(ca.trigger('client-hi', { from: 'a' }), true);
    await waitUntil(() => atB.length === 1, 'b gets a\'s client event');
    await sleep(200);
    assert.deepEqual(atA, []);
    const removed = new Promise((r) => ca.bind('pusher:member_removed', r));
    b.disconnect();
    assert.equal((await removed).id, 'seq-b');
    assert.equal(ca.members.count, 1);
    a.disconnect();
  });

  test('the HTTP API reads what pusher-js subscribed (ported from soketi): user_count and users', async () => {
    const ch = `presence-${uniq('api')}`;
    const a = client('api-a');
    const a2 = client('api-a'); // two sockets, one user
    const b = client('api-b');
    for (const p of [a, a2, b]) {
      const c = p.subscribe(ch);
      await new Promise((r) => c.bind('pusher:subscription_succeeded', r));
    }
    const info = await (await api.get({ path: `/channels/${ch}`, params: { info: 'user_count' } })).json();
    assert.deepEqual(info, { occupied: true, user_count: 2 });
    const users = await (await api.get({ path: `/channels/${ch}/users` })).json();
    assert.deepEqual(users.users.map((u) => u.id).sort(), ['api-a', 'api-b']);
    for (const p of [a, a2, b]) p.disconnect();
    await waitUntil(async () => (await (await api.get({ path: `/channels/${ch}` })).json()).occupied === false,
      'vacated after the grace', 5000);
  });
});
