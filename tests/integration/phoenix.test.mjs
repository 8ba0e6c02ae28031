// Phoenix Channels + Presence and Supabase Realtime presence with the real
// libraries: phoenix 1.8.16 (Socket, Presence with its syncState/syncDiff)
// and @supabase/realtime-js 2.119.1 (RealtimeClient, channel presence,
// track/untrack, broadcast) in vsn 2.0.0 and 1.0.0, on Node with the `ws`
// package as the WebSocket. Two users see each other; two connections of
// one user are one key with two metas; a key leaves only after the
// reconnect grace; a track updates the meta; heartbeats are answered; bad
// frames and unknown topics are refused; under auth = jwt the token's sub
// is the key and a forged presence key is refused; a native client and a
// Phoenix client in one room see each other; phoenix = off serves nothing.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const require = createRequire(import.meta.url);
const { Socket, Presence } = require('phoenix');
const { RealtimeClient } = require('@supabase/realtime-js');

const GRACE = 600;
const FLAGS = ['--workers', '2', '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms',
  '50', '--session-ttl-ms', '4000', '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// ---- phoenix.js ----

// A phoenix.js socket of user (params.user) joined to topic with meta,
// its Presence's state read by list(): [[key, [meta...]], ...] sorted.
function phx(srv, { user, topic, meta, vsn, params = {}, authToken } = {}) {
  const opts = { params: { ...(user ? { user } : {}), ...params }, transport: WebSocket,
    heartbeatIntervalMs: 30000, reconnectAfterMs: () => 200, rejoinAfterMs: () => 200 };
  if (authToken) opts.authToken = authToken;
  if (vsn === '1.0.0') {
    Object.assign(opts, { vsn, encode: (m, cb) => cb(JSON.stringify(m)),
      decode: (raw, cb) => cb(JSON.parse(raw)) });
  }
  const socket = new Socket(`${srv.wsUrl}/socket`, opts);
  socket.connect();
  const channel = socket.channel(topic, meta ? { meta } : {});
  const presence = new Presence(channel);
  let syncs = 0;
  presence.onSync(() => { syncs++; });
  const joined = new Promise((resolve, reject) => {
    channel.join().receive('ok', resolve).receive('error', (e) => reject(new Error(`join error ${JSON.stringify(e)}`)))
      .receive('timeout', () => reject(new Error('join timeout')));
  });
  const list = () => presence.list((key, { metas }) => [key, metas.map(({ phx_ref, phx_ref_prev, ...m }) => m)])
    .sort((a, b) => a[0].localeCompare(b[0]));
  const refs = () => presence.list((key, { metas }) => [key, metas.map((m) => m.phx_ref)]);
  return { socket, channel, presence, joined, list, refs, syncs: () => syncs,
    close: () => new Promise((r) => socket.disconnect(r)) };
}

const keys = (c) => c.list().map(([k]) => k);
const metaCount = (c, key) => (c.list().find(([k]) => k === key) || [key, []])[1].length;

// A raw WebSocket speaking vsn 2.0.0 arrays, for what the libraries never send.
async function raw(srv, path = '/socket/websocket?vsn=2.0.0&user=rawuser') {
  const ws = new WebSocket(`${srv.wsUrl}${path}`);
  const msgs = [];
  const closed = new Promise((r) => ws.on('close', (code) => r(code)));
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  return { ws, msgs, closed, send: (a) => ws.send(typeof a === 'string' ? a : JSON.stringify(a)) };
}

function replyTo(r, ref) {
  return waitUntil(() => r.msgs.find((m) => m[1] === ref && m[3] === 'phx_reply'), `the reply to ${ref}`);
}

// ---- realtime-js ----

function rt(srv, { user, topic, key, vsn = '2.0.0', token, config = {} } = {}) {
  const client = new RealtimeClient(`${srv.wsUrl}/realtime/v1`, {
    params: { apikey: 'anon-key', ...(user ? { user } : {}) }, transport: WebSocket, vsn,
    heartbeatIntervalMs: 25000, reconnectAfterMs: () => 200,
  });
  const channel = client.channel(topic, { config: { presence: { key: key ?? user ?? '' }, ...config } });
  const casts = [];
  const leaves = [];
  channel.on('presence', { event: 'sync' }, () => {});
  channel.on('presence', { event: 'leave' }, ({ key }) => leaves.push(key));
  channel.on('broadcast', { event: 'cursor' }, (m) => casts.push(m));
  // supabase.realtime.setAuth(token): the joins carry it as access_token.
  const subscribed = (token ? client.setAuth(token) : Promise.resolve()).then(() => new Promise((resolve, reject) => {
    channel.subscribe((status, err) => {
      if (status === 'SUBSCRIBED') resolve();
      else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') reject(err || new Error(status));
    });
  }));
  const state = () => Object.fromEntries(Object.entries(channel.presenceState())
    .map(([k, v]) => [k, v.map(({ presence_ref, ...m }) => m)]));
  return { client, channel, subscribed, state, casts, leaves, close: () => client.disconnect() };
}

describe('phoenix.js over WebSocket', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('two users see each other with their metas; presence_state, then presence_diff', async () => {
    const topic = `room:${uniq('lobby')}`;
    const ann = phx(srv, { user: 'ann', topic, meta: { name: 'Ann' } });
    await ann.joined;
    await waitUntil(() => keys(ann).includes('ann'), 'ann sees herself');
    const bob = phx(srv, { user: 'bob', topic, meta: { name: 'Bob' } });
    await bob.joined;
    await waitUntil(() => keys(bob).length === 2, 'bob sees both');
    await waitUntil(() => keys(ann).length === 2, 'ann sees bob join');
    assert.deepEqual(ann.list(), [['ann', [{ name: 'Ann' }]], ['bob', [{ name: 'Bob' }]]]);
    assert.deepEqual(bob.list(), ann.list());
    await bob.close();
    await waitUntil(() => keys(ann).length === 1, 'bob leaves after the grace', 5000);
    await ann.close();
  });

  test('two connections of one user: one key, two metas with their own phx_ref; one leaves, then the last after the grace', async () => {
    const topic = `room:${uniq('tabs')}`;
    const watcher = phx(srv, { user: 'wendy', topic });
    await watcher.joined;
    const tab1 = phx(srv, { user: 'carl', topic, meta: { tab: 1 } });
    await tab1.joined;
    const tab2 = phx(srv, { user: 'carl', topic, meta: { tab: 2 } });
    await tab2.joined;
    await waitUntil(() => metaCount(watcher, 'carl') === 2, 'two metas under one key');
    assert.deepEqual(keys(watcher), ['carl', 'wendy']);
    const carl = watcher.refs().find(([k]) => k === 'carl')[1];
    assert.equal(new Set(carl).size, 2, 'a phx_ref per connection');
    assert.deepEqual(watcher.list().find(([k]) => k === 'carl')[1].map((m) => m.tab).sort(), [1, 2]);
    await waitUntil(() => metaCount(tab2, 'carl') === 2, 'the second tab sees both metas in its state');

    await tab1.close();
    await waitUntil(() => metaCount(watcher, 'carl') === 1, 'the first tab\'s meta goes after its grace', 5000);
    assert.deepEqual(watcher.list().find(([k]) => k === 'carl')[1], [{ tab: 2 }]);
    const t0 = Date.now();
    await tab2.close();
    await waitUntil(() => !keys(watcher).includes('carl'), 'the key leaves with the last connection', 5000);
    assert.ok(Date.now() - t0 >= GRACE - 100, `left only after the reconnect grace (${Date.now() - t0} ms)`);
    await watcher.close();
  });

  test('vsn 1.0.0 (object frames) with a JSON encoder: the same presence', async () => {
    const topic = `room:${uniq('v1')}`;
    const a = phx(srv, { user: 'v1a', topic, meta: { n: 1 }, vsn: '1.0.0' });
    const b = phx(srv, { user: 'v1b', topic, meta: { n: 2 } });
    await Promise.all([a.joined, b.joined]);
    await waitUntil(() => keys(a).length === 2 && keys(b).length === 2, 'both see both');
    assert.deepEqual(a.list(), [['v1a', [{ n: 1 }]], ['v1b', [{ n: 2 }]]]);
    await a.close();
    await b.close();
  });

  test('a rejoin after a reconnect gets a full presence_state with the new join_ref', async () => {
    const topic = `room:${uniq('rejoin')}`;
    const a = phx(srv, { user: 'rja', topic, meta: { x: 1 } });
    await a.joined;
    const b = phx(srv, { user: 'rjb', topic });
    await b.joined;
    await waitUntil(() => keys(a).length === 2, 'a sees b');
    const ref1 = a.channel.joinRef();
    a.socket.conn.close(4000, 'test drop'); // the transport drops; phoenix.js reconnects and rejoins
    await waitUntil(() => a.channel.joinRef() !== ref1 && a.channel.state === 'joined', 'rejoined', 5000);
    await waitUntil(() => a.presence.joinRef === a.channel.joinRef(), 'the state of the new join', 5000);
    await waitUntil(() => keys(a).length === 2 && metaCount(a, 'rja') >= 1, 'synced after the rejoin');
    await a.close();
    await b.close();
  });
});

describe('the Phoenix wire: heartbeats, refusals, bad frames', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('a heartbeat on topic phoenix is answered ok; phoenix.js keeps its socket with fast heartbeats', async () => {
    const r = await raw(srv);
    r.send([null, 'h1', 'phoenix', 'heartbeat', {}]);
    const rep = await replyTo(r, 'h1');
    assert.deepEqual(rep, [null, 'h1', 'phoenix', 'phx_reply', { status: 'ok', response: {} }]);
    r.ws.close();

    const topic = `room:${uniq('beat')}`;
    const s = new Socket(`${srv.wsUrl}/socket`, { params: { user: 'beater' }, transport: WebSocket,
      heartbeatIntervalMs: 100 });
    let closes = 0;
    s.onClose(() => { closes++; });
    s.connect();
    const ch = s.channel(topic, {});
    await new Promise((res, rej) => ch.join().receive('ok', res).receive('error', rej));
    await sleep(800);
    assert.equal(closes, 0, 'no heartbeat timeout: every beat was answered');
    assert.ok(s.isConnected());
    await new Promise((res) => s.disconnect(res));
  });

  test('an unjoined topic, an unknown event and a bad topic get error replies; the socket stays', async () => {
    const r = await raw(srv);
    r.send(['1', '2', 'room:nowhere', 'shout', {}]);
    assert.deepEqual((await replyTo(r, '2'))[4], { status: 'error', response: { reason: 'unmatched topic' } });
    r.send(['3', '3', 'room:ok', 'phx_join', {}]);
    assert.equal((await replyTo(r, '3'))[4].status, 'ok');
    const state = await waitUntil(() => r.msgs.find((m) => m[3] === 'presence_state'), 'presence_state');
    assert.equal(state[0], '3', 'presence_state carries the join_ref');
    assert.equal(r.msgs.indexOf(state) > r.msgs.findIndex((m) => m[1] === '3'), true, 'after the reply');
    assert.deepEqual(Object.keys(state[4]), ['rawuser']);
    r.send(['3', '4', 'room:ok', 'shout', {}]);
    assert.equal((await replyTo(r, '4'))[4].status, 'error');
    assert.match((await replyTo(r, '4'))[4].response.reason, /unknown event/);
    r.send(['5', '5', 'room with spaces', 'phx_join', {}]);
    assert.equal((await replyTo(r, '5'))[4].status, 'error');
    r.send(['3', '6', 'room:ok', 'phx_leave', {}]);
    assert.equal((await replyTo(r, '6'))[4].status, 'ok');
    await waitUntil(() => r.msgs.find((m) => m[3] === 'phx_close' && m[2] === 'room:ok'), 'phx_close');
    r.send([null, '7', 'phoenix', 'heartbeat', {}]);
    await replyTo(r, '7');
    r.ws.close();
  });

  test('an undecodable frame closes the socket; an unknown vsn is refused at the upgrade', async () => {
    const r = await raw(srv);
    r.send('{"not":"an array"}');
    const code = await r.closed;
    assert.equal(code, 1007);
    const bad = new WebSocket(`${srv.wsUrl}/socket/websocket?vsn=3.0.0`);
    const status = await new Promise((res) => bad.on('unexpected-response', (req, resp) => res(resp.statusCode)));
    assert.equal(status, 400);
  });

  test('the phoenix subprotocol is answered when offered', async () => {
    const ws = new WebSocket(`${srv.wsUrl}/socket/websocket?vsn=2.0.0&user=sp`, ['phoenix']);
    await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
    assert.equal(ws.protocol, 'phoenix');
    ws.close();
  });
});

for (const vsn of ['2.0.0', '1.0.0']) {
  describe(`realtime-js presence and broadcast, vsn ${vsn}`, () => {
    let srv;
    before(async () => { srv = await startServer(FLAGS); });
    after(async () => { await stopClean(srv, assert); });

    test('track shows a member to others; a second track updates it; untrack removes it', async () => {
      const name = `room:${uniq('sb')}`;
      const a = rt(srv, { user: 'sa', topic: name, vsn });
      const b = rt(srv, { user: 'sb', topic: name, vsn });
      await Promise.all([a.subscribed, b.subscribed]);
      assert.deepEqual(b.state(), {}, 'joining alone is not being present');
      assert.equal(await a.channel.track({ status: 'here' }), 'ok');
      assert.equal(await b.channel.track({ status: 'there' }), 'ok');
      await waitUntil(() => Object.keys(a.state()).length === 2, 'a sees both');
      await waitUntil(() => Object.keys(b.state()).length === 2, 'b sees both');
      assert.deepEqual(b.state().sa, [{ status: 'here' }]);
      const before = b.channel.presenceState().sa[0].presence_ref;
      assert.equal(await a.channel.track({ status: 'away', typing: true }), 'ok');
      await waitUntil(() => b.state().sa?.[0]?.status === 'away', 'the update reaches b');
      assert.deepEqual(b.state().sa, [{ status: 'away', typing: true }], 'one meta, replaced');
      assert.notEqual(b.channel.presenceState().sa[0].presence_ref, before, 'a new ref for the update');
      assert.equal(await a.channel.track({ status: 'away', typing: true }), 'ok', 'unchanged: ok');
      assert.equal(await a.channel.untrack(), 'ok');
      await waitUntil(() => !b.state().sa, 'untrack is a leave');
      assert.deepEqual(Object.keys(a.state()), ['sb'], 'a still sees b after untracking');
      await a.close();
      await b.close();
    });

    test('broadcast reaches the other members, not the sender; a non-map track is refused', async () => {
      const name = `room:${uniq('cast')}`;
      const a = rt(srv, { user: 'ca', topic: name, vsn });
      const b = rt(srv, { user: 'cb', topic: name, vsn });
      await Promise.all([a.subscribed, b.subscribed]);
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: { x: 3 } }), 'ok');
      await waitUntil(() => b.casts.length === 1, 'b gets the broadcast');
      assert.deepEqual(b.casts[0].payload, { x: 3 });
      assert.equal(b.casts[0].event, 'cursor');
      await sleep(200);
      assert.equal(a.casts.length, 0, 'not echoed to the sender');
      const r = await a.channel.send({ type: 'presence', event: 'track', payload: 'not a map' });
      assert.notEqual(r, 'ok');
      await a.close();
      await b.close();
    });

    test('two clients of one user tracking: one key with two entries; one leaves, the other stays', async () => {
      const name = `room:${uniq('sbtabs')}`;
      const w = rt(srv, { user: 'sw', topic: name, vsn });
      const t1 = rt(srv, { user: 'st', topic: name, vsn });
      const t2 = rt(srv, { user: 'st', topic: name, vsn });
      await Promise.all([w.subscribed, t1.subscribed, t2.subscribed]);
      assert.equal(await t1.channel.track({ tab: 1 }), 'ok');
      assert.equal(await t2.channel.track({ tab: 2 }), 'ok');
      await waitUntil(() => w.state().st?.length === 2, 'two entries under one key');
      assert.deepEqual(w.state().st.map((m) => m.tab).sort(), [1, 2]);
      assert.equal(await t1.channel.untrack(), 'ok');
      await waitUntil(() => w.state().st?.length === 1, 'one entry left');
      assert.deepEqual(w.state().st, [{ tab: 2 }]);
      await Promise.all([w.close(), t1.close(), t2.close()]);
    });

    test('broadcasts over the per-socket rate are refused with an error reply; the socket stays', async () => {
      const name = `room:${uniq('rate')}`;
      const a = rt(srv, { user: 'ra', topic: name, vsn, config: { broadcast: { ack: true } } });
      await a.subscribed;
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) =>
        a.channel.send({ type: 'broadcast', event: 'cursor', payload: { i } })));
      const ok = results.filter((r) => r === 'ok').length;
      assert.ok(ok >= 20 && ok < 40, `${ok} of 40 accepted`);
      await sleep(1100);
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: {} }), 'ok');
      await a.close();
    });

    test('postgres_changes in the join config is refused with a clear reason', async () => {
      const c = new RealtimeClient(`${srv.wsUrl}/realtime/v1`, { params: { apikey: 'k', user: 'pg' },
        transport: WebSocket, vsn });
      const ch = c.channel(`room:${uniq('pg')}`);
      ch.on('postgres_changes', { event: '*', schema: 'public' }, () => {});
      const err = await new Promise((res) => ch.subscribe((status, e) => {
        if (status === 'CHANNEL_ERROR') res(e);
      }));
      assert.match(String(err && err.message), /postgres_changes not supported/);
      c.disconnect();
    });

    test('a presence key other than the connection\'s user is refused', async () => {
      const a = rt(srv, { user: 'realuser', key: 'someoneelse', topic: `room:${uniq('key')}`, vsn });
      await assert.rejects(a.subscribed, /presence key/);
      await a.close();
    });
  });
}

describe('native and Phoenix clients in one room', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('a native member shows as one meta; a Phoenix member shows to the native client', async () => {
    const room = `room:${uniq('mixed')}`;
    const nat = await Client.open(srv, { user: 'nate' });
    nat.send({ type: 'join', room, meta: { client: 'native' }, ref: 'j1' });
    await nat.next((m) => m.type === 'room_joined' && m.ref === 'j1');
    const p = phx(srv, { user: 'phoebe', topic: room, meta: { client: 'phoenix' } });
    await p.joined;
    await waitUntil(() => keys(p).length === 2, 'phoenix sees the native member');
    assert.deepEqual(p.list().find(([k]) => k === 'nate')[1], [{ client: 'native' }]);
    const delta = await nat.next((m) => m.type === 'room_delta' && m.joins?.some((j) => j.user === 'phoebe'));
    const meta = delta.joins.find((j) => j.user === 'phoebe').meta;
    assert.deepEqual(Object.values(meta['~metas']).map(({ phx_ref, ...m }) => m), [{ client: 'phoenix' }]);
    nat.send({ type: 'leave', room, ref: 'l1' });
    await waitUntil(() => keys(p).length === 1, 'the native leave reaches phoenix');
    await p.close();
    await nat.close();
  });

  test('a Supabase broadcast reaches a native subscriber as its broadcast event', async () => {
    const room = `room:${uniq('castx')}`;
    const nat = await Client.open(srv, { user: 'nora' });
    nat.send({ type: 'join', room, ref: 'j2' });
    await nat.next((m) => m.type === 'room_joined' && m.ref === 'j2');
    const s = rt(srv, { user: 'sue', topic: room });
    await s.subscribed;
    assert.equal(await s.channel.send({ type: 'broadcast', event: 'cursor', payload: { x: 7 } }), 'ok');
    const b = await nat.next((m) => m.type === 'broadcast' && m.room === room);
    assert.equal(b.event, 'cursor');
    assert.deepEqual(b.data, { x: 7 });
    assert.equal(b.user, 'sue');
    await s.close();
    await nat.close();
  });
});

describe('binary broadcasts (realtime-js ArrayBuffer payloads)', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('vsn 2.0.0 gets the bytes back as an ArrayBuffer; vsn 1.0.0 and native get base64', async () => {
    const room = `room:${uniq('bin')}`;
    const nat = await Client.open(srv, { user: 'binnat' });
    const a = rt(srv, { user: 'bina', topic: room });
    const b = rt(srv, { user: 'binb', topic: room });
    const c = rt(srv, { user: 'binc', topic: room, vsn: '1.0.0' });
    try {
      nat.send({ type: 'join', room, ref: 'jb' });
      await nat.next((m) => m.type === 'room_joined' && m.ref === 'jb');
      await Promise.all([a.subscribed, b.subscribed, c.subscribed]);
      const bytes = Uint8Array.from([0, 1, 2, 250, 255, 0, 61, 10]);
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: bytes.buffer }), 'ok');
      await waitUntil(() => b.casts.length === 1 && c.casts.length === 1, 'both realtime-js clients get it');
      assert.equal(b.casts[0].event, 'cursor');
      assert.ok(b.casts[0].payload instanceof ArrayBuffer, `an ArrayBuffer, not ${typeof b.casts[0].payload}`);
      assert.deepEqual([...new Uint8Array(b.casts[0].payload)], [...bytes]);
      const b64 = Buffer.from(bytes).toString('base64');
      assert.equal(c.casts[0].payload, b64, 'vsn 1.0.0 (JSON only): the base64 text');
      const nb = await nat.next((m) => m.type === 'broadcast' && m.room === room);
      assert.deepEqual([nb.event, nb.data, nb.encoding, nb.user], ['cursor', b64, 'base64', 'bina']);
      // An empty ArrayBuffer, and a JSON payload after it: still JSON.
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: new ArrayBuffer(0) }), 'ok');
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: { x: 1 } }), 'ok');
      await waitUntil(() => b.casts.length === 3, 'the empty one and the JSON one');
      assert.equal(b.casts[1].payload.byteLength, 0);
      assert.deepEqual(b.casts[2].payload, { x: 1 });
      await sleep(100);
      assert.equal(a.casts.length, 0, 'not echoed to the sender');
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
      await nat.close();
    }
  });

  test('a binary payload over 32 KiB is refused; the socket stays', async () => {
    const a = rt(srv, { user: 'binbig', topic: `room:${uniq('binbig')}`, config: { broadcast: { ack: true } } });
    try {
      await a.subscribed;
      const r = await a.channel.send({ type: 'broadcast', event: 'cursor', payload: new ArrayBuffer(32769) });
      assert.notEqual(r, 'ok');
      assert.equal(await a.channel.send({ type: 'broadcast', event: 'cursor', payload: new ArrayBuffer(32768) }), 'ok');
    } finally {
      await a.close();
    }
  });
});

describe('auth = jwt', () => {
  const SECRET = 'phoenix-test-secret-0123456789-abcdefgh';
  const b64u = (x) => Buffer.from(x).toString('base64url');
  function token(claims) {
    const now = Math.floor(Date.now() / 1000);
    const h = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
    const p = b64u(JSON.stringify({ exp: now + 600, iat: now, ...claims }));
    const sig = crypto.createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url');
    return `${h}.${p}.${sig}`;
  }
  let srv;
  before(async () => {
    srv = await startServer([...FLAGS, '--auth', 'jwt', '--jwt-leeway-s', '0'],
      { env: { PRESENCED_JWT_HS256_SECRET: SECRET } });
  });
  after(async () => { await stopClean(srv, assert); });

  test('phoenix.js: the token\'s sub is the key, a forged ?user= is ignored; authToken works too', async () => {
    const topic = `room:${uniq('jwt')}`;
    const a = phx(srv, { topic, params: { token: token({ sub: 'tokuser' }), user: 'mallory' } });
    await a.joined;
    await waitUntil(() => keys(a).length === 1, 'a sees itself');
    assert.deepEqual(keys(a), ['tokuser']);
    const b = phx(srv, { topic, authToken: token({ sub: 'subproto' }) });
    await b.joined;
    await waitUntil(() => keys(a).length === 2, 'the authToken user joins');
    assert.deepEqual(keys(a), ['subproto', 'tokuser']);
    await a.close();
    await b.close();
  });

  test('without a token a join is refused; a bad token is refused at the upgrade', async () => {
    const r = await raw(srv, '/socket/websocket?vsn=2.0.0&user=mallory');
    r.send(['1', '1', 'room:x', 'phx_join', {}]);
    const rep = await replyTo(r, '1');
    assert.equal(rep[4].status, 'error');
    assert.match(rep[4].response.reason, /unauthorized/);
    r.ws.close();
    const bad = new WebSocket(`${srv.wsUrl}/socket/websocket?vsn=2.0.0&token=not.a.token`);
    const status = await new Promise((res) => bad.on('unexpected-response', (req, resp) => res(resp.statusCode)));
    assert.equal(status, 401);
  });

  test('realtime-js: access_token is verified; a forged presence key is refused, the token\'s sub is accepted', async () => {
    const name = `room:${uniq('rtjwt')}`;
    const forged = rt(srv, { topic: name, key: 'victim', token: token({ sub: 'attacker' }) });
    await assert.rejects(forged.subscribed, /presence key/);
    await forged.close();
    const ok = rt(srv, { topic: name, key: 'honest', token: token({ sub: 'honest' }) });
    await ok.subscribed;
    assert.equal(await ok.channel.track({ here: true }), 'ok');
    await waitUntil(() => Object.keys(ok.state()).includes('honest'), 'tracked under the token\'s sub');
    await ok.close();
  });

  test('realtime-js: setAuth sends access_token, which refreshes an expiring token; an unrefreshed one ends its presence', async () => {
    const now = Math.floor(Date.now() / 1000);
    const name = `room:${uniq('refresh')}`;
    const kept = rt(srv, { topic: name, key: 'fresh', token: token({ sub: 'fresh', exp: now + 2 }) });
    const lapsed = rt(srv, { topic: name, key: 'stale', token: token({ sub: 'stale', exp: now + 2 }) });
    await Promise.all([kept.subscribed, lapsed.subscribed]);
    assert.equal(await kept.channel.track({ k: 1 }), 'ok');
    assert.equal(await lapsed.channel.track({ k: 2 }), 'ok');
    await waitUntil(() => Object.keys(kept.state()).length === 2, 'both tracked');
    await kept.client.setAuth(token({ sub: 'fresh', exp: now + 600 }));
    // The unrefreshed socket is closed (4403) once its token expires; its
    // rejoins carry the expired token and are refused, so its key goes.
    await waitUntil(() => !kept.state().stale, 'the lapsed key leaves', 8000);
    await sleep(GRACE + 500);
    assert.deepEqual(Object.keys(kept.state()), ['fresh'], 'the refreshed one stays');
    assert.ok(!kept.leaves.includes('fresh'), 'and never left');
    assert.equal(await kept.channel.track({ k: 3 }), 'ok');
    await kept.close();
    await lapsed.close();
  });

  test('realtime-js: an apikey that is a valid token authenticates the socket (Supabase\'s fallback)', async () => {
    const c = new RealtimeClient(`${srv.wsUrl}/realtime/v1`, { params: { apikey: token({ sub: 'bykey' }) },
      transport: WebSocket });
    const ch = c.channel(`room:${uniq('apikey')}`, { config: { presence: { key: 'bykey' } } });
    await new Promise((res, rej) => ch.subscribe((s, e) => (s === 'SUBSCRIBED' ? res() : s === 'CHANNEL_ERROR' && rej(e))));
    assert.equal(await ch.track({ k: 1 }), 'ok');
    await waitUntil(() => Object.keys(ch.presenceState()).includes('bykey'), 'tracked under the apikey\'s sub');
    c.disconnect();
  });
});

describe('phoenix = off', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS, '--phoenix', 'off']); });
  after(async () => { await stopClean(srv, assert); });

  test('the Phoenix endpoints are not served', async () => {
    const res = await fetch(`${srv.url}/socket/websocket`);
    assert.equal(res.status, 404);
    const rt2 = await fetch(`${srv.url}/realtime/v1/websocket`);
    assert.equal(rt2.status, 404);
  });
});

describe('blocks', () => {
  const KEY = 'phoenix-blocks-admin-key-0123456789';
  let srv;
  before(async () => { srv = await startServer([...FLAGS, '--admin-api-key', KEY]); });
  after(async () => { await stopClean(srv, assert); });

  for (const vsn of ['2.0.0', '1.0.0']) {
    test(`vsn ${vsn}: a blocked user's Phoenix socket does not see the blocker (state and diffs)`, async () => {
      const topic = `room:${uniq('blk')}`;
      const [u, v, w] = [uniq('blocker'), uniq('blocked'), uniq('other')];
      const r = await fetch(`${srv.url}/v1/admin/users/${u}/blocks/${v}`,
        { method: 'PUT', headers: { Authorization: `Bearer ${KEY}` } });
      assert.equal(r.status, 200, await r.text());
      const cu = phx(srv, { user: u, topic, meta: { n: 'u' }, vsn });
      await cu.joined;
      await waitUntil(() => keys(cu).includes(u), 'the blocker sees itself');
      const cv = phx(srv, { user: v, topic, meta: { n: 'v' }, vsn });
      await cv.joined;
      await waitUntil(() => keys(cv).includes(v), 'the blocked user sees itself');
      await waitUntil(() => keys(cu).includes(v), 'the blocker sees the blocked user');
      assert.deepEqual(keys(cv), [v]);
      const cw = phx(srv, { user: w, topic, vsn });
      await cw.joined;
      await waitUntil(() => keys(cv).includes(w), 'another member arrives');
      await cu.close(); // the blocker leaves: nothing for v
      await waitUntil(() => !keys(cw).includes(u), 'the blocker gone for the others', 5000);
      assert.deepEqual(keys(cv).sort(), [v, w].sort());
      await cv.close();
      await cw.close();
    });
  }

  test('a Supabase broadcast from a blocker does not reach the blocked user (realtime-js nor native); the rest do', async () => {
    const topic = `room:${uniq('blkcast')}`;
    const [u, v, w] = [uniq('blocker'), uniq('blocked'), uniq('other')];
    const r = await fetch(`${srv.url}/v1/admin/users/${u}/blocks/${v}`,
      { method: 'PUT', headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(r.status, 200, await r.text());
    const nat = await Client.open(srv, { user: v });
    const [cu, cv, cw] = [rt(srv, { user: u, topic }), rt(srv, { user: v, topic }), rt(srv, { user: w, topic })];
    try {
      nat.send({ type: 'join', room: topic, ref: 'jn' });
      await nat.next((m) => m.type === 'room_joined' && m.ref === 'jn');
      await Promise.all([cu.subscribed, cv.subscribed, cw.subscribed]);
      assert.equal(await cu.channel.send({ type: 'broadcast', event: 'cursor', payload: { from: 'u' } }), 'ok');
      assert.equal(await cw.channel.send({ type: 'broadcast', event: 'cursor', payload: { from: 'w' } }), 'ok');
      assert.equal(await cv.channel.send({ type: 'broadcast', event: 'cursor', payload: { from: 'v' } }), 'ok');
      await waitUntil(() => cw.casts.length === 2 && cu.casts.length === 2, 'the others get both');
      await waitUntil(() => cv.casts.length >= 1, 'the blocked user hears the other member');
      await sleep(300);
      const natCasts = nat.seen.filter((m) => m.type === 'broadcast' && m.room === topic).map((m) => m.data.from);
      assert.deepEqual(cv.casts.map((m) => m.payload.from), ['w'], 'the blocked user never hears the blocker');
      assert.deepEqual(natCasts.sort(), ['v', 'w'], 'nor does its native socket (its own other socket\'s it does)');
      assert.deepEqual(cw.casts.map((m) => m.payload.from).sort(), ['u', 'v']);
      assert.deepEqual(cu.casts.map((m) => m.payload.from).sort(), ['v', 'w'], 'the blocker still hears the blocked user, as native ephemerals do');
    } finally {
      await Promise.all([cu.close(), cv.close(), cw.close()]);
      await nat.close();
    }
  });

  test('an invisible member\'s broadcasts are dropped, as its ephemerals are', async () => {
    const topic = `room:${uniq('invcast')}`;
    const [x, w] = [uniq('hider'), uniq('watcher')];
    const cx = rt(srv, { user: x, topic });
    const cw = rt(srv, { user: w, topic });
    try {
      await Promise.all([cx.subscribed, cw.subscribed]);
      assert.equal(await cx.channel.track({ here: true }), 'ok');
      await waitUntil(() => cw.state()[x], 'the member shows');
      assert.equal(await cx.channel.send({ type: 'broadcast', event: 'cursor', payload: { n: 1 } }), 'ok');
      await waitUntil(() => cw.casts.length === 1, 'a visible member\'s broadcast');
      const r = await fetch(`${srv.url}/v1/admin/users/${x}/privacy`, { method: 'PUT',
        headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ invisible: true }) });
      assert.equal(r.status, 200, await r.text());
      await waitUntil(() => !cw.state()[x], 'the member is gone once invisible');
      assert.equal(await cx.channel.send({ type: 'broadcast', event: 'cursor', payload: { n: 2 } }), 'ok');
      await sleep(400);
      assert.deepEqual(cw.casts.map((m) => m.payload.n), [1], 'nothing from the invisible member');
    } finally {
      await Promise.all([cx.close(), cw.close()]);
    }
  });
});
