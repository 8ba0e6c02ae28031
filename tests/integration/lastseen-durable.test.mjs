// Durable last seen (issue 16 item 13): a user's last seen is kept in the
// settings store, written in batches every last-seen-flush-ms, so that it
// survives a clean restart and kill -9 once a flush has passed, and
// heartbeats never write it. The same --store is used across restarts;
// last seen is read exactly (the user's own view, ?as=<user>, and the
// admin API) and as a WebSocket watcher sees it (rounded to the minute).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopClean, sleep, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';

const KEY = 'lastseen-admin-key-0123456789abcdef';
const FLUSH_MS = 500;
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--reconnect-grace-ms', '0', '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100',
  '--last-seen-flush-ms', String(FLUSH_MS)];
const tag = `${process.pid}`;

function tmpStore() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-lastseen-'));
  return { dir, store: path.join(dir, 'settings.db') };
}

// The exact last seen of user: its own read (?as=user) and the admin read
// must agree; null when there is none, 'online' while online, undefined
// while it changed between the reads (callers poll).
async function exactLastSeen(srv, user) {
  const own = async () => (await (await fetch(`${srv.url}/v1/lastseen?user=${user}&as=${user}`)).json()).users[0];
  const a = await own();
  const adm = (await adminOk(srv, KEY, 'GET', `/v1/admin/lastseen?user=${user}`)).users[0];
  const b = await own();
  if (JSON.stringify(a) !== JSON.stringify(b)) return undefined;
  assert.deepEqual(adm.lastSeen?.at, a.lastSeen?.at, 'own and admin reads agree');
  return a.online ? 'online' : (a.lastSeen?.at ?? null);
}

async function writes(srv) {
  const r = await fetch(`${srv.url}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(r.status, 200);
  const body = await r.text();
  let n = 0;
  for (const m of body.matchAll(/^presenced_last_seen_writes_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

// A user who connects, and leaves: offline with an exact last seen.
async function onlineThenOffline(srv, user) {
  const c = await Client.open(srv, { user, device: 'desktop' });
  await waitUntil(async () => (await exactLastSeen(srv, user)) === 'online', `${user} online`);
  c.send({ type: 'leave' });
  await c.closed;
  return waitUntil(async () => {
    const at = await exactLastSeen(srv, user);
    return typeof at === 'number' ? at : null;
  }, `${user} offline with a last seen`);
}

// What an anonymous WebSocket watcher gets for user right after watching.
async function watchedLastSeen(srv, user) {
  const o = await Client.open(srv);
  o.send({ type: 'watch', users: [user], ref: 'w' });
  const p = await o.presenceOf(user);
  await o.close();
  assert.equal(p.status, 'offline');
  return p.lastSeen;
}

test('last seen survives a clean restart, to the ms', async () => {
  const { dir, store } = tmpStore();
  const U = `ls-clean-${tag}`;
  let srv = await startServer([...FLAGS, '--last-seen-flush-ms', '4000', '--store', store]);
  try {
    const at = await onlineThenOffline(srv, U);
    const before = await watchedLastSeen(srv, U);
    assert.equal(before.at, at - (at % 60000), 'a watcher sees it rounded down to the minute');
    await stopClean(srv, assert); // long before the 4 s flush: the stop writes it
    srv = await startServer([...FLAGS, '--store', store]);
    assert.equal(await waitUntil(() => exactLastSeen(srv, U), 'a last seen after restart', 2000), at);
    assert.deepEqual((await watchedLastSeen(srv, U)).at, before.at);
    // A user never seen still reads as never seen.
    assert.equal(await exactLastSeen(srv, `ls-never-${tag}`), null);
  } finally {
    await stopClean(srv, assert);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('last seen survives kill -9 once a flush has passed; an online user reads as seen when they came online', async () => {
  const { dir, store } = tmpStore();
  const U = `ls-kill-${tag}`;
  const V = `ls-live-${tag}`;
  let srv = await startServer([...FLAGS, '--store', store]);
  try {
    const at = await onlineThenOffline(srv, U);
    const tv = Date.now();
    const v = await Client.open(srv, { user: V, device: 'mobile' });
    await waitUntil(async () => (await exactLastSeen(srv, V)) === 'online', 'V online');
    await sleep(3 * FLUSH_MS); // the flush interval has passed
    const killed = Date.now();
    assert.equal((await srv.stop('SIGKILL')).signal, 'SIGKILL');
    await v.closed;
    srv = await startServer([...FLAGS, '--store', store]);
    assert.equal(await waitUntil(() => exactLastSeen(srv, U), 'U after kill -9', 2000), at);
    const atV = await waitUntil(async () => {
      const x = await exactLastSeen(srv, V);
      return typeof x === 'number' ? x : null;
    }, 'V after kill -9', 2000);
    assert.ok(atV >= tv - 5 && atV <= killed, `V seen between connect and kill: ${atV} in [${tv}, ${killed}]`);
    assert.deepEqual((await watchedLastSeen(srv, U)).at, at - (at % 60000));
  } finally {
    await stopClean(srv, assert);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a heartbeat storm writes no last seen', async () => {
  const srv = await startServer(FLAGS);
  const U = `ls-storm-${tag}`;
  try {
    const c = await Client.open(srv, { user: U, device: 'web' });
    await waitUntil(async () => (await exactLastSeen(srv, U)) === 'online', 'U online');
    await waitUntil(async () => (await writes(srv)) >= 1, 'the online note written');
    await sleep(2 * FLUSH_MS);
    const w0 = await writes(srv);
    const hb0 = Date.now();
    let beats = 0;
    // Heartbeats as fast as a broken client sends them, and activity reports
    // every 100 ms (within the status budget, msg-rate-status: 20/s).
    for (let round = 0; Date.now() - hb0 < 6 * FLUSH_MS; round++) {
      for (let i = 0; i < 20; i++, beats++) c.send({ type: 'heartbeat' });
      if (round % 4 === 0) c.send({ type: 'activity', active: true });
      await sleep(25);
    }
    await sleep(2 * FLUSH_MS);
    assert.ok(beats >= 1000, `a storm: ${beats}`);
    assert.equal(await writes(srv), w0, `no last-seen write for ${beats} heartbeats`);
    // Going offline is one more batch.
    c.send({ type: 'leave' });
    await c.closed;
    await waitUntil(async () => (await writes(srv)) === w0 + 1, 'the offline note written');
  } finally {
    await stopClean(srv, assert);
  }
});
