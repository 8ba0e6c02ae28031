// Webhooks, checked by the real verifiers: the `pusher` server library's
// WebHook (X-Pusher-Key / X-Pusher-Signature over the raw body) for a
// Pusher app's endpoint, and the `standardwebhooks` library (webhook-id /
// -timestamp / -signature) for the native endpoint. A local receiver on
// loopback records every request; it can be told to fail, so retries are
// seen as the same body (Pusher) or the same webhook-id (Standard) again.
// Covered: channel_occupied / member_added once per user (two tabs are one
// member) / client_event with user_id / member_removed after the grace /
// channel_vacated; batching (several events in one signed request);
// user.online, room.occupied, member.joined, member.left, room.vacated and
// user.offline in order, with ids, versions and seqs; a reload inside the
// grace sends nothing; an invisible user sends nothing; retries after a
// 500; a 410 disables the endpoint (counted in /metrics); configuration
// errors refused at start.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');
const { Webhook } = require('standardwebhooks');

const APP = { id: '4712', key: 'hook-key-1', secret: 'hook-secret-1' };
const SECRET = `whsec_${Buffer.from('presenced-webhook-test-key-0123456789').toString('base64')}`;
const ADMIN_KEY = 'webhook-test-admin-key-0123456789';
const TIMING = ['--reconnect-grace-ms', '500', '--presence-debounce-ms', '50', '--session-ttl-ms', '4000',
  '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// A receiver: every request's headers and raw body; `answer` decides the
// status of each (default 200).
async function receiver() {
  const r = { got: [], answer: () => 200 };
  r.server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      const entry = { url: req.url, headers: req.headers, body };
      r.got.push(entry);
      res.statusCode = r.answer(entry);
      res.end('ok');
    });
  });
  await new Promise((ok) => r.server.listen(0, '127.0.0.1', ok));
  r.url = (p) => `http://127.0.0.1:${r.server.address().port}${p}`;
  r.close = () => new Promise((ok) => r.server.close(ok));
  return r;
}

function backend(srv) {
  return new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
}

function pusherClient(srv, user) {
  const api = backend(srv);
  return new PusherClient(APP.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) =>
        cb(null, api.authorizeChannel(socketId, channelName, { user_id: user, user_info: { name: user } })),
    },
  });
}

function subscribed(ch) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no subscription_succeeded on ${ch.name}`)), 5000);
    ch.bind('pusher:subscription_succeeded', (m) => { clearTimeout(t); resolve(m); });
  });
}

// Every event of the verified Pusher requests, in arrival order; a request
// whose signature does not verify fails the test.
function pusherEvents(srv, rec) {
  const api = backend(srv);
  const out = [];
  for (const g of rec.got) {
    const hook = api.webhook({ headers: g.headers, rawBody: g.body });
    assert.ok(hook.isValid(), `a webhook with a bad signature: ${JSON.stringify(g.headers)}`);
    for (const e of hook.getEvents()) out.push(e);
  }
  return out;
}

const counts = (evs, pred) => evs.filter(pred).length;

describe('pusher webhooks', () => {
  let srv, rec;
  before(async () => {
    rec = await receiver();
    srv = await startServer(['--workers', '2', ...TIMING,
      '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true:webhook=${rec.url('/pusher')}`]);
  });
  after(async () => { await stopClean(srv, assert); await rec.close(); });

  test('occupied, member_added once per user, client_event, member_removed, vacated', async () => {
    const ch = `presence-${uniq('hook')}`;
    const ann = pusherClient(srv, 'ann');
    const ann2 = pusherClient(srv, 'ann'); // a second tab: the same member
    const bob = pusherClient(srv, 'bob');
    const chA = ann.subscribe(ch);
    await subscribed(chA);
    await subscribed(ann2.subscribe(ch));
    const chB = bob.subscribe(ch);
    await subscribed(chB);
    chA.trigger('client-wave', { hi: 1 });
    const mine = () => pusherEvents(srv, rec).filter((e) => e.channel === ch);
    await waitUntil(() => counts(mine(), (e) => e.name === 'client_event') === 1 &&
      counts(mine(), (e) => e.name === 'member_added') === 2, 'occupied, two member_added, the client event');
    ann2.disconnect(); // one of ann's tabs: no member_removed
    bob.disconnect();
    await waitUntil(() => counts(mine(), (e) => e.name === 'member_removed') >= 1, 'bob removed', 5000);
    await sleep(800); // past the grace: ann's closed tab must not have removed her
    assert.deepEqual(mine().filter((e) => e.name === 'member_removed').map((e) => e.user_id), ['bob']);
    ann.disconnect();
    await waitUntil(() => counts(mine(), (e) => e.name === 'channel_vacated') === 1, 'vacated', 5000);
    const evs = mine();
    assert.deepEqual(evs.map((e) => e.name), ['channel_occupied', 'member_added', 'member_added',
      'client_event', 'member_removed', 'member_removed', 'channel_vacated']);
    assert.deepEqual(evs.filter((e) => e.name === 'member_added').map((e) => e.user_id), ['ann', 'bob']);
    const ce = evs.find((e) => e.name === 'client_event');
    assert.equal(ce.event, 'client-wave');
    assert.equal(ce.user_id, 'ann');
    assert.deepEqual(JSON.parse(ce.data), { hi: 1 });
    assert.match(ce.socket_id, /^\d+\.\d+$/);
    // Batched: fewer requests than events, each a time_ms and an events array.
    for (const g of rec.got) assert.equal(typeof JSON.parse(g.body).time_ms, 'number');
  });

  test('a failed request is sent again with the same signed body', async () => {
    const ch = `presence-${uniq('retry')}`;
    const before = rec.got.length;
    let failed = 0;
    rec.answer = () => (failed++ === 0 ? 500 : 200);
    const c = pusherClient(srv, 'cat');
    await subscribed(c.subscribe(ch));
    await waitUntil(() => rec.got.length >= before + 2, 'the retry', 8000);
    rec.answer = () => 200;
    const [first, second] = rec.got.slice(before, before + 2);
    assert.equal(first.body, second.body);
    assert.equal(first.headers['x-pusher-signature'], second.headers['x-pusher-signature']);
    assert.ok(pusherEvents(srv, { got: [second] }).some((e) => e.name === 'member_added' && e.user_id === 'cat'));
    const m = await (await fetch(`${srv.url}/metrics`)).text();
    assert.match(m, /presenced_webhooks_failed_total\{[^}]*\} [1-9]/);
    c.disconnect();
  });
});

describe('standard webhooks (native)', () => {
  let srv, rec;
  const wh = new Webhook(SECRET);
  before(async () => {
    rec = await receiver();
    srv = await startServer(['--workers', '2', ...TIMING, '--admin-api-key', ADMIN_KEY,
      '--webhook-url', rec.url('/native'), '--webhook-secret', SECRET]);
  });
  after(async () => { await stopClean(srv, assert); await rec.close(); });

  // The verified events (each request one), in arrival order.
  function events() {
    return rec.got.map((g) => {
      const payload = wh.verify(g.body, g.headers); // throws on a bad signature
      assert.equal(payload.data.id, g.headers['webhook-id']);
      return payload;
    });
  }
  const about = (user, room) => events().filter((e) => e.data.user === user || (room && e.data.room === room));

  test('online, occupied, joined, left, vacated, offline: in order, signed, with ids and seqs', async () => {
    const user = uniq('u');
    const room = uniq('r');
    const c = await Client.open(srv, { user });
    c.send({ type: 'join', room, meta: { x: 1 }, ref: 'j' });
    await c.next((m) => m.type === 'room_joined');
    await waitUntil(() => about(user, room).length >= 3, 'online, occupied, joined');
    c.send({ type: 'leave', room, ref: 'l' });
    await waitUntil(() => about(user, room).length >= 5, 'left, vacated');
    await c.close();
    await waitUntil(() => about(user, room).length >= 6, 'offline after the grace', 5000);
    // A user's events come in order, and a room's: the two come from
    // different workers, so only their versions and seqs order them.
    const evs = about(user, room);
    const userEvs = evs.filter((e) => e.type.startsWith('user.'));
    const roomEvs = evs.filter((e) => e.data.room === room);
    assert.deepEqual(userEvs.map((e) => e.type), ['user.online', 'user.offline']);
    assert.deepEqual(roomEvs.map((e) => e.type), ['room.occupied', 'member.joined', 'member.left', 'room.vacated']);
    assert.equal(new Set(evs.map((e) => e.data.id)).size, 6);
    assert.ok(userEvs[1].data.version > userEvs[0].data.version);
    assert.equal(roomEvs[1].data.user, user);
    for (let i = 1; i < roomEvs.length; i++) {
      assert.equal(roomEvs[i].data.epoch, roomEvs[0].data.epoch);
      assert.ok(roomEvs[i].data.seq >= roomEvs[i - 1].data.seq);
    }
    assert.ok(roomEvs[3].data.seq > roomEvs[0].data.seq);
    assert.ok(Math.abs(Date.parse(evs[0].timestamp) - Date.now()) < 60000);
  });

  test('a reload inside the grace sends nothing; an invisible user sends nothing', async () => {
    const user = uniq('reload');
    const c = await Client.open(srv, { user });
    await waitUntil(() => about(user).length === 1, 'online');
    const sid = c.welcome.sessionId;
    await c.kill();
    const c2 = await Client.open(srv, { user, resume: sid });
    await sleep(900); // past the grace
    assert.deepEqual(about(user).map((e) => e.type), ['user.online']);
    await c2.close();
    await waitUntil(() => about(user).length === 2, 'offline');

    const ghost = uniq('ghost');
    await adminOk(srv, ADMIN_KEY, 'PUT', `/v1/admin/users/${ghost}/privacy`, { invisible: true });
    const g = await Client.open(srv, { user: ghost });
    g.send({ type: 'join', room: uniq('gr'), ref: 'j' });
    await g.next((m) => m.type === 'room_joined');
    await sleep(400);
    await g.close();
    await sleep(800);
    assert.deepEqual(about(ghost), []);
  });

  test('a retried event keeps its webhook-id and gets a fresh signature', async () => {
    const user = uniq('retry');
    const before = rec.got.length;
    let calls = 0;
    rec.answer = () => (calls++ === 0 ? 503 : 200);
    const c = await Client.open(srv, { user });
    await waitUntil(() => rec.got.length >= before + 2, 'the retry after 5 s', 9000);
    rec.answer = () => 200;
    const [a, b] = rec.got.slice(before, before + 2);
    assert.equal(a.headers['webhook-id'], b.headers['webhook-id']);
    assert.equal(a.body, b.body);
    wh.verify(b.body, b.headers);
    await c.close();
  });
});

describe('webhook endpoint failures and configuration', () => {
  test('410 Gone disables the endpoint: counted, nothing more is sent', async () => {
    const rec = await receiver();
    rec.answer = () => 410;
    const srv = await startServer([...TIMING, '--webhook-url', rec.url('/gone'), '--webhook-secret', SECRET]);
    try {
      const a = await Client.open(srv, { user: 'gone-a' });
      await waitUntil(() => rec.got.length === 1, 'the first event');
      await waitUntil(async () => /presenced_webhook_endpoints_disabled_total\{[^}]*\} 1/.test(
        await (await fetch(`${srv.url}/metrics`)).text()), 'disabled in /metrics');
      const b = await Client.open(srv, { user: 'gone-b' });
      await sleep(300);
      assert.equal(rec.got.length, 1);
      assert.match(await (await fetch(`${srv.url}/metrics`)).text(), /presenced_webhooks_dropped_total\{[^}]*\} [1-9]/);
      await a.close();
      await b.close();
    } finally {
      await stopClean(srv, assert);
      await rec.close();
    }
  });

  for (const [flags, re] of [
    [['--webhook-url', 'http://127.0.0.1:9/x'], /webhook-url and webhook-secret go together/],
    [['--webhook-url', 'https://127.0.0.1:9/x', '--webhook-secret', SECRET], /https|scheme|TLS/i],
    [['--webhook-url', 'http://127.0.0.1:9/x', '--webhook-secret', 'short'], /webhook-secret/],
    [['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:webhook=`], /webhook= needs a URL/],
  ]) {
    test(`refused at start: ${flags.join(' ')}`, async () => {
      await assert.rejects(startServer(flags), (e) => {
        assert.match(e.message, /server exited 2/);
        assert.match(e.message, re);
        return true;
      });
    });
  }
});
