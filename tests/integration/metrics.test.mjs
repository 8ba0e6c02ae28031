// metrics.test.mjs - GET /metrics after real traffic (docs/api.md): native
// clients that connect, watch, join a room and beat, a privacy change
// (a settings store write), a Pusher and a Phoenix socket. Every histogram
// is well formed (cumulative buckets, +Inf = _count) and the ones the
// traffic went through counted it; every metric served is documented in
// docs/api.md's table with the type served, and every one documented is
// served (those documented "with `redis` set" are checked by
// tests/cluster/metrics.test.mjs instead).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { scrape, checkHistograms, servedNames, documentedMetrics } from './lib/metrics.mjs';

const APP = { id: '4711', key: 'metrics-key-1', secret: 'metrics-secret-1' };
const FLAGS = ['--workers', '2', '--presence-debounce-ms', '20', '--room-batch-ms', '20',
  '--heartbeat-min-ms', '100', '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}`];

let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;

// A raw socket that collects JSON messages.
async function rawSocket(url) {
  const ws = new WebSocket(url);
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  return { ws, msgs };
}

// The traffic: returns what to close.
async function traffic(srv) {
  const alice = uid('alice');
  const bob = uid('bob');
  const room = uid('room');
  const b = await Client.open(srv, { user: bob });
  b.send({ type: 'watch', users: [alice], ref: 'w' });
  await b.next((m) => m.type === 'ack' && m.ref === 'w');
  const a = await Client.open(srv, { user: alice });
  await b.next((m) => m.type === 'presence' && m.presence.user === alice && m.presence.status !== 'offline');
  for (const [c, ref] of [[a, 'ja'], [b, 'jb']]) {
    c.send({ type: 'join', room, meta: {}, ref });
    await c.next((m) => m.type === 'room_joined' && m.ref === ref);
  }
  await a.next((m) => m.type === 'room_delta' && m.room === room && m.joins.length > 0);
  a.send({ type: 'heartbeat' });
  a.send({ type: 'privacy', lastSeen: 'contacts', ref: 'p' });
  await a.next((m) => m.type === 'ack' && m.ref === 'p');
  const p = await rawSocket(`${srv.wsUrl}/app/${APP.key}?protocol=7&client=js&version=8.6.0`);
  await waitUntil(() => p.msgs.find((m) => m.event === 'pusher:connection_established'), 'established');
  const x = await rawSocket(`${srv.wsUrl}/socket/websocket?vsn=2.0.0&user=${uid('phx')}`);
  x.ws.send(JSON.stringify([null, 'h1', 'phoenix', 'heartbeat', {}]));
  await waitUntil(() => x.msgs.find((m) => m[1] === 'h1' && m[3] === 'phx_reply'), 'phx_reply');
  return [a, b, p, x];
}

test('after traffic: histograms are well formed and counted it; /metrics and docs/api.md list the same metrics', async () => {
  const srv = await startServer(FLAGS);
  const open = [];
  try {
    open.push(...await traffic(srv));
    const counted = [
      'presenced_fanout_seconds{}',
      'presenced_store_seconds{op="set_privacy"}',
      'presenced_handshake_seconds{proto="native"}',
      'presenced_handshake_seconds{proto="pusher"}',
      'presenced_handshake_seconds{proto="phoenix"}',
    ];
    // The completions and deltas may land just after the replies the
    // clients waited for: scrape until every exercised histogram counted.
    let m;
    await waitUntil(async () => {
      m = await scrape(srv);
      const c = checkHistograms(assert, m);
      return counted.every((k) => c.get(k) > 0);
    }, 'every exercised histogram counted');
    const counts = checkHistograms(assert, m);
    for (const k of counted) assert.ok(counts.get(k) > 0, `${k} counted the traffic`);
    // Two native sockets, one Pusher, one Phoenix: each counted once.
    assert.equal(counts.get('presenced_handshake_seconds{proto="native"}'), 2);
    assert.equal(counts.get('presenced_handshake_seconds{proto="pusher"}'), 1);
    assert.equal(counts.get('presenced_handshake_seconds{proto="phoenix"}'), 1);
    // Without redis no Redis round trip is observed, but the series exists.
    assert.equal(counts.get('presenced_redis_seconds{}'), 0);

    const served = servedNames(m);
    const docs = documentedMetrics();
    const undocumented = [...served].filter((name) => !docs.has(name));
    assert.deepEqual(undocumented, [], `served but not in docs/api.md: ${undocumented}`);
    for (const [name, d] of docs) {
      if (served.has(name)) assert.equal(d.type, m.types.get(name), `${name}: documented type`);
      else assert.ok(d.redisOnly, `${name} is documented but not served (and not marked "with \`redis\` set")`);
    }
    const gauge = (name) => m.samples.filter((s) => s.name === name).reduce((t, s) => t + s.value, 0);
    assert.ok(gauge('presenced_conns_ws') >= 4);
    for (const g of ['presenced_bus_backlog', 'presenced_output_bytes', 'presenced_store_pending'])
      assert.ok(Number.isFinite(gauge(g)) && gauge(g) >= 0, g);
  } finally {
    for (const c of open) c.ws.close();
    await stopClean(srv, assert);
  }
});

// The gauges go back to zero when the work is done: what was queued for
// sockets was written, the store answered everything, the bus was drained.
test('queue gauges return to 0 when idle', async () => {
  const srv = await startServer(FLAGS);
  const open = [];
  try {
    open.push(...await traffic(srv));
    await waitUntil(async () => {
      const m = await scrape(srv);
      const sum = (name) => m.samples.filter((s) => s.name === name).reduce((t, s) => t + s.value, 0);
      // The scrape's own answer is queued while /metrics renders: only
      // earlier output would show here.
      return sum('presenced_store_pending') === 0 && sum('presenced_bus_backlog') === 0 &&
        sum('presenced_output_bytes') === 0;
    }, 'idle gauges at 0');
  } finally {
    for (const c of open) c.ws.close();
    await stopClean(srv, assert);
  }
});
