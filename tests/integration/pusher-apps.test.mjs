// Several Pusher apps, each a namespace of its own users and rooms, with
// the real libraries: pusher-js on two apps with the same user id and the
// same channel names, the `pusher` server library against each app's
// HTTP API, a webhook receiver per app verified with each app's own
// secret, and native clients (the first app's namespace by default).
// Nothing of one app may reach the other: members, member_added/removed,
// client events, REST events, channel lists and reads, users,
// terminate_connections, webhooks.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { connected, subscribed, recordMembers, hookReceiver } from './lib/pusherjs.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');
const PusherServer = require('pusher');

const A1 = { id: '101', key: 'ns-key-one', secret: 'ns-secret-one' };
const A2 = { id: 'two2', key: 'ns-key-two', secret: 'ns-secret-two' };
const TIMING = ['--reconnect-grace-ms', '300', '--presence-debounce-ms', '50',
  '--session-ttl-ms', '4000', '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

function backend(srv, app) {
  return new PusherServer({ appId: app.id, key: app.key, secret: app.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
}

function connect(srv, app, user, info = {}) {
  const api = backend(srv, app);
  return new PusherClient(app.key, {
    cluster: 'local', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) => {
        const data = channelName.startsWith('presence-') ? { user_id: user, user_info: info } : undefined;
        cb(null, api.authorizeChannel(socketId, channelName, data));
      },
    },
  });
}

function recordEvents(ch) {
  const log = [];
  ch.bind_global((name, data) => { if (!name.startsWith('pusher')) log.push([name, data]); });
  return log;
}

const membersOf = (m) => { const ids = []; m.each((x) => ids.push([x.id, x.info])); return ids.sort(); };

async function get(srv, app, path, params) {
  try {
    const r = await backend(srv, app).get({ path, params });
    return [r.status, await r.json()];
  } catch (e) {
    return [e.status, e.body];
  }
}

async function raw(srv, key) {
  const ws = new WebSocket(`${srv.wsUrl}/app/${key}?protocol=7&client=js&version=8.6.0`);
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  const first = await waitUntil(() => msgs[0], 'the first frame');
  return { ws, msgs, sid: JSON.parse(first.data).socket_id, send: (o) => ws.send(JSON.stringify(o)) };
}

// A native client on /v1/ws with the query q.
async function nativeAt(srv, q) {
  const c = new Client(new WebSocket(`${srv.wsUrl}/v1/ws?${q}`));
  await new Promise((r, j) => { c.ws.once('open', r); c.ws.once('error', j); });
  c.welcome = await c.next((m) => m.type === 'welcome' || m.type === 'error');
  return c;
}

describe('pusher apps as namespaces', () => {
  let srv, hook1, hook2;
  before(async () => {
    hook1 = await hookReceiver('/hook');
    hook2 = await hookReceiver('/hook');
    srv = await startServer(['--workers', '2', '--pusher-app',
      `${A1.id}:${A1.key}:${A1.secret}:client-events=true:webhook=${hook1.url},` +
      `${A2.id}:${A2.key}:${A2.secret}:client-events=true:webhook=${hook2.url}`, ...TIMING]);
  });
  after(async () => {
    await stopClean(srv, assert);
    await hook1.close();
    await hook2.close();
  });

  // The events of one receiver, each verified with app's secret.
  const hookEvents = (hook, app) => hook.got.flatMap((g) => {
    const wh = backend(srv, app).webhook({ headers: g.headers, rawBody: g.body });
    assert.ok(wh.isValid(), `a webhook not signed with app ${app.id}'s secret`);
    assert.equal(g.headers['x-pusher-key'], app.key);
    return wh.getEvents();
  });

  test('same user id and channel in two apps: separate members, no cross events', async () => {
    const name = `presence-${uniq('doc')}`;
    const ann1 = connect(srv, A1, 'ann', { app: 1 });
    const ann2 = connect(srv, A2, 'ann', { app: 2 });
    const bob2 = connect(srv, A2, 'bob', { app: 2 });
    try {
      const c1 = ann1.subscribe(name);
      const m1 = await subscribed(c1);
      assert.deepEqual(membersOf(m1), [['ann', { app: 1 }]]);
      const log1 = recordMembers(c1);
      const c2 = ann2.subscribe(name);
      const m2 = await subscribed(c2);
      assert.deepEqual(membersOf(m2), [['ann', { app: 2 }]], 'app 2 sees only its own ann');
      const log2 = recordMembers(c2);
      const cb = bob2.subscribe(name);
      const mb = await subscribed(cb);
      assert.deepEqual(membersOf(mb), [['ann', { app: 2 }], ['bob', { app: 2 }]]);
      await waitUntil(() => log2.length >= 1, 'member_added of bob in app 2');
      assert.deepEqual(log2, [['added', 'bob', { app: 2 }]]);
      bob2.disconnect();
      await waitUntil(() => log2.length >= 2, 'member_removed of bob in app 2');
      assert.deepEqual(log2[1], ['removed', 'bob']);
      ann2.disconnect();
      await sleep(700);
      assert.deepEqual(log1, [], 'app 1 saw nothing of app 2 (its ann stays, the other ann left)');
      assert.equal(c1.members.count, 1);
    } finally {
      ann1.disconnect(); ann2.disconnect(); bob2.disconnect();
    }
  });

  test('client events and REST events stay in their app', async () => {
    const name = `private-${uniq('chat')}`;
    const pname = `presence-${uniq('room')}`;
    const [a1, b1, a2, b2] = [connect(srv, A1, 'a'), connect(srv, A1, 'b'), connect(srv, A2, 'a'), connect(srv, A2, 'b')];
    try {
      const [ca1, cb1, ca2, cb2] = [a1.subscribe(name), b1.subscribe(name), a2.subscribe(name), b2.subscribe(name)];
      await Promise.all([ca1, cb1, ca2, cb2].map((c) => subscribed(c)));
      const [pb1, pa2, pb2] = [b1.subscribe(pname), a2.subscribe(pname), b2.subscribe(pname)];
      await Promise.all([pb1, pa2, pb2].map((c) => subscribed(c)));
      const l1 = recordEvents(cb1), l2 = recordEvents(cb2), pl1 = recordEvents(pb1), pl2 = recordEvents(pb2);
      ca2.trigger('client-hi', { from: 'app2' });
      pa2.trigger('client-typing', { from: 'app2' });
      await waitUntil(() => l2.length >= 1 && pl2.length >= 1, 'app 2 client events');
      assert.deepEqual(l2, [['client-hi', { from: 'app2' }]]);
      assert.equal(pl2[0][0], 'client-typing');
      await backend(srv, A1).trigger(name, 'from-rest', { app: 1 });
      await backend(srv, A2).trigger([name, pname], 'from-rest', { app: 2 });
      await waitUntil(() => l1.length >= 1 && l2.length >= 2 && pl2.length >= 2, 'REST events');
      await sleep(300);
      assert.deepEqual(l1, [['from-rest', { app: 1 }]], 'app 1 got only its own event');
      assert.deepEqual(l2[1], ['from-rest', { app: 2 }]);
      assert.deepEqual(pl1, [], 'the presence channel of app 1 got nothing');
    } finally {
      [a1, b1, a2, b2].forEach((p) => p.disconnect());
    }
  });

  test('HTTP API: channels, channels/X, users and terminate_connections see only their app', async () => {
    const pname = `presence-${uniq('api')}`;
    const only2 = `only2-${uniq('pub')}`;
    const u1 = connect(srv, A1, 'carl'), u2 = connect(srv, A2, 'carl'), d2 = connect(srv, A2, 'dora');
    try {
      await subscribed(u1.subscribe(pname));
      await subscribed(u2.subscribe(pname));
      await subscribed(d2.subscribe(pname));
      await subscribed(d2.subscribe(only2));
      let [st, body] = await get(srv, A1, `/channels/${pname}/users`);
      assert.equal(st, 200);
      assert.deepEqual(body.users.map((u) => u.id), ['carl']);
      [st, body] = await get(srv, A2, `/channels/${pname}/users`);
      assert.deepEqual(body.users.map((u) => u.id).sort(), ['carl', 'dora']);
      [st, body] = await get(srv, A1, `/channels/${pname}`, { info: 'user_count' });
      assert.deepEqual(body, { occupied: true, user_count: 1 });
      [st, body] = await get(srv, A2, `/channels/${pname}`, { info: 'user_count' });
      assert.deepEqual(body, { occupied: true, user_count: 2 });
      [st, body] = await get(srv, A1, `/channels/${only2}`, { info: 'subscription_count' });
      assert.deepEqual(body, { occupied: false, subscription_count: 0 });
      [st, body] = await get(srv, A2, `/channels/${only2}`, { info: 'subscription_count' });
      assert.deepEqual(body, { occupied: true, subscription_count: 1 });
      [st, body] = await get(srv, A1, '/channels');
      assert.ok(body.channels[pname], 'app 1 lists its presence channel');
      assert.ok(!body.channels[only2], 'app 1 does not list app 2\'s channel');
      assert.ok(!Object.keys(body.channels).some((c) => c.includes('|')), 'no internal names');
      [st, body] = await get(srv, A2, '/channels', { filter_by_prefix: 'presence-', info: 'user_count' });
      assert.deepEqual(body.channels[pname], { user_count: 2 });
      [st, body] = await get(srv, A2, '/channels');
      assert.ok(body.channels[only2] && body.channels[pname]);
      [st] = await get(srv, A2, '/channels', { filter_by_prefix: 'x|y' });
      assert.equal(st, 400, 'a prefix with the separator is refused');

      // terminate_connections of carl in app 2: app 1's carl stays.
      const closed2 = new Promise((r) => u2.connection.bind('state_change', (s) => { if (s.current !== 'connected') r(s.current); }));
      let closed1 = false;
      u1.connection.bind('state_change', (s) => { if (s.current !== 'connected') closed1 = true; });
      const r = await backend(srv, A2).terminateUserConnections('carl');
      assert.equal(r.status, 200);
      await closed2;
      await sleep(600);
      assert.equal(closed1, false, 'app 1\'s carl was not terminated');
      [st, body] = await get(srv, A1, `/channels/${pname}/users`);
      assert.deepEqual(body.users.map((u) => u.id), ['carl']);
      await waitUntil(async () => (await get(srv, A2, `/channels/${pname}/users`))[1].users.length === 1, 'app 2 carl gone');
    } finally {
      [u1, u2, d2].forEach((p) => p.disconnect());
    }
  });

  test('webhooks: each app\'s go to its own receiver, signed with its secret, naming its own', async () => {
    const name = `presence-${uniq('hook')}`;
    const only1 = `presence-${uniq('only1')}`;
    const e1 = connect(srv, A1, 'erin'), e2 = connect(srv, A2, 'erin2');
    try {
      await subscribed(e1.subscribe(name));
      await subscribed(e1.subscribe(only1));
      await subscribed(e2.subscribe(name));
      const of = (hook, app, ch) => hookEvents(hook, app).filter((e) => e.channel === ch);
      await waitUntil(() => of(hook1, A1, name).some((e) => e.name === 'member_added') &&
        of(hook2, A2, name).some((e) => e.name === 'member_added'), 'member_added to both');
      assert.deepEqual(of(hook1, A1, name).filter((e) => e.name === 'member_added').map((e) => e.user_id), ['erin']);
      assert.deepEqual(of(hook2, A2, name).filter((e) => e.name === 'member_added').map((e) => e.user_id), ['erin2']);
      await waitUntil(() => of(hook1, A1, only1).length >= 2, 'only1 to app 1');
      assert.deepEqual(of(hook2, A2, only1), [], 'app 2 hears nothing of app 1\'s channel');
      const all2 = hookEvents(hook2, A2);
      assert.ok(!all2.some((e) => e.user_id === 'erin'), 'no app 1 user in app 2\'s webhooks');
      assert.ok(!all2.concat(hookEvents(hook1, A1)).some((e) => (e.channel || '').includes('|') ||
        (e.user_id || '').includes('|')), 'no internal ids in webhooks');
    } finally {
      e1.disconnect(); e2.disconnect();
    }
  });

  test('native clients are in the first app\'s namespace', async () => {
    const room = uniq('mixed');
    const p1 = connect(srv, A1, 'fay', { app: 1 }), p2 = connect(srv, A2, 'gus', { app: 2 });
    try {
      await subscribed(p1.subscribe(`presence-${room}`));
      await subscribed(p2.subscribe(`presence-${room}`));
      const nat = await Client.open(srv, { user: 'nat-ns' });
      nat.send({ type: 'join', room, meta: {}, ref: 'j' });
      const snap = await nat.next((m) => m.type === 'room_snapshot');
      assert.deepEqual(snap.members.map((m) => m.user).sort(), ['fay', 'nat-ns']);
      nat.send({ type: 'join', room: `${A2.id}|${room}`, ref: 'k' });
      const err = await nat.next((m) => m.type === 'error');
      assert.match(JSON.stringify(err), /room/i, 'a room id with the separator is refused');
      await nat.close();
    } finally {
      p1.disconnect(); p2.disconnect();
    }
  });

  test('?app= on the native side: the first app is served, another app or an unknown id is a clear 400', async () => {
    const room = uniq('q');
    const p1 = connect(srv, A1, 'hal', { app: 1 }), p2 = connect(srv, A2, 'ida', { app: 2 });
    try {
      await subscribed(p1.subscribe(`presence-${room}`));
      await subscribed(p2.subscribe(`presence-${room}`));
      const nat = await nativeAt(srv, `app=${A1.id}&user=nat-q`);
      nat.send({ type: 'join', room, meta: {}, ref: 'j' });
      const snap = await nat.next((m) => m.type === 'room_snapshot');
      assert.deepEqual(snap.members.map((m) => m.user).sort(), ['hal', 'nat-q'], '?app=<first> is the default namespace');
      await nat.close();
      await assert.rejects(nativeAt(srv, 'app=nope&user=nat-q3'), /400/);
      const body = async (path) => { const r = await fetch(`${srv.url}${path}`); return [r.status, await r.json()]; };
      let [st, b] = await body(`/v1/rooms/${room}?app=${A1.id}`);
      assert.equal(st, 200);
      assert.ok(b.members.some((m) => m.user === 'hal') && !b.members.some((m) => m.user === 'ida'),
        `app 1's room: ${JSON.stringify(b.members)}`);
      [st, b] = await body(`/v1/rooms/${room}?app=${A2.id}`);
      assert.equal(st, 400);
      assert.equal(b.error.code || b.error, 'app_not_native');
      [st, b] = await body('/v1/presence?user=hal&app=nope');
      assert.equal(st, 400);
      assert.equal(b.error.code || b.error, 'unknown_app');
      [st] = await body(`/v1/admin/users/hal?app=${A2.id}`);
      assert.equal(st, 400, 'the admin API too');
      const phx = await fetch(`${srv.url}/socket/longpoll?vsn=2.0.0&app=${A2.id}`);
      assert.equal(phx.status, 400, 'the Phoenix long-poll transport too');
    } finally {
      p1.disconnect(); p2.disconnect();
    }
  });

  test('a native socket with ?app=ID2 is in app 2\'s namespace: its members, its users, never app 1\'s', async () => {
    const room = uniq('n2');
    const p1 = connect(srv, A1, 'joe', { app: 1 }), p2 = connect(srv, A2, 'kim', { app: 2 });
    const frames = [];
    try {
      const c1 = p1.subscribe(`presence-${room}`), c2 = p2.subscribe(`presence-${room}`);
      await Promise.all([subscribed(c1), subscribed(c2)]); // both bound before either answers
      const log1 = recordMembers(c1), log2 = recordMembers(c2);
      const nat = await nativeAt(srv, `app=${A2.id}&user=joe`); // joe of app 2, not app 1's joe
      nat.ws.on('message', (d) => frames.push(d.toString()));
      assert.equal(nat.welcome.user, 'joe');
      nat.send({ type: 'join', room, meta: { n: 2 }, ref: 'j' });
      const snap = await nat.next((m) => m.type === 'room_snapshot');
      assert.equal(snap.room, room);
      assert.deepEqual(snap.members.map((m) => m.user).sort(), ['joe', 'kim']);
      assert.deepEqual(snap.members.find((m) => m.user === 'kim').meta, { app: 2 }, 'app 2\'s kim, not anyone of app 1');
      // The digest is of the ids the client knows (docs/protocol.md "Member digest").
      const fnv = (id) => { let h = 0xcbf29ce484222325n; for (const b of Buffer.from(id)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn; return h; };
      assert.equal(snap.digest, (fnv('joe') ^ fnv('kim')).toString(16).padStart(16, '0'));
      await waitUntil(() => log2.length >= 1, 'app 2\'s Pusher member sees the native joe');
      assert.deepEqual(log2, [['added', 'joe', { n: 2 }]]);
      nat.send({ type: 'watch', users: ['kim', 'joe-nobody'], ref: 'w' });
      const pk = await nat.presenceOf('kim');
      assert.equal(pk.status, 'online', 'app 2\'s kim is online');
      nat.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: 1 }, ref: 'e' });
      await sleep(500);
      assert.deepEqual(log1, [], 'app 1\'s channel saw nothing (its joe is not this joe)');
      assert.equal(c1.members.count, 1);
      assert.ok(!frames.concat(JSON.stringify(nat.welcome)).some((f) => f.includes('|')), 'no internal id reaches the client');
      await nat.close();
      await waitUntil(() => log2.length >= 2, 'member_removed after the grace');
      assert.deepEqual(log2[1], ['removed', 'joe']);
    } finally {
      p1.disconnect(); p2.disconnect();
    }
  });

  test('a wire id holding the separator is refused', async () => {
    const r = await raw(srv, A2.key);
    const ch = `presence-${uniq('sep')}`;
    const auth = backend(srv, A2).authorizeChannel(r.sid, ch, { user_id: `${A2.id}|ann`, user_info: {} });
    r.send({ event: 'pusher:subscribe', data: { channel: ch, ...auth } });
    const e = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:subscription_error'), 'subscription_error');
    assert.equal(JSON.parse(typeof e.data === 'string' ? e.data : JSON.stringify(e.data)).status, 400);
    r.send({ event: 'pusher:subscribe', data: { channel: `presence-${A2.id}|x` } });
    const e2 = await waitUntil(() => r.msgs.find((m) => m.event === 'pusher:subscription_error' &&
      m.channel === `presence-${A2.id}|x`), 'subscription_error of the channel');
    assert.equal(JSON.parse(typeof e2.data === 'string' ? e2.data : JSON.stringify(e2.data)).type, 'InvalidChannel');
    const [st] = await get(srv, A2, `/channels/presence-${A2.id}|x`);
    assert.ok(st >= 400 && st < 500, `GET of a channel with the separator: ${st}`);
    await assert.rejects(nativeAt(srv, `app=${A2.id}&user=${A2.id}|ann`), /400/);
    const r2 = await backend(srv, A1).terminateUserConnections(`${A2.id}|ann`).catch((x) => x);
    assert.ok(r2.status >= 400 && r2.status < 500, `terminate of an id with the separator: ${r2.status}`);
    r.ws.close();
    await assert.rejects(Client.open(srv, { user: `${A2.id}|ann` }), /400/,
      'a native user id with the separator is refused at the upgrade');
  });

  test('signin and watchlist stay in their app', async () => {
    const r1 = await raw(srv, A1.key), w2 = await raw(srv, A2.key);
    const watcher = uniq('w'), target = uniq('t');
    w2.send({ event: 'pusher:signin', data: backend(srv, A2).authenticateUser(w2.sid, { id: watcher, watchlist: [target] }) });
    await waitUntil(() => w2.msgs.find((m) => m.event === 'pusher:signin_success'), 'signin_success');
    r1.send({ event: 'pusher:signin', data: backend(srv, A1).authenticateUser(r1.sid, { id: target }) });
    await waitUntil(() => r1.msgs.find((m) => m.event === 'pusher:signin_success'), 'signin_success app 1');
    await sleep(600);
    assert.ok(!w2.msgs.some((m) => m.event === 'pusher_internal:watchlist_events'), 'app 1\'s user is not app 2\'s');
    const t2 = await raw(srv, A2.key);
    t2.send({ event: 'pusher:signin', data: backend(srv, A2).authenticateUser(t2.sid, { id: target }) });
    const ev = await waitUntil(() => w2.msgs.find((m) => m.event === 'pusher_internal:watchlist_events'), 'watchlist online in app 2');
    assert.deepEqual(JSON.parse(ev.data).events, [{ name: 'online', user_ids: [target] }]);
    [r1, w2, t2].forEach((x) => x.ws.close());
  });
});

test('an app id too long for the ids of its app is refused with a message', async () => {
  const long = 'x'.repeat(33);
  await assert.rejects(startServer(['--pusher-app', `1:k:s,${long}:k2:s2`]), /ID:KEY:SECRET/);
});

test('each app\'s options apply to its own sockets and channels only', async () => {
  const B1 = { id: '201', key: 'opt-key-one', secret: 'opt-secret-one' };
  const B2 = { id: 'opt2', key: 'opt-key-two', secret: 'opt-secret-two' };
  const srv = await startServer(['--pusher-app',
    `${B1.id}:${B1.key}:${B1.secret}:member-limit=1,` +
    `${B2.id}:${B2.key}:${B2.secret}:client-events=true:subscription-count=true`, ...TIMING]);
  const ps = [];
  try {
    const ch = `presence-${uniq('lim')}`;
    // member-limit=1 in app 1: a second user is refused; app 2 (100) takes two.
    const a1 = connect(srv, B1, 'u1'), b1 = connect(srv, B1, 'u2');
    const a2 = connect(srv, B2, 'u1'), b2 = connect(srv, B2, 'u2');
    ps.push(a1, b1, a2, b2);
    await subscribed(a1.subscribe(ch));
    await assert.rejects(subscribed(b1.subscribe(ch)), /LimitReached/);
    await subscribed(a2.subscribe(ch));
    const m = await subscribed(b2.subscribe(ch));
    assert.equal(m.count, 2);
    // client-events: off in app 1 (4301), on in app 2.
    const priv = `private-${uniq('ce')}`;
    const r1 = await raw(srv, B1.key);
    r1.send({ event: 'pusher:subscribe', data: { channel: priv, ...backend(srv, B1).authorizeChannel(r1.sid, priv) } });
    await waitUntil(() => r1.msgs.find((x) => x.event === 'pusher_internal:subscription_succeeded'), 'subscribed in app 1');
    r1.send({ event: 'client-x', channel: priv, data: {} });
    const err = await waitUntil(() => r1.msgs.find((x) => x.event === 'pusher:error'), 'pusher:error in app 1');
    assert.equal(err.data.code, 4301);
    const pa = b2.subscribe(priv), pb = a2.subscribe(priv);
    await Promise.all([subscribed(pa), subscribed(pb)]);
    const got = recordEvents(pb);
    pa.trigger('client-x', { ok: 1 });
    await waitUntil(() => got.length >= 1, 'app 2 relays client events');
    // subscription-count: app 2's public channel tells its subscribers, app 1's does not.
    const pub = uniq('feed');
    const counts1 = [], counts2 = [];
    const s1 = a1.subscribe(pub), s2 = a2.subscribe(pub);
    s1.bind('pusher:subscription_count', (d) => counts1.push(d.subscription_count));
    s2.bind('pusher:subscription_count', (d) => counts2.push(d.subscription_count));
    await Promise.all([subscribed(s1), subscribed(s2)]);
    await waitUntil(() => counts2.length >= 1, 'app 2 gets subscription_count');
    assert.equal(counts2.at(-1), 1, 'app 2 counts its own socket only');
    await sleep(400);
    assert.deepEqual(counts1, [], 'app 1 has subscription-count off');
    r1.ws.close();
  } finally {
    ps.forEach((p) => p.disconnect());
    await stopClean(srv, assert);
  }
});

test('the native Standard webhooks name only the first app\'s users and rooms', async () => {
  const SECRET = `whsec_${Buffer.from('presenced-ns-webhook-key-0123456789').toString('base64')}`;
  const C1 = { id: '301', key: 'std-key-one', secret: 'std-secret-one' };
  const C2 = { id: 'std2', key: 'std-key-two', secret: 'std-secret-two' };
  const hook = await hookReceiver('/hook');
  const srv = await startServer(['--pusher-app', `${C1.id}:${C1.key}:${C1.secret},${C2.id}:${C2.key}:${C2.secret}`,
    '--webhook-url', hook.url, '--webhook-secret', SECRET, ...TIMING]);
  const room = uniq('std');
  const u1 = uniq('one'), u2 = uniq('two');
  const p1 = connect(srv, C1, u1), p2 = connect(srv, C2, u2);
  try {
    await subscribed(p1.subscribe(`presence-${room}`));
    await subscribed(p2.subscribe(`presence-${room}`));
    const bodies = () => hook.got.map((g) => JSON.parse(g.body));
    await waitUntil(() => bodies().some((b) => b.type === 'member.joined' && b.data.user === u1), 'member.joined of app 1\'s user');
    await waitUntil(() => bodies().some((b) => b.type === 'user.online' && b.data.user === u1), 'user.online of app 1\'s user');
    await sleep(800);
    const all = hook.got.map((g) => g.body).join('\n');
    assert.ok(!all.includes(u2), 'no event names app 2\'s user');
    assert.ok(!all.includes('|'), 'no internal ids');
    assert.equal(bodies().filter((b) => b.type === 'room.occupied' && b.data.room === room).length, 1);
  } finally {
    p1.disconnect(); p2.disconnect();
    await stopClean(srv, assert);
    await hook.close();
  }
});

test('?app= of another app on the native socket needs auth = none and no room tokens (tokens name no app)', async () => {
  const srv = await startServer(['--pusher-app', '1:k1:s1,other:k2:s2',
    '--room-token-secret', 'room-token-secret-for-the-ns-test-0123456789']);
  try {
    const [st, body] = await new Promise((ok, fail) => {
      const req = http.get(`${srv.url}/v1/ws?app=other&user=ann`, { headers: { connection: 'Upgrade', upgrade: 'websocket',
        'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } }, (res) => {
        let t = '';
        res.on('data', (d) => { t += d; });
        res.on('end', () => ok([res.statusCode, t]));
      });
      req.on('upgrade', () => fail(new Error('upgraded')));
      req.on('error', fail);
    });
    assert.equal(st, 400);
    assert.equal(JSON.parse(body).error.code, 'app_not_native');
    const ok = await nativeAt(srv, 'app=1&user=ann');
    assert.equal(ok.welcome.type, 'welcome');
    await ok.close();
  } finally {
    await stopClean(srv, assert);
  }
});
