// Fan-out across workers (test endpoint /test/broadcast): a message is
// framed once, carried to every worker by the bus, and written to every
// socket; bursts are coalesced into fewer writev calls than frames. Runs
// with 1 and 4 workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean, sleep } from './lib/server.mjs';

async function metric(srv, name) {
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  return [...text.matchAll(new RegExp(`^${name}\\{worker="\\d+"\\} (\\d+)$`, 'gm'))]
    .reduce((a, m) => a + Number(m[1]), 0);
}

for (const workers of ['1', '4']) {
  test(`every client gets every broadcast, in order per sender (workers=${workers})`, async () => {
    const srv = await startServer(['--workers', workers]);
    try {
      const N = 12;
      const M = 25;
      const clients = [];
      for (let i = 0; i < N; i++) {
        const ws = new WebSocket(`${srv.wsUrl}/test/broadcast`);
        ws.got = [];
        ws.on('message', (d) => ws.got.push(JSON.parse(d.toString())));
        clients.push(ws);
      }
      await Promise.all(clients.map((ws) => once(ws, 'open')));
      await sleep(100);
      const framesBefore = await metric(srv, 'presenced_frames_out_total');
      const writevBefore = await metric(srv, 'presenced_writev_calls_total');
      for (let k = 0; k < M; k++) {
        for (let i = 0; i < N; i++) clients[i].send(JSON.stringify({ from: i, k }));
      }
      const want = N * M;
      const deadline = Date.now() + 10000;
      while (clients.some((ws) => ws.got.length < want) && Date.now() < deadline) await sleep(20);
      for (const ws of clients) {
        assert.equal(ws.got.length, want);
        for (let i = 0; i < N; i++) {
          const ks = ws.got.filter((m) => m.from === i).map((m) => m.k);
          assert.deepEqual(ks, [...Array(M).keys()], `order from sender ${i}`);
        }
      }
      const frames = (await metric(srv, 'presenced_frames_out_total')) - framesBefore;
      const writevs = (await metric(srv, 'presenced_writev_calls_total')) - writevBefore;
      assert.ok(frames >= want * N, `frames out ${frames}`);
      assert.ok(writevs < frames, `coalescing: ${writevs} writev calls for ${frames} frames`);
      if (workers === '4') assert.ok((await metric(srv, 'presenced_bus_msgs_in_total')) >= N * M * 4);
      for (const ws of clients) ws.close();
      await Promise.all(clients.map((ws) => once(ws, 'close')));
    } finally {
      await stopClean(srv, assert);
    }
  });
}
