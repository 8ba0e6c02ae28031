// metrics-count.test.mjs - /metrics counts what the server received, also
// what it dropped early (issue 15, item 8): a burst of heartbeats throttled
// on the client's worker never reaches the owner's presence core, yet each
// is a heartbeat and a throttled one.
import assert from 'node:assert/strict';
import test from 'node:test';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

async function total(srv, name) {
  const body = await (await fetch(`${srv.url}/metrics`)).text();
  let sum = 0;
  for (const m of body.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

for (const workers of ['1', '2']) {
  test(`a burst of 50 heartbeats is counted, throttled ones too (workers=${workers})`, async () => {
    const srv = await startServer(['--workers', workers, '--heartbeat-min-ms', '10000']);
    try {
      const a = await Client.open(srv, { user: `hb-${process.pid}-${workers}` });
      const before = await total(srv, 'presenced_heartbeats_total');
      for (let i = 0; i < 50; i++) a.send({ type: 'heartbeat' });
      a.send({ type: 'ping', ref: 'p' });
      await a.next((m) => m.type === 'pong' && m.ref === 'p');
      await waitUntil(async () => (await total(srv, 'presenced_heartbeats_total')) - before >= 50,
        'heartbeats counted');
      assert.equal((await total(srv, 'presenced_heartbeats_total')) - before, 50);
      // The first may refresh the session; the other 49 are too close to it.
      assert.ok((await total(srv, 'presenced_heartbeats_throttled_total')) >= 49);
      a.close();
    } finally {
      await stopClean(srv, assert);
    }
  });
}
