// SIGTERM/SIGINT: stop accepting, close 1001 to every WebSocket, exit 0
// within the drain time; the same behaviour with 1 and 4 workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import WebSocket from 'ws';
import { startServer } from './lib/server.mjs';

for (const workers of ['1', '4']) {
  test(`SIGTERM with workers=${workers}: every WebSocket gets 1001, exit 0`, async () => {
    const srv = await startServer(['--workers', workers, '--shutdown-drain-ms', '3000', '--drain-window-ms', '0']);
    const sockets = [];
    for (let i = 0; i < 12; i++) {
      const ws = new WebSocket(`${srv.wsUrl}/v1/ws`);
      ws.closedWith = new Promise((r) => ws.on('close', (code) => r(code)));
      sockets.push(ws);
    }
    await Promise.all(sockets.map((ws) => once(ws, 'open')));
    const t0 = Date.now();
    srv.child.kill('SIGTERM');
    const codes = await Promise.all(sockets.map((ws) => ws.closedWith));
    assert.deepEqual(new Set(codes), new Set([1001]));
    assert.ok(Date.now() - t0 < 500, `close 1001 arrived after ${Date.now() - t0} ms`);
    const [code, sig] = await once(srv.child, 'exit');
    assert.equal(sig, null);
    assert.equal(code, 0, srv.stderr);
    assert.ok(Date.now() - t0 < 3000 + 2000, 'exited within the drain time');
    assert.doesNotMatch(srv.stderr, /AddressSanitizer|runtime error/);
    // The listener is gone.
    await assert.rejects(new Promise((res, rej) => {
      const s = net.connect({ port: srv.port, host: '127.0.0.1' }, () => { s.destroy(); res(); });
      s.on('error', rej);
    }));
  });
}

test('SIGINT with a client that never answers the close: exit 0 after the drain time', async () => {
  const srv = await startServer(['--workers', '2', '--shutdown-drain-ms', '800', '--drain-window-ms', '0']);
  const ws = new WebSocket(`${srv.wsUrl}/v1/ws`);
  await once(ws, 'open');
  ws._socket.pause(); // never reads the close frame
  const t0 = Date.now();
  srv.child.kill('SIGINT');
  const [code] = await once(srv.child, 'exit');
  assert.equal(code, 0, srv.stderr);
  assert.ok(Date.now() - t0 < 4000);
  ws.terminate();
});

test('a request in progress at SIGTERM is answered: readyz 503, Connection: close', async () => {
  const srv = await startServer(['--workers', '1', '--shutdown-drain-ms', '2000']);
  const keep = net.connect({ port: srv.port, host: '127.0.0.1' });
  await once(keep, 'connect');
  let data = '';
  keep.on('data', (x) => { data += x; });
  const closed = once(keep, 'close');
  keep.write('GET /readyz HTTP/1.1\r\nHost: x\r\n'); // head not finished yet
  await new Promise((r) => setTimeout(r, 200));
  srv.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 200));
  keep.write('\r\n');
  await closed;
  assert.match(data, /^HTTP\/1\.1 503 /);
  assert.match(data, /Connection: close/);
  assert.match(data, /shutting_down/);
  const [code] = await once(srv.child, 'exit');
  assert.equal(code, 0, srv.stderr);
});

test('SIGTERM ends open event streams and exits 0', async () => {
  const srv = await startServer(['--workers', '2', '--shutdown-drain-ms', '3000']);
  const streams = [];
  for (let i = 0; i < 4; i++) {
    const s = net.connect({ port: srv.port, host: '127.0.0.1' });
    await once(s, 'connect');
    let data = '';
    s.on('data', (d) => { data += d; });
    s.write('GET /test/sse HTTP/1.1\r\nHost: x\r\n\r\n');
    streams.push({ s, closed: once(s, 'close'), get data() { return data; } });
  }
  await new Promise((r) => setTimeout(r, 300));
  for (const st of streams) assert.match(st.data, /id: 3/);
  srv.child.kill('SIGTERM');
  await Promise.all(streams.map((st) => st.closed));
  const [code] = await once(srv.child, 'exit');
  assert.equal(code, 0, srv.stderr);
  assert.doesNotMatch(srv.stderr, /AddressSanitizer|runtime error/);
});
