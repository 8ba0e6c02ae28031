// End to end against the real server (build/asan/presenced, or $PRESENCED_BIN).
import { test } from 'node:test';
import assert from 'node:assert/strict';
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

test('e2e: dnd + custom text reach a watcher; resume keeps the session; a dead client goes offline after the grace', async () => {
  const srv = await startServer(['--workers', '2', '--reconnect-grace-ms', '1000']);
  const bSockets = [];
  let blocked = false;
  class BWS extends WS {
    constructor(url, p) { if (blocked) throw new Error('network down'); super(url, p); bSockets.push(this); }
  }
  const opts = { url: srv.url, backoff: { baseMs: 20, capMs: 100 }, window: null, document: null, navigator: null };
  const a = createClient({ ...opts, user: 'alice', WebSocket: WS });
  const b = createClient({ ...opts, user: 'bob', WebSocket: BWS });
  try {
    const flushes = [];
    a.onPresence((m) => flushes.push(m));
    a.watch(['bob']);
    await waitFor(() => b.state === 'open' && a.state === 'open');
    await b.setStatus('dnd');
    await b.setCustom({ text: 'Deep work', emoji: ':headphones:' });
    const p = await waitFor(() => { const v = a.getPresence('bob'); return v && v.status === 'dnd' && v.custom?.text === 'Deep work' && v; });
    assert.equal(p.custom.emoji, ':headphones:');
    assert.equal(p.stale, false);

    // Kill B's socket: it reconnects and resumes the same session; A sees no offline.
    const sid = b.sessionId;
    const statuses = [];
    a.onPresence((m) => statuses.push(m.get('bob')?.status));
    bSockets.at(-1)._socket.destroy();
    await waitFor(() => bSockets.length === 2 && b.state === 'open');
    assert.equal(b.sessionId, sid);
    assert.equal(b.welcome.resumed, true);
    await new Promise((r) => setTimeout(r, 1500)); // past the grace
    assert.ok(!statuses.includes('offline'), `statuses ${statuses}`);
    assert.equal(a.getPresence('bob').status, 'dnd');

    // Kill it again with the network down: after the grace A sees offline with a last seen.
    blocked = true;
    bSockets.at(-1)._socket.destroy();
    await waitFor(() => b.state === 'reconnecting');
    const off = await waitFor(() => { const v = a.getPresence('bob'); return v?.status === 'offline' && v; }, 8000);
    assert.ok(off.lastSeen && off.lastSeen.at > 0);

    // Back online: a new session (the old one ended), its dnd re-applied by the SDK.
    blocked = false;
    await waitFor(() => b.state === 'open');
    assert.notEqual(b.sessionId, sid);
    await waitFor(() => a.getPresence('bob')?.status === 'dnd');
  } finally {
    a.close(); b.close();
    await new Promise((r) => setTimeout(r, 100));
    await stopClean(srv, assert);
  }
});
