// Phoenix's long-poll transport (/socket/longpoll) with the real library:
// phoenix 1.8.16's Socket with transport: LongPoll (Node's fetch), next to
// its WebSocket transport (the `ws` package), and raw fetch requests for
// the statuses phoenix.js expects: 410 with a token for a new session, 200
// with messages or 204 after the hold, 200 for a POST of one message or an
// NDJSON batch, 410 for a gone or unknown session, always with HTTP 200 and
// the real status in the JSON body. phoenix.js falls back to LongPoll where
// WebSockets are refused (longPollFallbackMs). Sessions live on one worker:
// with two workers, requests on fresh connections reach both, so relaying
// between workers is exercised.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const require = createRequire(import.meta.url);
const { Socket, Presence, LongPoll } = require('phoenix');

const GRACE = 500;
const WINDOW = 800; // phoenix-longpoll-window-ms: the hold; 1.5x without a poll ends a session
const MAXMSG = 4096;
const FLAGS = ['--workers', '2', '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms',
  '50', '--session-ttl-ms', '4000', '--heartbeat-min-ms', '200', '--heartbeat-interval-ms', '1000',
  '--phoenix-longpoll-window-ms', String(WINDOW), '--ws-max-message-bytes', String(MAXMSG),
  '--http-max-body-bytes', '65536'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// A phoenix.js socket (LongPoll unless ws) of user joined to topic with
// meta; its Presence's state read by list(): [[key, [meta...]], ...].
function phx(srv, { user, topic, meta, ws = false, params = {}, authToken } = {}) {
  const opts = { params: { ...(user ? { user } : {}), ...params }, transport: ws ? WebSocket : LongPoll,
    heartbeatIntervalMs: 30000, reconnectAfterMs: () => 200, rejoinAfterMs: () => 200,
    longpollerTimeout: 5000 };
  if (authToken) opts.authToken = authToken;
  const socket = new Socket(`${srv.wsUrl}/socket`, opts);
  const errors = [];
  socket.onError((e) => errors.push(e));
  socket.connect();
  const channel = socket.channel(topic, meta ? { meta } : {});
  const presence = new Presence(channel);
  const diffs = [];
  presence.onJoin((key, cur, added) => diffs.push(['join', key, added.metas.length]));
  presence.onLeave((key, cur, left) => diffs.push(['leave', key, left.metas.length]));
  const joined = new Promise((resolve, reject) => {
    channel.join().receive('ok', resolve).receive('error', (e) => reject(new Error(`join error ${JSON.stringify(e)}`)))
      .receive('timeout', () => reject(new Error('join timeout')));
  });
  const list = () => presence.list((key, { metas }) => [key, metas.map(({ phx_ref, phx_ref_prev, ...m }) => m)])
    .sort((a, b) => a[0].localeCompare(b[0]));
  return { socket, channel, presence, joined, list, diffs, errors,
    close: () => new Promise((r) => socket.disconnect(r)) };
}

const keys = (c) => c.list().map(([k]) => k);
const metas = (c, key) => (c.list().find(([k]) => k === key) || [key, []])[1];

// ---- raw requests ----

function lpUrl(srv, query) { return `${srv.url}/socket/longpoll?vsn=2.0.0&${query}`; }

async function get(srv, query, headers = {}) {
  const r = await fetch(lpUrl(srv, query), { headers });
  assert.equal(r.status, 200, 'long-poll answers are HTTP 200');
  return r.json();
}

async function post(srv, token, body, { ndjson = true, query = '' } = {}) {
  const r = await fetch(lpUrl(srv, `token=${encodeURIComponent(token)}${query}`), {
    method: 'POST', body, headers: ndjson ? { 'Content-Type': 'application/x-ndjson' } : {} });
  return { http: r.status, body: await r.json() };
}

// A raw session: its token, and every message it polled, decoded.
async function rawSession(srv, query) {
  const first = await get(srv, query);
  assert.equal(first.status, 410);
  assert.match(first.token, /^lp1\./);
  assert.deepEqual(first.messages, []);
  const s = { token: first.token, msgs: [] };
  s.poll = async () => {
    const r = await get(srv, `token=${encodeURIComponent(s.token)}`);
    if (r.messages) s.msgs.push(...r.messages.map((m) => JSON.parse(m)));
    return r;
  };
  s.pollUntil = async (pred, what) => {
    const t0 = Date.now();
    for (;;) {
      const found = s.msgs.find(pred);
      if (found) return found;
      if (Date.now() - t0 > 5000) throw new Error(`timed out waiting for ${what}`);
      await s.poll();
    }
  };
  return s;
}

describe('long-poll: the statuses', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('GET without a token makes a session: 410 with a token; GET with it holds, then 204', async () => {
    const s = await rawSession(srv, 'user=raw1');
    const t0 = Date.now();
    const r = await get(srv, `token=${s.token}`);
    assert.equal(r.status, 204);
    assert.equal(r.token, s.token);
    assert.deepEqual(r.messages, []);
    assert.ok(Date.now() - t0 >= WINDOW - 100, `held for the window (${Date.now() - t0} ms)`);
  });

  test('a POST of an NDJSON batch is 200; its replies, state and heartbeat come in the next GET', async () => {
    const s = await rawSession(srv, 'user=raw2');
    const topic = `room:${uniq('raw')}`;
    const p = await post(srv, s.token, `${JSON.stringify(['1', '1', topic, 'phx_join', { meta: { tab: 1 } }])}\n` +
      `${JSON.stringify([null, '2', 'phoenix', 'heartbeat', {}])}\r\n`);
    assert.equal(p.http, 200);
    assert.deepEqual(p.body, { status: 200 });
    const join = await s.pollUntil((m) => m[1] === '1' && m[3] === 'phx_reply', 'the join reply');
    assert.equal(join[4].status, 'ok');
    const beat = await s.pollUntil((m) => m[1] === '2' && m[3] === 'phx_reply', 'the heartbeat reply');
    assert.equal(beat[2], 'phoenix');
    assert.equal(beat[4].status, 'ok');
    const state = await s.pollUntil((m) => m[3] === 'presence_state', 'the presence_state');
    assert.equal(state[0], '1', 'stamped with the join_ref');
    assert.deepEqual(Object.keys(state[4]), ['raw2']);
    assert.equal(state[4].raw2.metas[0].tab, 1);
    // One message without NDJSON is a POST too.
    const one = await post(srv, s.token, JSON.stringify(['1', '3', topic, 'phx_leave', {}]), { ndjson: false });
    assert.deepEqual(one.body, { status: 200 });
    const left = await s.pollUntil((m) => m[1] === '3', 'the leave reply');
    assert.equal(left[4].status, 'ok');
  });

  test('a second GET replaces the held one, which gets its 204 at once', async () => {
    const s = await rawSession(srv, 'user=raw3');
    const t0 = Date.now();
    const first = get(srv, `token=${s.token}`);
    await sleep(150);
    const second = get(srv, `token=${s.token}`);
    const r1 = await first;
    assert.equal(r1.status, 204);
    assert.ok(Date.now() - t0 < WINDOW - 100, 'the first was answered before its window');
    assert.equal((await second).status, 204);
  });

  test('a forged or unknown token: GET makes a new session (410 + token), POST gets 410', async () => {
    const s = await rawSession(srv, 'user=raw4');
    const forged = s.token.slice(0, -1) + (s.token.endsWith('0') ? '1' : '0');
    const g = await get(srv, `user=raw4&token=${forged}`);
    assert.equal(g.status, 410);
    assert.ok(g.token && g.token !== forged && g.token !== s.token, 'a new session');
    const p = await post(srv, forged, JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]));
    assert.deepEqual(p.body, { status: 410 });
    const junk = await post(srv, 'not-a-token', JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]));
    assert.deepEqual(junk.body, { status: 410 });
    // The header carries the token as well as the query.
    const r = await fetch(lpUrl(srv, ''), { headers: { 'X-Phoenix-LongPoll-Token': s.token } });
    assert.equal((await r.json()).status, 204);
  });

  test('a session nobody polls ends after 1.5 windows: then its token gets 410', async () => {
    const s = await rawSession(srv, 'user=raw5');
    await sleep(WINDOW * 1.5 + 400);
    const g = await get(srv, `token=${s.token}`);
    assert.deepEqual(g, { status: 410 });
    const p = await post(srv, s.token, JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]));
    assert.deepEqual(p.body, { status: 410 });
  });

  test('limits: too large a message or batch is 413 and nothing of it applies; a body over the HTTP limit is HTTP 413', async () => {
    const s = await rawSession(srv, 'user=raw6');
    const topic = `room:${uniq('lim')}`;
    const big = JSON.stringify(['1', '1', topic, 'phx_join', { meta: { pad: 'x'.repeat(MAXMSG) } }]);
    const join = JSON.stringify(['2', '2', topic, 'phx_join', {}]);
    assert.deepEqual((await post(srv, s.token, `${join}\n${big}`)).body, { status: 413 });
    const many = Array.from({ length: 101 }, (_, i) => JSON.stringify([null, String(i), 'phoenix', 'heartbeat', {}]));
    assert.deepEqual((await post(srv, s.token, many.join('\n'))).body, { status: 413 });
    const r = await s.poll();
    assert.equal(r.status, 204, 'nothing of the refused batches was applied');
    const huge = await fetch(lpUrl(srv, `token=${s.token}`), { method: 'POST', body: 'x'.repeat(70000),
      headers: { 'Content-Type': 'application/x-ndjson' } });
    assert.equal(huge.status, 413);
    await huge.text();
    // 100 messages are fine.
    assert.deepEqual((await post(srv, s.token, many.slice(0, 100).join('\n'))).body, { status: 200 });
    await s.pollUntil((m) => m[1] === '99', 'the 100th heartbeat reply');
  });

  test('rate limits are the WebSocket\'s: a burst of broadcasts past the bucket gets error replies', async () => {
    const s = await rawSession(srv, 'user=caster');
    const topic = `room:${uniq('rate')}`;
    await post(srv, s.token, JSON.stringify(['1', '1', topic, 'phx_join', {}]));
    await s.pollUntil((m) => m[1] === '1' && m[3] === 'phx_reply', 'the join reply');
    const casts = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify(['1', `c${i}`, topic, 'broadcast', { type: 'broadcast', event: 'e', payload: { i } }]));
    assert.deepEqual((await post(srv, s.token, casts.join('\n'))).body, { status: 200 });
    await s.pollUntil((m) => m[1] === 'c29', 'the last broadcast\'s reply');
    const refused = s.msgs.filter((m) => m[3] === 'phx_reply' && m[4].status === 'error' &&
      /Too many messages per second/.test(m[4].response.reason));
    assert.ok(refused.length >= 5, `${refused.length} of 30 refused (20 a second pass)`);
  });

  test('a malformed line is 400, nothing of its batch applies, and the session ends as a WebSocket would', async () => {
    const s = await rawSession(srv, 'user=raw7');
    const beat = JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]);
    assert.deepEqual((await post(srv, s.token, `${beat}\n["oops"`)).body, { status: 400 });
    assert.deepEqual(await get(srv, `token=${s.token}`), { status: 410 });
  });

  test('requests on fresh connections reach either worker: relayed, every reply arrives once', async () => {
    // Each request on its own connection: the kernel spreads them over the
    // two workers, so most sessions see requests relayed to their worker.
    const fresh = (method, query, body) => new Promise((resolve, reject) => {
      const req = http.request(lpUrl(srv, query), { method, agent: false,
        headers: body ? { 'Content-Type': 'application/x-ndjson' } : {} }, (res) => {
        let d = '';
        res.on('data', (c) => { d += c; });
        res.on('end', () => resolve(JSON.parse(d)));
      });
      req.on('error', reject);
      req.end(body);
    });
    for (let k = 0; k < 3; k++) {
      const first = await fresh('GET', `user=relay${k}`);
      assert.equal(first.status, 410);
      const tok = encodeURIComponent(first.token);
      for (let i = 0; i < 8; i++) {
        const r = await fresh('POST', `token=${tok}`, JSON.stringify([null, `b${i}`, 'phoenix', 'heartbeat', {}]));
        assert.deepEqual(r, { status: 200 });
      }
      const got = [];
      while (got.length < 8) {
        const r = await fresh('GET', `token=${tok}`);
        assert.ok(r.status === 200 || r.status === 204, `poll status ${r.status}`);
        got.push(...(r.messages || []).map((m) => JSON.parse(m)[1]));
      }
      assert.deepEqual(got.sort(), Array.from({ length: 8 }, (_, i) => `b${i}`).sort());
    }
  });

  test('a join again with a new meta replaces the meta others see', async () => {
    const topic = `room:${uniq('upd')}`;
    const w = phx(srv, { user: 'viewer', topic, ws: true });
    const s = await rawSession(srv, 'user=updater');
    try {
      await w.joined;
      await post(srv, s.token, JSON.stringify(['1', '1', topic, 'phx_join', { meta: { v: 1 } }]));
      await waitUntil(() => metas(w, 'updater').length === 1 && metas(w, 'updater')[0].v === 1, 'v1');
      await post(srv, s.token, JSON.stringify(['2', '2', topic, 'phx_join', { meta: { v: 2 } }]));
      await s.pollUntil((m) => m[1] === '2' && m[3] === 'phx_reply', 'the second join reply');
      await waitUntil(() => metas(w, 'updater').length === 1 && metas(w, 'updater')[0].v === 2, 'v2');
      assert.deepEqual(metas(w, 'updater'), [{ v: 2 }]);
    } finally {
      await w.close();
    }
  });

  test('OPTIONS answers the CORS preflight; answers allow any origin and are not cached', async () => {
    const o = await fetch(`${srv.url}/socket/longpoll`, { method: 'OPTIONS' });
    assert.equal(o.status, 200);
    assert.equal(o.headers.get('access-control-allow-origin'), '*');
    assert.match(o.headers.get('access-control-allow-methods'), /post/);
    const g = await fetch(lpUrl(srv, 'user=raw8'));
    assert.equal(g.headers.get('access-control-allow-origin'), '*');
    assert.equal(g.headers.get('cache-control'), 'no-store');
    assert.match(g.headers.get('content-type'), /^application\/json/);
    await g.json();
  });
});

describe('long-poll: phoenix.js LongPoll', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('two users see each other; a user\'s WebSocket and LongPoll tabs are one key with two metas', async () => {
    const topic = `room:${uniq('two')}`;
    const a = phx(srv, { user: 'alice', topic, meta: { tab: 'lp' } });
    const b = phx(srv, { user: 'bob', topic, meta: { tab: 'ws' }, ws: true });
    let a2;
    try {
      await a.joined;
      await b.joined;
      await waitUntil(() => keys(a).length === 2 && keys(b).length === 2, 'both see both');
      assert.deepEqual(keys(a), ['alice', 'bob']);
      assert.deepEqual(metas(b, 'alice'), [{ tab: 'lp' }]);
      a2 = phx(srv, { user: 'alice', topic, meta: { tab: 'ws2' }, ws: true });
      await a2.joined;
      await waitUntil(() => metas(a, 'alice').length === 2 && metas(b, 'alice').length === 2, 'two metas of alice');
      assert.deepEqual(metas(b, 'alice').map((m) => m.tab).sort(), ['lp', 'ws2']);
      assert.deepEqual(keys(b), ['alice', 'bob'], 'still one key');
      // The long-poll tab leaves its topic: one meta goes, the key stays.
      await new Promise((r) => a.channel.leave().receive('ok', r));
      await waitUntil(() => metas(b, 'alice').length === 1, 'the long-poll meta left');
      assert.deepEqual(metas(b, 'alice'), [{ tab: 'ws2' }]);
      assert.ok(b.diffs.some(([k, key, count]) => k === 'leave' && key === 'alice' && count === 1));
    } finally {
      await a.close();
      await b.close();
      if (a2) await a2.close();
    }
  });

  test('longPollFallbackMs: where WebSockets are blocked, phoenix.js falls back to LongPoll and joins', async () => {
    const topic = `room:${uniq('fb')}`;
    // A WebSocket through a proxy that refuses upgrades: the handshake 404s.
    class BlockedWebSocket extends WebSocket {
      constructor(url, protocols) { super(url.replace('/socket/websocket', '/socket/blocked'), protocols); }
    }
    const socket = new Socket(`${srv.wsUrl}/socket`, { params: { user: 'fallback' }, transport: BlockedWebSocket,
      longPollFallbackMs: 2000, reconnectAfterMs: () => 200, rejoinAfterMs: () => 200, longpollerTimeout: 5000,
      sessionStorage: { getItem: () => null, setItem: () => {}, removeItem: () => {} } });
    const w = phx(srv, { user: 'seer', topic, ws: true });
    try {
      socket.connect();
      const channel = socket.channel(topic, { meta: { via: 'fallback' } });
      await new Promise((resolve, reject) => {
        channel.join().receive('ok', resolve).receive('error', (e) => reject(new Error(JSON.stringify(e))));
      });
      assert.equal(socket.transport, LongPoll, 'fell back to LongPoll');
      await w.joined;
      await waitUntil(() => metas(w, 'fallback').length === 1, 'the WebSocket user sees the fallback user');
      assert.deepEqual(metas(w, 'fallback'), [{ via: 'fallback' }]);
    } finally {
      await new Promise((r) => socket.disconnect(r));
      await w.close();
    }
  });

  test('after a reconnect, syncState gives the right state; joins made meanwhile arrive', async () => {
    const topic = `room:${uniq('re')}`;
    const a = phx(srv, { user: 'carol', topic, meta: { v: 1 } });
    const other = phx(srv, { user: 'dave', topic, ws: true });
    let late;
    try {
      await a.joined;
      await other.joined;
      await waitUntil(() => keys(a).length === 2, 'carol sees dave');
      a.socket.disconnect();
      late = phx(srv, { user: 'erin', topic, ws: true });
      await late.joined;
      let rejoined = 0;
      a.channel.on('presence_state', () => { rejoined++; });
      a.socket.connect();
      await waitUntil(() => rejoined > 0 && keys(a).length === 3, 'carol\'s state after the reconnect');
      assert.deepEqual(keys(a), ['carol', 'dave', 'erin']);
      // The old session is not told of the reconnect (a long poll has no
      // socket to close): its meta goes once it misses its polls and the grace.
      await waitUntil(() => metas(a, 'carol').length === 1 && metas(other, 'carol').length === 1,
        'the old session\'s meta leaves', WINDOW * 1.5 + GRACE + 3000);
      assert.deepEqual(keys(other), ['carol', 'dave', 'erin']);
    } finally {
      await a.close();
      await other.close();
      if (late) await late.close();
    }
  });

  test('a native client in the room sees the long-poll user, and the long-poll user sees it', async () => {
    const room = `room:${uniq('nat')}`;
    const nat = await Client.open(srv, { user: 'nate' });
    const p = phx(srv, { user: 'polly', topic: room, meta: { via: 'lp' } });
    try {
      nat.send({ type: 'join', room, meta: { client: 'native' }, ref: 'j1' });
      await nat.next((m) => m.type === 'room_joined' && m.ref === 'j1');
      await p.joined;
      await waitUntil(() => keys(p).length === 2, 'polly sees nate');
      assert.deepEqual(metas(p, 'nate'), [{ client: 'native' }]);
      const snapOrDelta = await nat.next((m) => (m.type === 'room_delta' && m.joins?.some((j) => j.user === 'polly')) ||
        (m.type === 'room_snapshot' && m.members?.some((j) => j.user === 'polly')));
      assert.ok(snapOrDelta);
    } finally {
      await p.close();
      await nat.close();
    }
  });

  test('a long-poll client that stops polling leaves once, after 1.5 windows and the grace', async () => {
    const topic = `room:${uniq('stop')}`;
    const w = phx(srv, { user: 'watcher', topic, ws: true });
    const s = await rawSession(srv, 'user=quitter');
    try {
      await w.joined;
      await post(srv, s.token, JSON.stringify(['1', '1', topic, 'phx_join', {}]));
      await s.pollUntil((m) => m[3] === 'presence_state', 'the quitter\'s state');
      await waitUntil(() => keys(w).includes('quitter'), 'the watcher sees the quitter');
      const t0 = Date.now();
      await waitUntil(() => !keys(w).includes('quitter'), 'the quitter leaves', 10000);
      const took = Date.now() - t0;
      assert.ok(took >= WINDOW * 1.5 + GRACE - 300, `left after the window and the grace (${took} ms)`);
      await sleep(300);
      assert.equal(w.diffs.filter(([k, key]) => k === 'leave' && key === 'quitter').length, 1, 'one leave');
    } finally {
      await w.close();
    }
  });
});

describe('long-poll: auth = jwt', () => {
  const SECRET = 'phoenix-longpoll-secret-0123456789-abcd';
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

  test('params.token, authToken and Authorization: Bearer name the user; ?user= is ignored', async () => {
    const topic = `room:${uniq('jwt')}`;
    const a = phx(srv, { topic, params: { token: token({ sub: 'tokuser' }), user: 'mallory' } });
    const b = phx(srv, { topic, authToken: token({ sub: 'authtok' }) });
    try {
      await a.joined;
      await b.joined;
      await waitUntil(() => keys(a).length === 2, 'a sees both');
      assert.deepEqual(keys(a), ['authtok', 'tokuser']);
      const s = await rawSession(srv, 'user=mallory', {});
      const r = await fetch(lpUrl(srv, ''), { headers: { Authorization: `Bearer ${token({ sub: 'bearer' })}` } });
      const j = await r.json();
      assert.equal(j.status, 410);
      await post(srv, j.token, JSON.stringify(['1', '1', topic, 'phx_join', {}]));
      await waitUntil(() => keys(a).includes('bearer'), 'the bearer user joins');
      // Without a token a join is refused, as on a WebSocket.
      await post(srv, s.token, JSON.stringify(['1', '1', topic, 'phx_join', {}]));
      const rep = await s.pollUntil((m) => m[1] === '1' && m[3] === 'phx_reply', 'the refusal');
      assert.equal(rep[4].status, 'error');
      assert.match(rep[4].response.reason, /unauthorized/);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('a bad token is refused with 403 (phoenix.js closes for good); a forged session token is 410', async () => {
    const g = await get(srv, 'token=not.a.jwt');
    assert.deepEqual(g, { status: 403 });
    const topic = `room:${uniq('bad')}`;
    const p = phx(srv, { topic, params: { token: 'bad.token.here' } });
    try {
      await waitUntil(() => p.errors.includes(403), 'phoenix.js sees the 403');
    } finally {
      await p.close();
    }
    const forged = `lp1.0000800000000001.${'0'.repeat(32)}`;
    const f = await post(srv, forged, JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]));
    assert.deepEqual(f.body, { status: 410 });
  });
});

describe('long-poll: the queue limit and a drain', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS, '--phoenix-longpoll-max-queue', '4']); });
  after(async () => { await stopClean(srv, assert); });

  test('a session that is sent more than phoenix-longpoll-max-queue messages unread ends: 410', async () => {
    const s = await rawSession(srv, 'user=slow');
    const beats = Array.from({ length: 4 }, (_, i) => JSON.stringify([null, `q${i}`, 'phoenix', 'heartbeat', {}]));
    assert.deepEqual((await post(srv, s.token, beats.join('\n'))).body, { status: 200 });
    const r = await s.poll();
    assert.equal(r.status, 200, 'four fit');
    assert.equal(r.messages.length, 4);
    const five = [...beats, JSON.stringify([null, 'q4', 'phoenix', 'heartbeat', {}])];
    assert.deepEqual((await post(srv, s.token, five.join('\n'))).body, { status: 200 });
    assert.deepEqual(await get(srv, `token=${s.token}`), { status: 410 }, 'the fifth ended it');
  });

  test('SIGTERM: a held GET is answered 410 at once and the process exits 0', async () => {
    const other = await startServer(FLAGS);
    let stopped = false;
    try {
      const s = await rawSession(other, 'user=drained');
      const held = get(other, `token=${s.token}`);
      await sleep(150);
      const t0 = Date.now();
      const exit = other.stop();
      assert.deepEqual(await held, { status: 410 });
      assert.ok(Date.now() - t0 < WINDOW, 'answered before its window');
      assert.deepEqual(await exit, { code: 0, signal: null });
      stopped = true;
    } finally {
      if (!stopped) await other.stop('SIGKILL');
    }
  });
});
