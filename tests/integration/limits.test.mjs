// Connection-level limits of the real binary: server pings and the pong
// timeout, max-connections, descriptor exhaustion (EMFILE), and a flood of
// random bytes from many clients at once that must leave others unharmed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import net from 'node:net';
import crypto from 'node:crypto';
import WebSocket from 'ws';
import { startServer, stopClean, BIN, ROOT, sleep } from './lib/server.mjs';
import { connect, parseResponses } from './lib/raw.mjs';

async function fetchMetricsWhenPossible(port) {
  for (let i = 0; i < 50; i++) {
    try { return await fetch(`http://127.0.0.1:${port}/metrics`); } catch { await sleep(100); }
  }
  throw new Error('metrics unreachable');
}

// A raw WebSocket client that completes the handshake and then never
// answers anything (no pong): only a raw socket can misbehave like that.
async function rawWebSocket(port) {
  const c = await connect(port);
  await c.write('GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  await c.until((d) => d.includes('\r\n\r\n'));
  return c;
}

test('server pings idle sockets; a peer that never answers is closed with 1011', async () => {
  const srv = await startServer(['--workers', '1', '--ws-ping-interval-ms', '300', '--ws-pong-timeout-ms', '300']);
  try {
    const silent = await rawWebSocket(srv.port);
    const t0 = Date.now();
    // ws answers pings by itself: it must survive the same period.
    const polite = new WebSocket(`${srv.wsUrl}/v1/ws`);
    let pings = 0;
    polite.on('ping', () => { pings++; });
    await once(polite, 'open');
    const buf = await silent.untilEnd(5000);
    const elapsed = Date.now() - t0;
    // Server frames: the ping (0x89) must appear before the close (0x88) with 1011.
    const bytes = [...buf];
    const pingAt = bytes.indexOf(0x89);
    const closeAt = bytes.lastIndexOf(0x88);
    assert.ok(pingAt > 0, 'got a server ping');
    assert.ok(closeAt > pingAt, 'then a close');
    assert.equal(buf.readUInt16BE(closeAt + 2), 1011);
    assert.ok(elapsed >= 500 && elapsed < 3000, `closed after ${elapsed} ms`);
    await sleep(800);
    assert.equal(polite.readyState, WebSocket.OPEN, 'a client that answers pings stays');
    assert.ok(pings >= 1);
    polite.close();
    await once(polite, 'close');
  } finally {
    await stopClean(srv, assert);
  }
});

test('max-connections: connections over the limit are closed at once, others keep working', async () => {
  const srv = await startServer(['--workers', '1', '--max-connections', '3']);
  try {
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await connect(srv.port));
    const extra = await connect(srv.port);
    await extra.untilEnd(3000);
    assert.equal(extra.data.length, 0);
    await held[0].write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await held[0].until((d) => parseResponses(d).length === 1);
    for (const h of held) h.close();
    await sleep(200);
    const again = await connect(srv.port);
    await again.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(parseResponses(await again.untilEnd())[0].status, 200);
  } finally {
    await stopClean(srv, assert);
  }
});

test('descriptor exhaustion (EMFILE) does not spin or wedge the server', async () => {
  // Start under a low descriptor limit so accept() hits EMFILE.
  const child = spawn('bash', ['-c', `ulimit -n 64 && exec "${BIN}" --port 0 --bind 127.0.0.1 --workers 1`],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d;
      const m = /listening on http:\/\/[^ ]*:(\d+) /.exec(stderr);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (c) => reject(new Error(`exited ${c}: ${stderr}`)));
  });
  const socks = [];
  for (let i = 0; i < 100; i++) {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.on('error', () => {});
    socks.push(s);
  }
  await sleep(500);
  // Every accept attempt at EMFILE is counted; without the spare-descriptor
  // trick a level-triggered listener retries thousands of times a second.
  const errors = async () => {
    const m = await (await fetchMetricsWhenPossible(port)).text();
    return [...m.matchAll(/^presenced_accept_errors_total\{worker="\d"\} (\d+)$/gm)].reduce((a, x) => a + Number(x[1]), 0);
  };
  for (const s of socks) s.destroy();
  await sleep(300);
  const n1 = await errors();
  await sleep(1000);
  const n2 = await errors();
  assert.ok(n1 <= 150, `${n1} failed accepts for 100 connections (spinning?)`);
  assert.equal(n2, n1, 'no more failed accepts once the clients are gone');
  const c = await connect(port);
  await c.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.equal(parseResponses(await c.untilEnd())[0].status, 200);
  assert.match(stderr, /accept/);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  assert.equal(code, 0, stderr);
});

test('random bytes from many clients never hurt a well-behaved one', async () => {
  const srv = await startServer(['--workers', '2']);
  try {
    const good = new WebSocket(`${srv.wsUrl}/v1/ws`);
    const got = [];
    good.on('message', (d) => got.push(JSON.parse(d.toString())));
    await once(good, 'open');
    const attackers = [];
    for (let i = 0; i < 40; i++) {
      const c = await connect(srv.port);
      attackers.push(c);
      if (i % 2 === 0) {
        await c.write(crypto.randomBytes(2000 + i * 50));
      } else {
        // A valid upgrade followed by random frames.
        await c.write('GET /test/echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
        await c.write(crypto.randomBytes(3000));
      }
    }
    for (let i = 0; i < 20; i++) good.send(JSON.stringify({ type: 'ping', ref: i }));
    const deadline = Date.now() + 5000;
    while (got.filter((m) => m.type === 'pong').length < 20 && Date.now() < deadline) await sleep(20);
    assert.equal(got.filter((m) => m.type === 'pong').length, 20);
    for (const c of attackers) c.close();
    good.close();
    await once(good, 'close');
    assert.equal((await fetch(`${srv.url}/healthz`)).status, 200);
  } finally {
    await stopClean(srv, assert);
  }
});
