// Draining (SIGTERM and POST /v1/admin/drain): the server stops accepting,
// closes each socket at its own moment d, uniformly random within
// drain-window-ms, and tells every native client at once when to come
// back with {"type":"reconnect","afterMs":N}: on one node (these tests) N
// is d + the window, after the stop, when the next process is up (drain.h);
// a Pusher client gets pusher:error 4200 and close 4200 at its time. The
// process then exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest } from './lib/admin.mjs';

const require = createRequire(import.meta.url);
const PusherClient = require('pusher-js');

const WINDOW = 1500;
const APP = { id: '4711', key: 'drain-key-1', secret: 'drain-secret-1' };
const KEY = 'drain-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--drain-window-ms', String(WINDOW), '--admin-api-key', KEY,
  '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}`, '--presence-debounce-ms', '20'];

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// Each client's reconnect message and when its socket closed, relative to
// the signal.
async function drainAll(srv, clients, trigger) {
  const t0 = Date.now();
  const closes = clients.map((c) => c.closed.then((x) => ({ ...x, at: Date.now() - t0 })));
  await trigger();
  const recs = await Promise.all(clients.map((c) => c.next((m) => m.type === 'reconnect', 3000)));
  const closed = await Promise.all(closes);
  return { recs, closed };
}

function assertSpread(recs, closed) {
  for (const m of recs) {
    assert.ok(Number.isInteger(m.afterMs) && m.afterMs >= WINDOW && m.afterMs < 2 * WINDOW,
      `afterMs ${m.afterMs} within the window after the stop`);
  }
  const after = recs.map((m) => m.afterMs - WINDOW); // the close's moment

  assert.ok(new Set(after).size > after.length / 2, `spread, not all the same: ${after}`);
  for (let i = 0; i < closed.length; i++) {
    assert.equal(closed[i].code, 1001, 'going away');
    // Closed at its own time (a little slack for the loop and ASan).
    assert.ok(closed[i].at >= after[i] - 50, `closed at ${closed[i].at} ms, told ${after[i]}`);
    assert.ok(closed[i].at <= after[i] + 1000, `closed at ${closed[i].at} ms, told ${after[i]}`);
  }
}

test('SIGTERM: every native client is told to come back in the window after the stop, spread, and closed at its moment', async () => {
  const srv = await startServer(FLAGS);
  const clients = [];
  for (let i = 0; i < 20; i++) clients.push(await Client.open(srv, { user: uniq('d') }));
  const { recs, closed } = await drainAll(srv, clients, async () => { srv.child.kill('SIGTERM'); });
  assertSpread(recs, closed);
  await stopClean(srv, assert);
});

test('POST /v1/admin/drain drains the same way and the process exits 0', async () => {
  const srv = await startServer(FLAGS);
  const clients = [];
  for (let i = 0; i < 10; i++) clients.push(await Client.open(srv, { user: uniq('a') }));
  const { recs, closed } = await drainAll(srv, clients, async () => {
    const r = await adminRequest(srv, 'POST', '/v1/admin/drain', { key: KEY });
    assert.equal(r.status, 202);
    assert.equal(r.json.windowMs, WINDOW);
  });
  assertSpread(recs, closed);
  await stopClean(srv, assert);
  assert.match(srv.stderr, /signal SIGTERM/);
});

test('a Pusher client gets pusher:error 4200 and close 4200', async () => {
  const srv = await startServer(FLAGS);
  const ws = new WebSocket(`${srv.wsUrl}/app/${APP.key}?protocol=7&client=js&version=8.6.0`);
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  const closed = new Promise((r) => ws.once('close', (code) => r(code)));
  await waitUntil(() => msgs.find((m) => m.event === 'pusher:connection_established'), 'established');
  // pusher-js too: it must see 4200 (and would reconnect at once).
  const p = new PusherClient(APP.key, { wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false,
    enabledTransports: ['ws'], cluster: 'x' });
  const codes = [];
  p.connection.bind('error', (e) => { if (e && e.data && e.data.code) codes.push(e.data.code); });
  await waitUntil(() => p.connection.state === 'connected', 'pusher-js connected');
  srv.child.kill('SIGTERM');
  assert.equal(await closed, 4200);
  const err = msgs.find((m) => m.event === 'pusher:error');
  assert.ok(err, 'pusher:error before the close');
  assert.equal((typeof err.data === 'string' ? JSON.parse(err.data) : err.data).code, 4200);
  await waitUntil(() => codes.includes(4200) || p.connection.state !== 'connected', 'pusher-js saw the drain');
  // pusher-js may start one more connection attempt after this (its
  // startConnecting callback restarts the strategy on an error that arrives
  // after the abort), which keeps the file's process alive: the runner's
  // --test-force-exit (tests/run.sh) ends it once the tests are done.
  p.disconnect();
  await stopClean(srv, assert);
});
