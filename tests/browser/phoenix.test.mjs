// phoenix.js 1.8 (Socket + Presence, WebSocket transport) and realtime-js
// 2.119 (vsn 2.0.0 and 1.0.0) in Debian's headless Chromium (playwright-core)
// against presenced. presenced serves the page
// (tests/browser/phoenix-page/index.html, --static-dir) and the WebSocket;
// the test routes the libraries from tests/node_modules per browser context
// (phoenix's priv/static/phoenix.mjs, realtime-js's dist/module with the
// ".js" its extensionless imports leave out, and @supabase/phoenix's ESM
// build for its bare import), nothing copied into the repo. (The document
// itself must come from presenced: see pusher.test.mjs.) For each library
// and serializer:
//  - Ann in two tabs and Bob: Bob sees one key "ann" with two metas; a
//    native client in the same room appears as one meta, its patch is a
//    leave + join of its key, its leave a leave; Ann's first tab closed:
//    her key keeps one meta after the grace.
//  - heartbeats: the page's socket sends them and gets phx_reply ok on
//    topic "phoenix"; the socket stays.
//  - the rate limit: of 40 broadcasts at once some are refused with
//    "Too many ... per second"; exactly the accepted ones reach the other
//    page.
//  - a bad frame: the server closes Bob's socket (1007); while he is away a
//    native member leaves and another joins; after the reconnect Bob's
//    presence (syncState/syncDiff) is the room's, with a leave and a join
//    for those two and nothing for Ann.
//  - realtime-js 2.0.0: an ArrayBuffer broadcast arrives as the same bytes.
// Screenshots on failure under tests/out/phoenix-*.png.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, waitUntil, MULT, ROOT } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, withScreenshots } from './lib.mjs';

const GRACE = 1000;
const NM = path.join(ROOT, 'tests/node_modules');
const FILES = {
  '/lib/phoenix.mjs': path.join(NM, 'phoenix/priv/static/phoenix.mjs'),
  '/lib/supabase-phoenix.mjs': path.join(NM, '@supabase/phoenix/priv/static/phoenix.mjs'),
};
const RT = path.join(NM, '@supabase/realtime-js/dist/module');
let srv, browser;

// A file of the libraries for a routed URL path, or null.
function libFile(pathname) {
  if (FILES[pathname]) return FILES[pathname];
  if (!pathname.startsWith('/lib/rt/')) return null;
  const f = path.normalize(path.join(RT, pathname.slice('/lib/rt/'.length)));
  if (!f.startsWith(RT)) return null;
  return fs.existsSync(f) && fs.statSync(f).isFile() ? f : (fs.existsSync(`${f}.js`) ? `${f}.js` : null);
}

async function newContext() {
  const ctx = await browser.newContext({ viewport: VIEWPORT });
  await ctx.route('**/lib/**', (route) => {
    const f = libFile(new URL(route.request().url()).pathname);
    return f ? route.fulfill({ path: f, contentType: 'text/javascript' }) : route.fulfill({ status: 404, body: 'no such file' });
  });
  return ctx;
}

async function openPage(ctx, q) {
  const page = await ctx.newPage();
  if (process.env.PHX_LOG) {
    page.on('console', (m) => console.log(`[page ${q.user}] ${m.text()}`));
    page.on('pageerror', (e) => console.log(`[page ${q.user} error] ${e.message}`));
  }
  await page.goto(`${srv.url}/?${new URLSearchParams(q)}`);
  await page.waitForFunction(() => window.__log.some((e) => e[0] === 'joined' || e[0] === 'join-error' ||
    String(e[0]).startsWith('status-')), null, { timeout: T });
  const log = await page.evaluate(() => window.__log);
  assert.ok(log.some((e) => e[0] === 'joined'), `the page of ${q.user} joined: ${JSON.stringify(log)}`);
  return page;
}

const logOf = (page) => page.evaluate(() => window.__log);
const listOf = (page) => page.evaluate(() => window.__api.list());
const without = (list, key) => list.filter(([k]) => k !== key);
const waitFor = (page, fn, arg, ms = T) => page.waitForFunction(fn, arg, { timeout: ms });
// Presence events (join/leave) of key in page's log after index from.
const eventsOf = async (page, key, from = 0) => (await logOf(page)).slice(from)
  .filter((e) => (e[0] === 'join' || e[0] === 'leave') && e[1] === key).map((e) => e[0]);

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'tests/browser/phoenix-page',
    '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '50', '--heartbeat-min-ms', '200',
    '--heartbeat-interval-ms', '1000', '--session-ttl-ms', '4000']);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

for (const [lib, vsn] of [['phoenix', '2.0.0'], ['phoenix', '1.0.0'], ['realtime', '2.0.0'], ['realtime', '1.0.0']]) {
  describe(`${lib} ${vsn} in Chromium`, () => {
    const tag = `${lib}-${vsn.replace(/\./g, '')}`;
    // phoenix.js joins the room's own topic; realtime-js prefixes "realtime:".
    const room = `${lib === 'phoenix' ? 'room:' : ''}brw-${tag}-${process.pid}`;
    const q = (user, meta, extra = {}) => ({ lib, vsn, user, topic: room, meta: JSON.stringify(meta), ...extra });
    let ctxA, ctxB, a1, a2, b;
    const natives = [];
    const pages = () => ({ a1, a2, b });

    before(async () => { ctxA = await newContext(); ctxB = await newContext(); });
    after(async () => {
      for (const n of natives) await n.close().catch(() => {});
      await ctxA?.close();
      await ctxB?.close();
    });

    test('two users and two tabs: one key with two metas; a native member joins, updates and leaves; a tab closes', () =>
      withScreenshots(`phoenix-${tag}`, 'members', pages, async () => {
        a1 = await openPage(ctxA, q('ann', { tab: 1 }));
        a2 = await openPage(ctxA, q('ann', { tab: 2 }));
        b = await openPage(ctxB, q('bob', { tab: 'b' }));
        await waitFor(b, () => window.__api.list().some(([k, m]) => k === 'ann' && m.length === 2));
        await waitFor(b, () => window.__api.list().length === 2);
        const list = await listOf(b);
        assert.deepEqual(list.map(([k, m]) => [k, m.map((x) => x.tab).sort()]), [['ann', [1, 2]], ['bob', ['b']]]);
        assert.deepEqual(without(await listOf(a1), 'bob'), without(list, 'bob'), 'the tabs see what Bob sees');

        const nat = await Client.open(srv, { user: 'nat' });
        natives.push(nat);
        nat.send({ type: 'join', room, meta: { name: 'Nat' }, ref: 'j' });
        await nat.next((m) => m.type === 'room_joined' && m.ref === 'j');
        await waitFor(b, () => window.__api.list().some(([k]) => k === 'nat'));
        assert.deepEqual((await listOf(b)).find(([k]) => k === 'nat')[1], [{ name: 'Nat' }], 'a native member is one meta');
        const mark = (await logOf(b)).length;
        nat.send({ type: 'patch', room, meta: { name: 'Nat 2' }, ref: 'p' });
        await waitFor(b, () => window.__api.list().some(([k, m]) => k === 'nat' && m[0].name === 'Nat 2'));
        assert.deepEqual((await listOf(b)).find(([k]) => k === 'nat')[1], [{ name: 'Nat 2' }]);
        // An update is one diff with the old meta in leaves and the new in
        // joins; syncDiff reports its joins first.
        assert.deepEqual(await eventsOf(b, 'nat', mark), ['join', 'leave'], 'an update is a join and a leave of the key');
        nat.send({ type: 'room_leave', room, ref: 'l' });
        await waitFor(b, () => !window.__api.list().some(([k]) => k === 'nat'));
        assert.deepEqual(await eventsOf(b, 'nat', mark), ['join', 'leave', 'leave']);

        const t0 = Date.now();
        const before = (await logOf(b)).length;
        await a1.close();
        a1 = null;
        await waitFor(b, () => window.__api.list().some(([k, m]) => k === 'ann' && m.length === 1), null, GRACE + T);
        assert.ok(Date.now() - t0 >= GRACE - 100, 'the closed tab\'s meta goes after the grace');
        assert.deepEqual((await listOf(b)).find(([k]) => k === 'ann')[1].map((m) => m.tab), [2]);
        assert.deepEqual(await eventsOf(b, 'ann', before), ['leave'], 'one leave of one meta, the key stays');
      }));

    test('heartbeats go out and are answered ok on topic phoenix; the socket stays', () =>
      withScreenshots(`phoenix-${tag}`, 'heartbeat', pages, async () => {
        const ctx = await newContext();
        try {
          const c = await openPage(ctx, q('carl', { tab: 'c' }, { hb: '300' }));
          await waitFor(c, () => window.__log.filter((e) => e[0] === 'heartbeat-out').length >= 3, null, 5000 * MULT);
          const log = await logOf(c);
          const replies = log.filter((e) => e[0] === 'in-phoenix' && e[1].includes('phx_reply') && e[1].includes('"ok"'));
          assert.ok(replies.length >= 2, `heartbeat replies: ${JSON.stringify(log.filter((e) => e[0] === 'in-phoenix'))}`);
          assert.ok(!log.some((e) => e[0] === 'ws-close'), 'the socket was not closed');
          assert.equal(await c.evaluate(() => window.__api.connected()), true);
        } finally {
          await ctx.close();
        }
      }));

    test('broadcasts over the rate limit are refused with a reason; the accepted ones reach the other page', () =>
      withScreenshots(`phoenix-${tag}`, 'rate', pages, async () => {
        const seen0 = (await logOf(a2)).filter((e) => e[0] === 'broadcast').length;
        const results = await b.evaluate(async (isPhoenix) => Promise.all(Array.from({ length: 40 }, (_, i) => (isPhoenix
          ? window.__api.push('broadcast', { type: 'broadcast', event: 'cursor', payload: { i } })
          : window.__api.send({ i })))), lib === 'phoenix');
        const ok = results.filter((r) => r === 'ok' || r[0] === 'ok').length;
        assert.ok(ok >= 20 && ok < 40, `${ok} of 40 accepted`);
        if (lib === 'phoenix') {
          const refused = results.filter((r) => r[0] === 'error');
          assert.equal(refused.length, 40 - ok);
          assert.match(refused[0][1].reason, /Too many messages per second/);
        }
        await waitFor(a2, ([n, want]) => window.__log.filter((e) => e[0] === 'broadcast').length - n >= want, [seen0, ok]);
        await sleep(200);
        assert.equal((await logOf(a2)).filter((e) => e[0] === 'broadcast').length - seen0, ok, 'exactly the accepted ones');
        await sleep(1100); // the bucket refills
      }));

    test('a bad frame closes Bob\'s socket; after the reconnect his presence is the room\'s (syncState/syncDiff)', () =>
      withScreenshots(`phoenix-${tag}`, 'reconnect', pages, async () => {
        const leaver = await Client.open(srv, { user: 'leo' });
        const joiner = await Client.open(srv, { user: 'jo' });
        natives.push(leaver, joiner);
        leaver.send({ type: 'join', room, meta: { name: 'Leo' }, ref: 'j' });
        await leaver.next((m) => m.type === 'room_joined' && m.ref === 'j');
        await waitFor(b, () => window.__api.list().some(([k]) => k === 'leo'));
        const mark = (await logOf(b)).length;
        await b.evaluate(() => { window.__reconnectMs = 2500; window.__api.raw('this is not a phoenix frame'); });
        await waitFor(b, () => window.__log.some((e) => e[0] === 'ws-close'));
        const closed = (await logOf(b)).slice(mark).find((e) => e[0] === 'ws-close');
        assert.equal(closed[1], 1007, 'the server closes a socket that sent an undecodable frame');
        // While Bob is away: Leo leaves, Jo joins.
        leaver.send({ type: 'room_leave', room, ref: 'l' });
        await leaver.next((m) => m.ref === 'l');
        joiner.send({ type: 'join', room, meta: { name: 'Jo' }, ref: 'j' });
        await joiner.next((m) => m.type === 'room_joined' && m.ref === 'j');
        await waitFor(b, () => window.__api.connected() && window.__api.list().some(([k]) => k === 'jo'), null, 5000 * MULT + T);
        await b.evaluate(() => { window.__reconnectMs = 200; });
        await waitFor(b, () => !window.__api.list().some(([k]) => k === 'leo'));
        const list = without(await listOf(b), 'bob');
        assert.deepEqual(list, [['ann', [{ tab: 2 }]], ['jo', [{ name: 'Jo' }]]], 'the room as it is now');
        assert.deepEqual(list, without(await listOf(a2), 'bob'), 'as Ann sees it');
        assert.deepEqual(await eventsOf(b, 'leo', mark), ['leave']);
        assert.deepEqual(await eventsOf(b, 'jo', mark), ['join']);
        assert.deepEqual(await eventsOf(b, 'ann', mark), [], 'nothing for Ann, who stayed');
        joiner.send({ type: 'room_leave', room, ref: 'l2' });
        await waitFor(b, () => !window.__api.list().some(([k]) => k === 'jo'));
      }));

    if (lib === 'realtime' && vsn === '2.0.0') {
      test('an ArrayBuffer broadcast reaches the other page as the same bytes', () =>
        withScreenshots(`phoenix-${tag}`, 'binary', pages, async () => {
          const bytes = [0, 1, 2, 127, 128, 250, 255, 61];
          assert.equal(await b.evaluate((arr) => window.__api.sendBytes(arr), bytes), 'ok');
          await waitFor(a2, () => window.__log.some((e) => e[0] === 'broadcast' && e[1] && e[1].bytes));
          const got = (await logOf(a2)).filter((e) => e[0] === 'broadcast' && e[1] && e[1].bytes);
          assert.deepEqual(got.map((e) => e[1].bytes), [bytes]);
        }));
    }

    test('the pages close cleanly', async () => {
      for (const p of [a2, b]) await p?.evaluate(() => window.__api.close()).catch(() => {});
      await Promise.all([a2?.close(), b?.close()]);
      a2 = b = null;
    });
  });
}
