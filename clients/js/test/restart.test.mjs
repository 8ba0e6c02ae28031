// The SDK across a clean restart of a single node (issue 20): the drain's
// reconnect message makes each client come back and resume its session,
// which the next start restored in its reconnect grace, so a watcher never
// sees its contact go offline and a room never loses a member.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import WS from '../../../tests/node_modules/ws/index.js';
import { startServer, stopClean } from '../../../tests/integration/lib/server.mjs';
import { createClient } from '../index.js';

function waitFor(pred, ms = 8000) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const iv = setInterval(() => {
      let v; try { v = pred(); } catch { v = undefined; }
      if (v) { clearInterval(iv); resolve(v); } else if (Date.now() - t0 > ms) { clearInterval(iv); reject(new Error('timed out')); }
    }, 10);
  });
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

test('restart: the SDK resumes after the drain; its watcher and room see nobody leave', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-sdk-restart-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const GRACE = 4000;
  const flags = ['--workers', '2', '--port', String(port), '--store', path.join(dir, 's.db'),
    '--reconnect-grace-ms', String(GRACE), '--drain-window-ms', '300', '--presence-debounce-ms', '20',
    '--room-batch-ms', '20'];
  let srv = await startServer(flags);
  const opts = { url: srv.url, backoff: { baseMs: 50, capMs: 200 }, window: null, document: null,
    navigator: null, WebSocket: WS };
  const a = createClient({ ...opts, user: 'alice' });
  const b = createClient({ ...opts, user: 'bob' });
  try {
    a.watch(['bob']);
    await waitFor(() => a.state === 'open' && b.state === 'open');
    await b.setStatus('dnd');
    const ra = a.join('doc', { meta: { name: 'Alice' } });
    const rb = b.join('doc', { meta: { name: 'Bob' } });
    await waitFor(() => a.getPresence('bob')?.status === 'dnd');
    await waitFor(() => ra.members.size === 2 && rb.members.size === 2);
    const sids = [a.sessionId, b.sessionId];
    const statuses = [];
    const sizes = [];
    a.onPresence((m) => statuses.push(m.get('bob')?.status));
    ra.onChange(() => sizes.push(ra.members.size));

    const { code } = await srv.stop('SIGTERM');
    assert.equal(code, 0, srv.stderr);
    srv = await startServer(flags);
    await waitFor(() => a.state === 'open' && b.state === 'open' && a.welcome?.resumed && b.welcome?.resumed);
    assert.deepEqual([a.sessionId, b.sessionId], sids, 'the same sessions');
    await waitFor(() => ra.joined && rb.joined);
    await new Promise((r) => setTimeout(r, GRACE + 1000)); // past the restored grace
    assert.ok(!statuses.includes('offline'), `bob's statuses at alice: ${statuses}`);
    assert.equal(a.getPresence('bob').status, 'dnd');
    assert.ok(sizes.every((n) => n === 2), `room sizes at alice: ${sizes}`);
    assert.deepEqual([...ra.members.keys()].sort(), ['alice', 'bob']);
    assert.deepEqual(ra.members.get('bob').meta, { name: 'Bob' });
  } finally {
    a.close(); b.close();
    await new Promise((r) => setTimeout(r, 100));
    await stopClean(srv, assert);
  }
});
