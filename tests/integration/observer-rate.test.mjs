// The per-observer query limit (observer-query-rate / observer-query-burst):
// one observer (a user id, or an anonymous client's address) gets one budget
// of queried ids across all of its connections, WebSocket watches and HTTP
// reads together, even when those connections sit on different workers; it
// is refused with the same rate_limited error / 429 as the per-connection
// limit, which still applies; a refusal by either limit charges neither.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import http from 'node:http';

let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;
const ids = (k, p = 'target') => Array.from({ length: k }, () => uid(p));
const errCode = (j) => j && j.error && j.error.code;

// WS connections per worker, from /metrics.
async function wsPerWorker(srv) {
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  return [...text.matchAll(/^presenced_conns_ws\{worker="(\d+)"\} (\d+)$/gm)].map((m) => Number(m[2]));
}

// Opens WebSockets for user (anonymous when null) until they sit on at least
// two workers: the point is a budget shared across workers.
async function spread(srv, user) {
  const conns = [];
  for (let i = 0; i < 40; i++) {
    conns.push(await Client.open(srv, user ? { user } : {}));
    if (conns.length >= 4 && (await wsPerWorker(srv)).filter((v) => v > 0).length >= 2) return conns;
  }
  throw new Error('the kernel put 40 connections on one worker');
}

// Sends a watch and resolves with its ack or error.
async function watch(c, users, ref) {
  c.send({ type: 'watch', users, ref });
  return c.next((m) => (m.type === 'ack' || m.type === 'error') && m.ref === ref);
}

// GET /v1/<ep>?user=..[&as=] on a fresh connection; resolves with {status, json}.
async function read(srv, ep, users, as) {
  const q = users.map((u) => `user=${encodeURIComponent(u)}`).join('&') + (as ? `&as=${as}` : '');
  const r = await fetch(`${srv.url}/v1/${ep}?${q}`, { headers: { Connection: 'close' } });
  if (ep === 'presence/events' && r.status === 200) {
    await r.body.cancel();
    return { status: 200 };
  }
  const text = await r.text();
  return { status: r.status, json: JSON.parse(text) };
}

const isObserverRefusal = (m) => m.code === 'rate_limited' && /observer-query-rate/.test(m.message);
const isConnRefusal = (m) => m.code === 'rate_limited' && /\(query-rate\)/.test(m.message);

// Mixed demand of 5-id queries from one observer: 12 watches spread over
// the connections and 4 HTTP reads (presence, lastseen, an event stream),
// all at once. Returns the ids granted, the refusals and the elapsed time.
async function flood(srv, conns, as) {
  const t0 = Date.now();
  const ws = Array.from({ length: 12 }, (_, i) => watch(conns[i % conns.length], ids(5), `f${i}`));
  const eps = ['presence', 'lastseen', 'presence/events', 'presence'];
  const http = eps.map((ep) => read(srv, ep, ids(5), as));
  const answers = await Promise.all(ws);
  const replies = await Promise.all(http);
  const elapsed = (Date.now() - t0) / 1000;
  const granted = 5 * (answers.filter((m) => m.type === 'ack').length +
    replies.filter((r) => r.status === 200).length);
  const refusals = [...answers.filter((m) => m.type === 'error'),
    ...replies.filter((r) => r.status !== 200).map((r) => {
      assert.equal(r.status, 429, JSON.stringify(r.json));
      return r.json.error;
    })];
  return { granted, refusals, elapsed };
}

const RATE = 2;
const BURST = 40;
const FLAGS = ['--workers', '2', '--max-sessions-per-user', '100', '--query-rate', '1000',
  '--query-burst', '1000', '--observer-query-rate', String(RATE),
  '--observer-query-burst', String(BURST)];

describe('observer limit across connections and workers', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('a user with many WebSockets and HTTP reads gets one budget; another observer is unaffected', async () => {
    const obs = uid('watcher');
    const conns = await spread(srv, obs);
    const t0 = Date.now();
    const { granted, refusals, elapsed } = await flood(srv, conns, obs);
    // 80 ids asked, each connection far below its own limit: only the shared
    // bucket can refuse, and it grants its burst plus the refill.
    assert.ok(granted >= BURST, `the burst is granted: ${granted}`);
    assert.ok(granted <= BURST + RATE * elapsed + 5, `${granted} ids granted in ${elapsed} s`);
    if (elapsed < (80 - BURST) / RATE / 2) assert.ok(refusals.length > 0, 'some queries refused');
    for (const m of refusals) assert.ok(isObserverRefusal(m), JSON.stringify(m));
    // Every connection stays open: a refusal is the client's pace, not an error.
    for (const c of conns) assert.equal(c.ws.readyState, 1);

    // Another user, and anonymous reads from the same address, have their own.
    const other = uid('other');
    const o = await Client.open(srv, { user: other });
    assert.equal((await watch(o, ids(10), 'o1')).type, 'ack');
    assert.equal((await read(srv, 'presence', ids(10), other)).status, 200);
    assert.equal((await read(srv, 'lastseen', ids(10))).status, 200);
    // The flooding user is still held: 20 ids need 10 s of refill.
    const again = await read(srv, 'presence', ids(20), obs);
    if (Date.now() - t0 < 5000) assert.equal(again.status, 429, JSON.stringify(again.json));
    await o.close();
    for (const c of conns) await c.close();
  });
});

describe('anonymous observers are keyed by address', () => {
  let srv;
  before(async () => { srv = await startServer(FLAGS); });
  after(async () => { await stopClean(srv, assert); });

  test('anonymous WebSockets and reads from one address share a budget; a named user there does not', async () => {
    const conns = await spread(srv, null);
    const { granted, refusals, elapsed } = await flood(srv, conns, null);
    assert.ok(granted >= BURST && granted <= BURST + RATE * elapsed + 5, `${granted} in ${elapsed} s`);
    if (elapsed < (80 - BURST) / RATE / 2) assert.ok(refusals.length > 0, 'some queries refused');
    for (const m of refusals) assert.ok(isObserverRefusal(m), JSON.stringify(m));
    // ?as= names another observer, even from the same address.
    assert.equal((await read(srv, 'presence', ids(10), uid('named'))).status, 200);
    for (const c of conns) await c.close();
  });
});

describe('both limits, neither charged by the other\'s refusal', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--workers', '2', '--query-rate', '1', '--query-burst', '10',
      '--observer-query-rate', '1', '--observer-query-burst', '20']);
  });
  after(async () => { await stopClean(srv, assert); });

  test('WS: the per-connection limit still refuses, and its refusal leaves the observer bucket alone', async () => {
    const p = uid('pair');
    const a = await Client.open(srv, { user: p });
    const b = await Client.open(srv, { user: p });
    const c = await Client.open(srv, { user: p });
    const t0 = Date.now();
    assert.equal((await watch(a, ids(10), 'a1')).type, 'ack'); // a: 0 left, observer: 10
    const e = await watch(a, ids(5), 'a2');
    if (Date.now() - t0 < 4000) assert.ok(e.type === 'error' && isConnRefusal(e), JSON.stringify(e));
    // Had a's refused watch been charged to the observer, 5 would be left.
    assert.equal((await watch(b, ids(10), 'b1')).type, 'ack');
    const f = await watch(c, ids(5), 'c1'); // c has its own 10, the observer ~0
    if (Date.now() - t0 < 4000) assert.ok(f.type === 'error' && isObserverRefusal(f), JSON.stringify(f));
    for (const x of [a, b, c]) await x.close();
  });

  test('HTTP: 429 from the connection\'s bucket on keep-alive, then from the observer\'s', async () => {
    const { connect, parseResponses } = await import('./lib/raw.mjs');
    const as = uid('reader');
    const q = (k) => ids(k).map((u) => `user=${u}`).join('&') + `&as=${as}`;
    const t0 = Date.now();
    const conn = await connect(srv.port);
    await conn.write(`GET /v1/presence?${q(10)} HTTP/1.1\r\nHost: x\r\n\r\n` +
      `GET /v1/presence?${q(5)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const [r1, r2] = parseResponses(await conn.until((d) => parseResponses(d).length === 2));
    conn.close();
    assert.equal(r1.status, 200);
    if (Date.now() - t0 < 4000) {
      assert.equal(r2.status, 429);
      assert.ok(isConnRefusal(JSON.parse(r2.body).error), r2.body);
    }
    // A new connection: its own bucket; the observer has 10 left (not 5).
    assert.equal((await read(srv, 'presence', ids(10), as)).status, 200);
    const r3 = await read(srv, 'lastseen', ids(5), as);
    if (Date.now() - t0 < 4000) {
      assert.equal(r3.status, 429);
      assert.equal(errCode(r3.json), 'rate_limited');
      assert.ok(isObserverRefusal(r3.json.error), JSON.stringify(r3.json));
    }
  });
});

describe('an observer refusal leaves the connection bucket alone', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--workers', '2', '--query-rate', '1', '--query-burst', '10',
      '--observer-query-rate', '20', '--observer-query-burst', '10']);
  });
  after(async () => { await stopClean(srv, assert); });

  test('after the observer bucket refills, the refused connection still has its whole burst', async () => {
    const p = uid('refill');
    const a = await Client.open(srv, { user: p });
    const b = await Client.open(srv, { user: p });
    const t0 = Date.now();
    assert.equal((await watch(a, ids(10), 'a1')).type, 'ack'); // the observer: 0 left
    const e = await watch(b, ids(10), 'b1');
    if (Date.now() - t0 < 400) assert.ok(e.type === 'error' && isObserverRefusal(e), JSON.stringify(e));
    // 20/s refills the observer's 10 in 0.5 s; b's own bucket (1/s) would
    // still be nearly empty had the refusal charged it.
    await new Promise((r) => setTimeout(r, 700));
    const f = await watch(b, ids(10), 'b2');
    assert.equal(f.type, 'ack', JSON.stringify(f));
    await a.close();
    await b.close();
  });
});

describe('observer-query-rate 0 turns the observer limit off', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--workers', '2', '--observer-query-rate', '0', '--observer-query-burst', '1']);
  });
  after(async () => { await stopClean(srv, assert); });

  test('only the per-connection limit applies', async () => {
    const p = uid('free');
    const a = await Client.open(srv, { user: p });
    const b = await Client.open(srv, { user: p });
    assert.equal((await watch(a, ids(10), 'a')).type, 'ack');
    assert.equal((await watch(b, ids(10), 'b')).type, 'ack');
    assert.equal((await read(srv, 'presence', ids(10), p)).status, 200);
    await a.close();
    await b.close();
  });
});

describe('a claimed id (auth = none) is keyed with its address', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--workers', '2', '--observer-query-rate', '1', '--observer-query-burst', '10']);
  });
  after(async () => { await stopClean(srv, assert); });

  // GET /v1/presence from a given loopback source address.
  const readFrom = (localAddress, users, as) => new Promise((resolve, reject) => {
    const q = users.map((u) => `user=${u}`).join('&') + `&as=${as}`;
    const req = http.get({ host: '127.0.0.1', port: srv.port, path: `/v1/presence?${q}`, localAddress,
      headers: { Connection: 'close' } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(body) }));
    });
    req.on('error', reject);
  });

  test('claiming alice from another address does not spend the budget of alice here', async () => {
    const alice = uid('alice');
    // 10 tokens, 1 back per second: a second read of 10 within 10 s is refused
    assert.equal((await readFrom('127.0.0.1', ids(10), alice)).status, 200);
    const refused = await readFrom('127.0.0.1', ids(10), alice);
    assert.equal(refused.status, 429);
    assert.ok(isObserverRefusal(refused.json.error), JSON.stringify(refused.json));
    // the same claimed id from 127.0.0.2 is another observer with its own budget
    assert.equal((await readFrom('127.0.0.2', ids(10), alice)).status, 200);
    assert.equal((await readFrom('127.0.0.2', ids(10), alice)).status, 429);
  });
});
