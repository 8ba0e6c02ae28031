// run-alone (tests/run.sh: it bounds another client's ping latency under a flood)
// flood.test.mjs - one connection's flood never hurts another client
// (issue 15 item 1): per-connection message budgets answer rate_limited and
// close; with the budgets off, bus backpressure stops reading a flooding
// connection while its messages wait on another worker, so memory stays
// bounded, nothing it sent is lost, and other clients' pings stay fast.
//
// The flood runs in a child process (fixtures/flood.mjs) so that this
// process's latency probe measures the server, not a busy test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { startServer, stopClean, MULT } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const KINDS = ['ephemeral', 'patch', 'status', 'watch', 'join'];
// Every per-connection limit off: the message budgets and the watch query
// rate (a watch flood would meet query-rate first), so only the bus
// backpressure stands between a flood and the server.
const BUDGETS_OFF = [...KINDS.flatMap((k) => [`--msg-rate-${k}`, '0']),
  '--query-rate', '1000000', '--query-burst', '1000000', '--observer-query-rate', '0'];
// ASan keeps freed memory in a quarantine (256 MiB by default), which a
// flood of short-lived messages fills: RSS would measure the sanitizer.
const ASAN_ENV = { ASAN_OPTIONS: `${process.env.ASAN_OPTIONS || ''}:quarantine_size_mb=4` };

function flood(srv, kind, seconds) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(here, 'fixtures/flood.mjs'), srv.wsUrl, kind, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`flooder exited ${code}`))));
  });
}

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

// Pings every 10 ms on its own connection until stopped; returns RTTs (ms).
async function pinger(srv) {
  const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=prober`);
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  const sent = new Map(), rtts = [];
  let n = 0;
  ws.on('message', (d) => {
    const m = JSON.parse(d);
    if (m.type === 'pong' && sent.has(m.ref)) { rtts.push(performance.now() - sent.get(m.ref)); sent.delete(m.ref); }
  });
  const timer = setInterval(() => { sent.set(++n, performance.now()); ws.send(JSON.stringify({ type: 'ping', ref: n })); }, 10);
  return {
    async stop() {
      clearInterval(timer);
      await new Promise((res) => setTimeout(res, 100));
      ws.close();
      return { rtts, lost: sent.size };
    },
  };
}

function p99(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

async function metric(srv, name) {
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

test('every budgeted kind: past its budget a flood gets rate_limited and a 1008 close', async () => {
  const srv = await startServer(['--workers', '2']);
  try {
    for (const kind of KINDS) {
      const probe = await pinger(srv);
      const r = await flood(srv, kind, 5);
      const { rtts, lost } = await probe.stop();
      assert.equal(r.code, 1008, `${kind}: closed with 1008 (${JSON.stringify(r)})`);
      assert.equal(r.errors.rate_limited, 1, `${kind}: one rate_limited error before the close`);
      assert.ok(r.sent >= 100, `${kind}: the budget let a burst through (${r.sent} sent)`);
      assert.equal(lost, 0, `${kind}: every ping of another client was answered`);
      assert.ok(rtts.length > 0);
    }
    assert.equal(await metric(srv, 'presenced_msgs_rate_limited_total'), KINDS.length);
  } finally {
    await stopClean(srv, assert);
  }
});

test('budgets within their rate are never refused', async () => {
  const srv = await startServer(['--msg-rate-status', '5', '--msg-burst-seconds', '1']);
  try {
    const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=calm`);
    const got = [];
    ws.on('message', (d) => got.push(JSON.parse(d)));
    await new Promise((res) => ws.once('open', res));
    // Statuses need the session: wait for the welcome.
    while (!got.some((m) => m.type === 'welcome')) await new Promise((res) => setTimeout(res, 10));
    for (let i = 0; i < 8; i++) { // 8 statuses over 1.6 s: 5 per second, a bucket of 5
      ws.send(JSON.stringify({ type: 'status', status: i % 2 ? 'away' : 'online', ref: i }));
      await new Promise((res) => setTimeout(res, 200));
    }
    await new Promise((res) => setTimeout(res, 200));
    assert.equal(got.filter((m) => m.type === 'error').length, 0, JSON.stringify(got.filter((m) => m.type === 'error')));
    assert.equal(ws.readyState, WebSocket.OPEN);
    ws.close();
  } finally {
    await stopClean(srv, assert);
  }
});

test('budgets off: 10 s floods of each kind stay within bounded memory, lose nothing, keep pings fast', async () => {
  // A backlog bound of 100 messages makes backpressure certain to engage.
  const srv = await startServer(['--workers', '2', '--bus-backlog-max', '100', ...BUDGETS_OFF], { env: ASAN_ENV });
  try {
    const base = rssKiB(srv.child.pid);
    for (const kind of KINDS) {
      const probe = await pinger(srv);
      let peak = 0;
      const sampler = setInterval(() => { peak = Math.max(peak, rssKiB(srv.child.pid)); }, 100);
      const r = await flood(srv, kind, 10);
      clearInterval(sampler);
      const { rtts, lost } = await probe.stop();
      assert.equal(Object.keys(r.errors).length, 0, `${kind}: no errors (${JSON.stringify(r.errors)})`);
      assert.ok(r.sent > 10000, `${kind}: it flooded (${r.sent} messages)`);
      assert.ok(peak - base < 150 * 1024, `${kind}: RSS grew ${(peak - base) >> 10} MiB (bound 150)`);
      assert.equal(lost, 0, `${kind}: every ping answered`);
      const q = p99(rtts);
      assert.ok(q < 50 * MULT, `${kind}: another client's ping p99 ${q.toFixed(1)} ms (bound 50)`);
    }
    assert.ok(await metric(srv, 'presenced_reads_paused_total') > 0, 'backpressure paused the flooder');
  } finally {
    await stopClean(srv, assert);
  }
});

test('a paused connection is read again: its last patch applies', async () => {
  const srv = await startServer(['--workers', '2', '--bus-backlog-max', '100', ...BUDGETS_OFF]);
  try {
    const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=patcher`);
    const acks = new Set();
    const types = new Set();
    let seen = null; // the patcher's own metadata as the room's deltas show it
    ws.on('message', (d) => {
      const m = JSON.parse(d);
      types.add(m.type);
      if (m.ref !== undefined) acks.add(m.ref);
      if (m.type === 'error') acks.add(`error:${m.ref}:${m.code}`);
      for (const e of [...(m.patches || []), ...(m.joins || []), ...(m.members || [])])
        if (e.user === 'patcher') seen = e.meta;
    });
    await new Promise((res) => ws.once('open', res));
    while (!types.has('welcome')) await new Promise((res) => setTimeout(res, 10)); // a session first
    ws.send(JSON.stringify({ type: 'join', room: 'pr', ref: 'j' }));
    while (!acks.has('j')) await new Promise((res) => setTimeout(res, 10));
    assert.ok(types.has('room_joined'), `joined (${[...acks].join(' ')})`);
    const N = 20000;
    for (let i = 1; i <= N; i++) ws.send(JSON.stringify({ type: 'patch', room: 'pr', meta: { x: i }, ...(i === N ? { ref: 'last' } : {}) }));
    const deadline = Date.now() + 20000 * MULT;
    while (!acks.has('last') && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    assert.ok(acks.has('last'), 'the last patch was answered');
    // The room publishes the last state within room-batch-ms of the last patch.
    const until = Date.now() + 5000 * MULT;
    while (seen?.x !== N && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
    assert.equal(seen?.x, N, `the last patch is the state the room shows (${JSON.stringify(seen)}, open: ${ws.readyState === WebSocket.OPEN})`);
    assert.ok(await metric(srv, 'presenced_reads_paused_total') > 0, 'it was paused on the way');
    ws.close();
  } finally {
    await stopClean(srv, assert);
  }
});
