// The occupancy of Pusher channels, with the real libraries: pusher-js 8
// subscribers on public, private and presence channels spread over two
// workers, and the `pusher` server library reading GET /channels (with
// filter_by_prefix and info=user_count) and GET /channels/{name} (with
// info=subscription_count and user_count) — compared with what the
// subscribers did; pusher_internal:subscription_count reaching pusher-js
// (an app with subscription-count=true, none without it); and the
// channel_occupied / channel_vacated webhooks of channels that are not
// presence channels, verified by the library's WebHook.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { adminRequest } from './lib/admin.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');

const APP = { id: '4720', key: 'count-key-1', secret: 'count-secret-1' };
const ADMIN_KEY = 'pusher-count-admin-key-0123456789';
const TIMING = ['--reconnect-grace-ms', '300', '--presence-debounce-ms', '50',
  '--session-ttl-ms', '4000', '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000',
  '--admin-api-key', ADMIN_KEY];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

function backend(srv) {
  return new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
}

function connect(srv, user = 'u') {
  const api = backend(srv);
  return new PusherClient(APP.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) => {
        const data = channelName.startsWith('presence-') ? { user_id: user, user_info: {} } : undefined;
        cb(null, api.authorizeChannel(socketId, channelName, data));
      },
    },
  });
}

function subscribed(ch, ms = 5000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no subscription_succeeded on ${ch.name}`)), ms);
    ch.bind('pusher:subscription_succeeded', (m) => { clearTimeout(t); resolve(m); });
    ch.bind('pusher:subscription_error', (e) => { clearTimeout(t); reject(new Error(`subscription_error ${JSON.stringify(e)}`)); });
  });
}

// GET through the server library: [status, body].
async function get(srv, path, params) {
  try {
    const r = await backend(srv).get({ path, params });
    return [r.status, await r.json()];
  } catch (e) {
    return [e.status, e.body];
  }
}

// Several pusher-js sockets (the server has two workers: they land on both).
async function sockets(srv, k, users) {
  const ps = [];
  for (let i = 0; i < k; i++) ps.push(connect(srv, users ? users[i] : `u${i}`));
  return ps;
}

describe('pusher channel occupancy', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--workers', '2', '--pusher-app',
      `${APP.id}:${APP.key}:${APP.secret}:subscription-count=true`, ...TIMING]);
  });
  after(async () => { await stopClean(srv, assert); });

  test('channels/{name}: subscription_count and occupied follow the subscribers of a public and a private channel', async () => {
    const pub = uniq('news');
    const priv = `private-${uniq('ops')}`;
    assert.deepEqual(await get(srv, `/channels/${pub}`, { info: 'subscription_count' }),
      [200, { occupied: false, subscription_count: 0 }]);
    const ps = await sockets(srv, 3);
    try {
      await Promise.all(ps.map((p) => subscribed(p.subscribe(pub))));
      await Promise.all(ps.slice(0, 2).map((p) => subscribed(p.subscribe(priv))));
      await waitUntil(async () => (await get(srv, `/channels/${pub}`, { info: 'subscription_count' }))[1].subscription_count === 3, '3 on the public channel');
      assert.deepEqual(await get(srv, `/channels/${pub}`, { info: 'subscription_count' }), [200, { occupied: true, subscription_count: 3 }]);
      assert.deepEqual(await get(srv, `/channels/${pub}`), [200, { occupied: true }]);
      await waitUntil(async () => (await get(srv, `/channels/${priv}`, { info: 'subscription_count' }))[1].subscription_count === 2, '2 on the private channel');
      ps[0].unsubscribe(pub);
      await waitUntil(async () => (await get(srv, `/channels/${pub}`, { info: 'subscription_count' }))[1].subscription_count === 2, 'an unsubscribe counts');
      ps[1].disconnect();
      await waitUntil(async () => (await get(srv, `/channels/${pub}`, { info: 'subscription_count' }))[1].subscription_count === 1, 'a closed socket counts');
      // each channel's count has its own owner: the private one may come a moment later
      await waitUntil(async () => (await get(srv, `/channels/${priv}`, { info: 'subscription_count' }))[1].subscription_count === 1, 'on the private channel too');
      assert.deepEqual(await get(srv, `/channels/${priv}`, { info: 'subscription_count' }), [200, { occupied: true, subscription_count: 1 }]);
      ps[2].disconnect();
      ps[0].disconnect();
      await waitUntil(async () => (await get(srv, `/channels/${pub}`, { info: 'subscription_count' }))[1].occupied === false, 'vacated');
      assert.deepEqual(await get(srv, `/channels/${pub}`, { info: 'subscription_count' }), [200, { occupied: false, subscription_count: 0 }]);
      assert.deepEqual(await get(srv, `/channels/${priv}`), [200, { occupied: false }]);
    } finally {
      ps.forEach((p) => p.disconnect());
    }
  });

  test('channels/{name} of a presence channel: user_count counts users, subscription_count sockets; a hidden member is neither', async () => {
    const ch = `presence-${uniq('doc')}`;
    const [ann, bob] = [uniq('ann'), uniq('bob')];
    const ps = await sockets(srv, 3, [ann, ann, bob]);
    try {
      await Promise.all(ps.map((p) => subscribed(p.subscribe(ch))));
      const info = { info: 'user_count,subscription_count' };
      await waitUntil(async () => (await get(srv, `/channels/${ch}`, info))[1].subscription_count === 3, 'three sockets');
      assert.deepEqual(await get(srv, `/channels/${ch}`, info), [200, { occupied: true, user_count: 2, subscription_count: 3 }]);
      await adminRequest(srv, 'PUT', `/v1/admin/users/${bob}/privacy`, { key: ADMIN_KEY, body: { invisible: true } });
      await waitUntil(async () => (await get(srv, `/channels/${ch}`, info))[1].user_count === 1, 'bob hidden');
      assert.deepEqual(await get(srv, `/channels/${ch}`, info), [200, { occupied: true, user_count: 1, subscription_count: 2 }]);
      assert.equal((await get(srv, `/channels/private-x`, { info: 'user_count' }))[0], 400, 'user_count of a private channel');
    } finally {
      ps.forEach((p) => p.disconnect());
    }
  });

  test('GET channels lists the occupied channels; filter_by_prefix and info=user_count as on Pusher', async () => {
    const tag = uniq('ls').replace(/-/g, '');
    const pub = `${tag}-pub`;
    const priv = `private-${tag}-priv`;
    const pres = `presence-${tag}-room`;
    const hidden = `presence-${tag}-hidden`;
    const [ann, bob, cat] = [uniq('ann'), uniq('bob'), uniq('cat')];
    await adminRequest(srv, 'PUT', `/v1/admin/users/${cat}/privacy`, { key: ADMIN_KEY, body: { invisible: true } });
    const ps = await sockets(srv, 3, [ann, bob, cat]);
    try {
      await Promise.all([
        subscribed(ps[0].subscribe(pub)), subscribed(ps[1].subscribe(priv)),
        subscribed(ps[0].subscribe(pres)), subscribed(ps[1].subscribe(pres)),
        subscribed(ps[2].subscribe(hidden)),
      ]);
      const mine = (body) => Object.fromEntries(Object.entries(body.channels).filter(([k]) => k.includes(tag)));
      await waitUntil(async () => Object.keys(mine((await get(srv, '/channels'))[1])).length === 3, 'three channels listed');
      const [st, all] = await get(srv, '/channels');
      assert.equal(st, 200);
      assert.deepEqual(mine(all), { [pub]: {}, [priv]: {}, [pres]: {} }, 'the hidden member\'s channel is not occupied');
      assert.deepEqual((await get(srv, '/channels', { filter_by_prefix: 'private-' }))[1].channels[priv], {});
      assert.equal((await get(srv, '/channels', { filter_by_prefix: 'private-' }))[1].channels[pub], undefined);
      assert.deepEqual(await get(srv, '/channels', { filter_by_prefix: `presence-${tag}`, info: 'user_count' }),
        [200, { channels: { [pres]: { user_count: 2 } } }]);
      assert.equal((await get(srv, '/channels', { info: 'user_count' }))[0], 400, 'user_count needs a presence- prefix');
      assert.equal((await get(srv, '/channels', { filter_by_prefix: 'private-', info: 'user_count' }))[0], 400);
      ps[0].unsubscribe(pub);
      await waitUntil(async () => mine((await get(srv, '/channels'))[1])[pub] === undefined, 'an emptied channel leaves the list');
    } finally {
      ps.forEach((p) => p.disconnect());
    }
  });

  test('pusher_internal:subscription_count reaches pusher-js subscribers of a public channel as the count changes', async () => {
    const ch = uniq('live');
    const ps = await sockets(srv, 3);
    const seen = [[], [], []];
    try {
      const chans = ps.map((p) => p.subscribe(ch));
      chans.forEach((c, i) => c.bind('pusher:subscription_count', (d) => seen[i].push(d.subscription_count)));
      await Promise.all(chans.map((c) => subscribed(c)));
      await waitUntil(() => seen.every((s) => s.at(-1) === 3), 'every subscriber sees 3');
      assert.equal(chans[0].subscriptionCount, 3, 'pusher-js keeps the count');
      ps[2].disconnect();
      await waitUntil(() => seen[0].at(-1) === 2 && seen[1].at(-1) === 2, 'the others see 2');
      // The server-to-user and presence channels get none (as on Pusher).
      const pres = ps[0].subscribe(`presence-${ch}`);
      const got = [];
      pres.bind('pusher:subscription_count', (d) => got.push(d));
      await subscribed(pres);
      await sleep(400);
      assert.deepEqual(got, [], 'no subscription_count on a presence channel');
    } finally {
      ps.forEach((p) => p.disconnect());
    }
  });
});

test('without subscription-count=true no pusher_internal:subscription_count is sent', async () => {
  const srv = await startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}`, ...TIMING]);
  const ps = await sockets(srv, 2);
  try {
    const frames = [];
    ps[0].connection.bind('message', (m) => frames.push(m.event));
    const chans = ps.map((p) => p.subscribe('quiet'));
    await Promise.all(chans.map((c) => subscribed(c)));
    await waitUntil(async () => (await get(srv, '/channels/quiet', { info: 'subscription_count' }))[1].subscription_count === 2, 'counted');
    await sleep(400);
    assert.ok(frames.includes('pusher_internal:subscription_succeeded'), `the listener sees internal events: ${frames}`);
    assert.ok(!frames.includes('pusher_internal:subscription_count'), frames.join(','));
  } finally {
    ps.forEach((p) => p.disconnect());
    await stopClean(srv, assert);
  }
});

test('pusher-app: subscription-count takes true or false only', async () => {
  await assert.rejects(startServer(['--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:subscription-count=yes`]),
    /subscription-count=true\|false/);
});

test('webhooks: channel_occupied and channel_vacated of public and private channels, once per transition', async () => {
  const rec = { got: [] };
  const hookSrv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => { rec.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString() }); res.end('ok'); });
  });
  await new Promise((ok) => hookSrv.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${hookSrv.address().port}/pusher`;
  const srv = await startServer(['--workers', '2', '--pusher-app',
    `${APP.id}:${APP.key}:${APP.secret}:webhook=${url}`, ...TIMING]);
  const events = () => {
    const api = backend(srv);
    return rec.got.flatMap((g) => {
      const hook = api.webhook({ headers: g.headers, rawBody: g.body });
      assert.ok(hook.isValid(), 'a webhook with a bad signature');
      return hook.getEvents();
    });
  };
  const ps = await sockets(srv, 3);
  try {
    const pub = uniq('feed');
    const priv = `private-${uniq('feed')}`;
    await Promise.all(ps.map((p) => subscribed(p.subscribe(pub))));
    await subscribed(ps[0].subscribe(priv));
    const of = (ch) => events().filter((e) => e.channel === ch).map((e) => e.name);
    await waitUntil(() => of(pub).length >= 1 && of(priv).length >= 1, 'occupied sent', 3000);
    ps[0].unsubscribe(pub);
    ps[1].disconnect();
    await sleep(500);
    assert.deepEqual(of(pub), ['channel_occupied'], 'three subscribers, one still there: one occupied, no vacated');
    ps[2].disconnect();
    ps[0].unsubscribe(priv);
    await waitUntil(() => of(pub).length === 2 && of(priv).length === 2, 'vacated sent', 3000);
    assert.deepEqual(of(pub), ['channel_occupied', 'channel_vacated']);
    assert.deepEqual(of(priv), ['channel_occupied', 'channel_vacated']);
    assert.ok(!events().some((e) => e.channel.startsWith('#')), 'no server-to-user channels');
  } finally {
    ps.forEach((p) => p.disconnect());
    await stopClean(srv, assert);
    await new Promise((ok) => hookSrv.close(ok));
  }
});
