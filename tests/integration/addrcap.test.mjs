// addrcap.test.mjs - per-address connection caps (issue 15, item 3):
// one address holding half-open requests cannot lock other clients out,
// the pending cap is on by default, and the established cap (off by
// default) refuses with 503. Sources are distinct 127.0.0.x addresses.
import assert from 'node:assert/strict';
import net from 'node:net';
import test from 'node:test';
import WebSocket from 'ws';
import { startServer, stopClean, MULT } from './lib/server.mjs';

// A socket from `from` that sends half a request head and holds it.
function halfOpen(port, from) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => {
      s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      resolve(s);
    });
    s.on('error', () => {});
    s.once('error', reject);
  });
}

// Resolves to what happens to a fresh socket from `from` asking /healthz:
// 'served' (a 200 came back) or 'closed' (closed without an answer).
function ask(port, from) {
  return new Promise((resolve) => {
    let got = '';
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => {
      s.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    });
    const timer = setTimeout(() => { s.destroy(); resolve('timeout'); }, 5000 * MULT);
    s.on('data', (d) => { got += d; });
    const done = () => { clearTimeout(timer); resolve(/^HTTP\/1\.1 200/.test(got) ? 'served' : 'closed'); };
    s.on('close', done);
    s.on('error', () => {});
  });
}

async function holdMany(port, from, n) {
  const socks = [];
  for (let i = 0; i < n; i++) socks.push(await halfOpen(port, from));
  return socks;
}

test('one address holding its pending cap is refused; other addresses are served', async () => {
  const srv = await startServer(['--workers', '2', '--max-pending-per-address', '8']);
  try {
    const held = await holdMany(srv.port, '127.0.0.11', 8);
    assert.equal(await ask(srv.port, '127.0.0.11'), 'closed', 'the 9th pending socket of one address is closed');
    assert.equal(await ask(srv.port, '127.0.0.12'), 'served', 'another address is not locked out');
    for (const s of held) s.destroy();
    // Once its sockets are gone the address is welcome again.
    let r;
    for (let i = 0; i < 50 && (r = await ask(srv.port, '127.0.0.11')) !== 'served'; i++)
      await new Promise((res) => setTimeout(res, 20));
    assert.equal(r, 'served');
    const m = await (await fetch(`${srv.url}/metrics`)).text();
    assert.match(m, /presenced_addr_refused_total(\{[^}]*\})? [1-9]/);
  } finally {
    await stopClean(srv, assert);
  }
});

test('the pending cap is on by default (256 per address)', async () => {
  const srv = await startServer(['--workers', '1']);
  try {
    const held = await holdMany(srv.port, '127.0.0.13', 256);
    assert.equal(await ask(srv.port, '127.0.0.13'), 'closed');
    assert.equal(await ask(srv.port, '127.0.0.14'), 'served');
    for (const s of held) s.destroy();
  } finally {
    await stopClean(srv, assert);
  }
});

test('a completed request makes a connection established: it leaves the pending count', async () => {
  const srv = await startServer(['--workers', '1', '--max-pending-per-address', '2']);
  try {
    // Three WebSockets from one address, one after the other: each is pending
    // only until its upgrade, so the cap of 2 pending does not refuse the third.
    const open = [];
    for (let i = 0; i < 3; i++) {
      const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=u${i}`, { localAddress: '127.0.0.15' });
      await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
      open.push(ws);
    }
    for (const ws of open) ws.close();
  } finally {
    await stopClean(srv, assert);
  }
});

test('max-connections-per-address refuses the next request with 503, off by default', async () => {
  const srv = await startServer(['--workers', '2', '--max-connections-per-address', '3']);
  const open = [];
  try {
    for (let i = 0; i < 3; i++) {
      const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=e${i}`, { localAddress: '127.0.0.16' });
      await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
      open.push(ws);
    }
    const status = await new Promise((resolve) => {
      const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=e4`, { localAddress: '127.0.0.16' });
      ws.on('unexpected-response', (req, res) => resolve(res.statusCode));
      ws.on('open', () => { ws.close(); resolve(101); });
      ws.on('error', () => {});
    });
    assert.equal(status, 503);
    const other = new WebSocket(`${srv.wsUrl}/v1/ws?user=e5`, { localAddress: '127.0.0.17' });
    await new Promise((res, rej) => { other.once('open', res); other.once('error', rej); });
    other.close();
  } finally {
    for (const ws of open) ws.close();
    await stopClean(srv, assert);
  }
  // Off by default: ten established connections from one address are fine.
  const srv2 = await startServer(['--workers', '1']);
  const many = [];
  try {
    for (let i = 0; i < 10; i++) {
      const ws = new WebSocket(`${srv2.wsUrl}/v1/ws?user=f${i}`, { localAddress: '127.0.0.18' });
      await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
      many.push(ws);
    }
  } finally {
    for (const ws of many) ws.close();
    await stopClean(srv2, assert);
  }
});
