// An invisible user's view is frozen (issue 16 item 6): while a user is
// invisible, nothing she does (a new device, idle-away, a status change,
// leaving) gives her watchers (WebSocket and SSE) any frame, exactly as a
// user who went offline at that moment and never came back; and turning
// invisibility off while she is offline shows the last seen of the moment
// she became invisible, sending nothing when that is what watchers have.
// Public last seen is rounded to the minute and says "seconds" without a
// value for its first minute, so the test waits just over a minute before
// X acts: only then would a fresh encoding of the frozen view differ.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep, MULT, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';
import { streamSse } from './lib/sse.mjs';

const KEY = 'frozen-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--reconnect-grace-ms', '0', '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100'];
const SETTLE = 400 * MULT; // well past the debounce: anything due has been sent
const tag = `${process.pid}`;
const X = `frz-x-${tag}`;
const W = `frz-w-${tag}`;

const admin = (srv, method, p, body) => adminOk(srv, KEY, method, p, body);
const minute = (t) => t - (t % 60000);

test('an invisible user\'s activity sends watchers nothing, and visibility while offline shows the frozen last seen', { timeout: 120000 * MULT }, async () => {
  const srv = await startServer(FLAGS);
  const live = new Set(); // clients that keep beating (the test waits past the TTL)
  const beat = setInterval(() => {
    for (const c of live) if (c.ws.readyState === 1) c.send({ type: 'heartbeat' });
  }, 1000);
  try {
    const x = await Client.open(srv, { user: X, device: 'desktop' });
    const w = await Client.open(srv, { user: W, device: 'web' });
    live.add(x).add(w);
    await waitUntil(async () => (await (await fetch(`${srv.url}/v1/presence?user=${X}`)).json())
      .users[0].status === 'online', 'X online');
    w.send({ type: 'watch', users: [X], ref: 'w' });
    assert.equal((await w.presenceOf(X)).status, 'online');
    const sse = await streamSse(`${srv.url}/v1/presence/events?user=${X}`);
    assert.equal(sse.status, 200);
    await sse.until((evs) => evs.some((e) => e.data?.presence?.status === 'online'));

    const tb = Date.now();
    await admin(srv, 'PUT', `/v1/admin/users/${X}/privacy`, { invisible: true });
    const ta = Date.now();
    const frozen = await w.presenceOf(X);
    assert.equal(frozen.status, 'offline');
    assert.ok(frozen.lastSeen.at >= minute(tb) && frozen.lastSeen.at <= minute(ta), JSON.stringify(frozen));
    await sse.until((evs) => evs.some((e) => e.data?.presence?.status === 'offline'));
    await sleep(SETTLE);
    const sseCount = sse.events.length;
    assert.deepEqual(w.drainPresence(X), []);

    // Over a minute later ("minutes ago" from now on), X acts.
    await sleep(Math.max(0, ta + 61000 - Date.now()));
    const x2 = await Client.open(srv, { user: X, device: 'mobile' }); // a new device
    live.add(x2);
    await sleep(SETTLE);
    x.send({ type: 'status', status: 'busy', ref: 's' }); // a status change
    assert.equal((await x.next((m) => m.ref === 's')).type, 'ack');
    await sleep(SETTLE);
    x2.send({ type: 'activity', active: false }); // idle-away on one device
    x.send({ type: 'custom', text: 'hidden', ref: 'c' });
    await x.next((m) => m.ref === 'c');
    await sleep(SETTLE);
    assert.deepEqual(w.drainPresence(X), [], 'no WebSocket frame while invisible');
    assert.equal(sse.events.length, sseCount, 'no SSE event while invisible');

    // X goes offline, still invisible: nothing either.
    x.send({ type: 'leave' });
    x2.send({ type: 'leave' });
    await x.closed;
    await x2.closed;
    const left = Date.now();
    await waitUntil(async () => {
      const r = await admin(srv, 'GET', `/v1/admin/lastseen?user=${X}`);
      return r.users[0].lastSeen && r.users[0].lastSeen.at >= ta + 60000;
    }, 'X truly offline');
    await sleep(SETTLE);
    assert.deepEqual(w.drainPresence(X), []);
    assert.equal(sse.events.length, sseCount);

    // Visible again while offline: as if she had gone offline when she
    // became invisible. Watchers already show that: nothing is sent.
    await admin(srv, 'PUT', `/v1/admin/users/${X}/privacy`, { invisible: false });
    await sleep(SETTLE);
    assert.deepEqual(w.drainPresence(X), [], 'no frame when visibility changes nothing visible');
    assert.equal(sse.events.length, sseCount, 'no SSE event either');
    const exact = (await admin(srv, 'GET', `/v1/admin/lastseen?user=${X}`)).users[0].lastSeen.at;
    assert.ok(exact >= tb - 5 && exact <= ta + 5, `the frozen moment, not ${left - exact} ms before the leave`);
    const pub = await (await fetch(`${srv.url}/v1/lastseen?user=${X}&as=${W}`)).json();
    assert.equal(pub.users[0].lastSeen.at, frozen.lastSeen.at);
    assert.equal(pub.users[0].lastSeen.ago, 'minutes');
    // A new watcher gets the same frozen last seen.
    const o = await Client.open(srv);
    o.send({ type: 'watch', users: [X], ref: 'o' });
    const seen = await o.presenceOf(X);
    assert.equal(seen.status, 'offline');
    assert.equal(seen.lastSeen.at, frozen.lastSeen.at);
    sse.close();
    await o.close();
    await w.close();
  } finally {
    clearInterval(beat);
    await stopClean(srv, assert);
  }
});
