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

test('e2e: setPrivacy makes a user invisible to a watcher and a room, every session is told, bad values are refused', async () => {
  const KEY = 'sdk-e2e-admin-key-0123456789abcdef';
  const srv = await startServer(['--workers', '2', '--presence-debounce-ms', '20', '--room-batch-ms', '20', '--admin-api-key', KEY]);
  const opts = { url: srv.url, bufferMs: 20, backoff: { baseMs: 20, capMs: 100 }, window: null, document: null, navigator: null, WebSocket: WS };
  const a1 = createClient({ ...opts, user: 'alice', device: 'desktop' });
  const a2 = createClient({ ...opts, user: 'alice', device: 'mobile' });
  const b = createClient({ ...opts, user: 'bob' });
  try {
    b.watch(['alice']);
    a1.watch(['alice']);
    const ra = a1.join('doc'), rb = b.join('doc');
    await Promise.all([ra.ready, rb.ready]);
    await waitFor(() => a1.privacy && a2.privacy && b.getPresence('alice')?.status === 'online' && rb.members.has('alice') &&
      a1.getPresence('alice')?.status === 'online');
    assert.deepEqual(a1.privacy, { online: 'everyone', lastSeen: 'everyone', invisible: false });
    assert.equal(b.getPresence('alice').version, undefined, "others' presence has no version");
    assert.equal(typeof a1.getPresence('alice').version, 'number', 'own presence has one');

    const told = [];
    a2.onPrivacy((p) => told.push(p.invisible));
    assert.deepEqual(await a1.setPrivacy({ invisible: true }), { online: 'everyone', lastSeen: 'everyone', invisible: true });
    await waitFor(() => told.includes(true));
    const off = await waitFor(() => { const p = b.getPresence('alice'); return p.status === 'offline' && p; });
    assert.deepEqual(off.devices, {});
    assert.equal(off.version, undefined);
    await waitFor(() => !rb.members.has('alice'));
    assert.equal(a1.getPresence('alice').status, 'online', 'alice still sees her true state');

    await assert.rejects(a1.setPrivacy({ lastSeen: 'friends' }), { code: 'bad_request' });
    assert.equal(a1.privacy.lastSeen, 'everyone');

    await a2.setPrivacy({ invisible: false });
    await waitFor(() => a1.privacy.invisible === false);
    await waitFor(() => b.getPresence('alice')?.status === 'online' && rb.members.has('alice'));

    // The admin API changes it too; then kicks one session, which stays closed.
    const r = await fetch(`${srv.url}/v1/admin/users/alice/privacy`, { method: 'PUT', headers: { Authorization: `Bearer ${KEY}` }, body: JSON.stringify({ lastSeen: 'nobody' }) });
    assert.equal(r.status, 200, await r.text());
    await waitFor(() => a1.privacy.lastSeen === 'nobody' && a2.privacy.lastSeen === 'nobody');
    const errors = [];
    a2.onError((e) => errors.push(e.code));
    const k = await fetch(`${srv.url}/v1/admin/users/alice/kick`, { method: 'POST', headers: { Authorization: `Bearer ${KEY}` }, body: JSON.stringify({ session: a2.sessionId, reason: 'signed out' }) });
    assert.equal(k.status, 200, await k.text());
    await waitFor(() => a2.state === 'closed');
    assert.deepEqual(errors, ['kicked']);
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(a2.state, 'closed', 'no reconnect after a kick');
    assert.equal(a1.state, 'open');
  } finally {
    a1.close(); a2.close(); b.close();
    await new Promise((r) => setTimeout(r, 100));
    await stopClean(srv, assert);
  }
});

test('e2e: room tokens from a token function, again for each connection; a join without one is forbidden', async () => {
  const { createHmac } = await import('node:crypto');
  const SECRET = 'sdk-room-token-secret-0123456789';
  const srv = await startServer(['--workers', '2', '--room-token-secret', SECRET, '--reconnect-grace-ms', '5000']);
  const sockets = [];
  class TWS extends WS { constructor(u, p) { super(u, p); sockets.push(this); } }
  const opts = { url: srv.url, backoff: { baseMs: 20, capMs: 100 }, window: null, document: null, navigator: null };
  const sign = ({ room, user }) => {
    const exp = Math.floor(Date.now() / 1000) + 60;
    return `${exp}.${createHmac('sha256', SECRET).update(`${user}:${room}:${exp}`).digest('hex')}`;
  };
  const a = createClient({ ...opts, user: 'alice', WebSocket: TWS });
  try {
    const conns = [];
    const room = a.join('doc-42', { meta: { name: 'Alice' }, token: async (req) => { conns.push(req.connectionId); return sign(req); } });
    await room.ready;
    assert.equal(room.members.get('alice').meta.name, 'Alice');
    const errs = [];
    const bad = a.join('doc-43');
    bad.onError((e) => errs.push(e.code));
    await waitFor(() => errs.length === 1);
    assert.deepEqual(errs, ['forbidden']);
    sockets.at(-1)._socket.destroy();
    await waitFor(() => conns.length === 2 && room.joined && a.state === 'open');
    assert.notEqual(conns[0], conns[1]);
    assert.equal(conns[1], a.welcome.connectionId);
  } finally {
    a.close();
    await new Promise((r) => setTimeout(r, 100));
    await stopClean(srv, assert);
  }
});

test('e2e: watch(users, { tier: "list" }) gets the batched presence_list into getPresence()', async () => {
  const srv = await startServer(['--workers', '2', '--watch-batch-ms', '300']);
  const opts = { url: srv.url, backoff: { baseMs: 20, capMs: 100 }, window: null, document: null, navigator: null };
  const frames = [];
  class SpyWS extends WS {
    constructor(url, p) { super(url, p); this.on('message', (d) => frames.push(JSON.parse(String(d)))); }
  }
  const a = createClient({ ...opts, user: 'lister', WebSocket: SpyWS });
  const bs = [];
  try {
    a.watch(['lb1', 'lb2', 'lb3'], { tier: 'list' });
    await waitFor(() => a.state === 'open' && a.getPresence('lb3'));
    for (const u of ['lb1', 'lb2', 'lb3']) bs.push(createClient({ ...opts, user: u, WebSocket: WS }));
    await waitFor(() => ['lb1', 'lb2', 'lb3'].every((u) => a.getPresence(u)?.status === 'online'));
    assert.ok(frames.some((m) => m.type === 'presence_list'), 'came as a presence_list');
    assert.ok(!frames.some((m) => m.type === 'presence' && m.presence.status === 'online'), 'no single online frames');
  } finally {
    for (const c of [a, ...bs]) c.close();
    await stopClean(srv, assert);
  }
});
