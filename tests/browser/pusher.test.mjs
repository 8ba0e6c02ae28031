// pusher-js 8's browser bundle in Debian's headless Chromium (playwright-core)
// against presenced with --pusher-app. presenced serves the page
// (tests/browser/pusher-page/index.html, --static-dir) and the WebSocket;
// the test plays what the app would serve, per browser context: the bundle
// (tests/node_modules/pusher-js/dist/web/pusher.min.js, routed, nothing
// copied into the repo) and the auth endpoint (/pusher/auth, which pusher-js
// POSTs to by XHR), signing with the `pusher` server library as the user of
// that context. (The document itself must come from presenced: Chromium's
// local network access checks refuse a loopback WebSocket to a page that
// playwright fulfilled, ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS.)
//  - Ann's and Bob's pages in two contexts subscribe to one presence
//    channel: each sees the other in its members with its user_info, Ann
//    gets member_added of Bob; Ann unsubscribes and subscribes again: Bob
//    sees member_removed then member_added of Ann.
//  - client events between the two pages, user_id attached, not echoed.
//  - a reload of Ann's page within the reconnect grace shows Bob nothing.
//  - Ann's page closed: Bob gets member_removed after the grace, once.
// Screenshots on failure under tests/out/pusher-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, MULT, ROOT } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, withScreenshots } from './lib.mjs';

const require = createRequire(import.meta.url);
const PusherServer = require('pusher');

const APP = { id: '4713', key: 'browser-key-1', secret: 'browser-secret-1' };
const GRACE = 1000;
const CHANNEL = `presence-pusher-browser-${process.pid}`;
let srv, api, browser, ctxA, ctxB, pageA, pageB;
const authLog = []; // [user, channel] of every authorization the back end signed

const BUNDLE = path.join(ROOT, 'tests/node_modules/pusher-js/dist/web/pusher.min.js');

// A browser context for one user: the bundle and the auth endpoint are
// routed (they never reach presenced); the page and the WebSocket go to it.
async function contextFor(user, name) {
  const ctx = await browser.newContext({ viewport: VIEWPORT });
  await ctx.route('**/pusher.min.js', (route) => route.fulfill({ path: BUNDLE, contentType: 'text/javascript' }));
  await ctx.route('**/pusher/auth', async (route) => {
    const form = new URLSearchParams(route.request().postData() || '');
    const channel = form.get('channel_name');
    authLog.push([user, channel]);
    const auth = api.authorizeChannel(form.get('socket_id'), channel,
      channel.startsWith('presence-') ? { user_id: user, user_info: { name } } : undefined);
    await route.fulfill({ contentType: 'application/json', body: JSON.stringify(auth) });
  });
  return ctx;
}

async function openPage(ctx) {
  const page = await ctx.newPage();
  if (process.env.PUSHER_LOG) {
    page.on('console', (m) => console.log(`[page] ${m.text()}`));
    page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  }
  await page.goto(`${srv.url}/?${new URLSearchParams({ key: APP.key, channel: CHANNEL, ...(process.env.PUSHER_LOG ? { log: '1' } : {}) })}`);
  await page.waitForFunction(() => window.__log.some((e) => e[0] === 'subscribed' || e[0] === 'error'), null, { timeout: T });
  return page;
}

const logOf = (page) => page.evaluate(() => window.__log);
const waitLog = (page, pred, arg) => page.waitForFunction(pred, arg, { timeout: T });
const memberEvents = async (page) => (await logOf(page)).filter((e) => e[0] === 'added' || e[0] === 'removed');

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'tests/browser/pusher-page',
    '--pusher-app', `${APP.id}:${APP.key}:${APP.secret}:client-events=true`,
    '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '50']);
  api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctxA = await contextFor('ann', 'Ann Lee');
  ctxB = await contextFor('bob', 'Bob Stone');
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

const pages = () => ({ A: pageA, B: pageB });

test('two users in a presence channel: each sees the other, with user_info, and member_added', () =>
  withScreenshots('pusher', 'members', pages, async () => {
    pageA = await openPage(ctxA);
    const [subA] = await logOf(pageA);
    assert.deepEqual(subA, ['subscribed', 'ann', 1, { ann: { name: 'Ann Lee' } }]);
    pageB = await openPage(ctxB);
    const [subB] = await logOf(pageB);
    assert.deepEqual(subB, ['subscribed', 'bob', 2, { ann: { name: 'Ann Lee' }, bob: { name: 'Bob Stone' } }]);
    await waitLog(pageA, () => window.__log.some((e) => e[0] === 'added'));
    assert.deepEqual(await memberEvents(pageA), [['added', 'bob', { name: 'Bob Stone' }]]);
    assert.deepEqual(authLog, [['ann', CHANNEL], ['bob', CHANNEL]], 'each page authorized once, by its own back end');

    // Ann leaves the channel (her socket stays) and comes back: Bob sees both.
    await pageA.evaluate((ch) => window.__pusher.unsubscribe(ch), CHANNEL);
    await waitLog(pageB, () => window.__log.some((e) => e[0] === 'removed'));
    await pageA.evaluate((ch) => window.__sub(ch), CHANNEL);
    await waitLog(pageB, () => window.__log.filter((e) => e[0] === 'added').length === 1);
    assert.deepEqual(await memberEvents(pageB), [['removed', 'ann'], ['added', 'ann', { name: 'Ann Lee' }]]);
    await waitLog(pageA, () => window.__log.filter((e) => e[0] === 'subscribed').length === 2);
    const again = (await logOf(pageA)).filter((e) => e[0] === 'subscribed')[1];
    assert.deepEqual(again, ['subscribed', 'ann', 2, { ann: { name: 'Ann Lee' }, bob: { name: 'Bob Stone' } }]);
    assert.equal(await pageB.evaluate((ch) => window.__pusher.channel(ch).members.count, CHANNEL), 2);
  }));

test('client events between the pages carry the sender\'s user_id and are not echoed', () =>
  withScreenshots('pusher', 'client', pages, async () => {
    const ok = await pageA.evaluate((ch) => window.__pusher.channel(ch).trigger('client-hello', { from: 'Ann', n: 1 }), CHANNEL);
    assert.equal(ok, true);
    await waitLog(pageB, () => window.__log.some((e) => e[0] === 'client'));
    await pageB.evaluate((ch) => window.__pusher.channel(ch).trigger('client-hello', { from: 'Bob', n: 2 }), CHANNEL);
    await waitLog(pageA, () => window.__log.some((e) => e[0] === 'client'));
    await sleep(300);
    const clientOf = async (p) => (await logOf(p)).filter((e) => e[0] === 'client');
    assert.deepEqual(await clientOf(pageB), [['client', { from: 'Ann', n: 1 }, 'ann']]);
    assert.deepEqual(await clientOf(pageA), [['client', { from: 'Bob', n: 2 }, 'bob']]);
  }));

test('a reload of Ann\'s page within the reconnect grace shows Bob nothing', () =>
  withScreenshots('pusher', 'reload', pages, async () => {
    const before = (await memberEvents(pageB)).length;
    const t0 = Date.now();
    await pageA.reload();
    await pageA.waitForFunction(() => window.__log.some((e) => e[0] === 'subscribed'), null, { timeout: T });
    const [sub] = await logOf(pageA);
    assert.deepEqual(sub, ['subscribed', 'ann', 2, { ann: { name: 'Ann Lee' }, bob: { name: 'Bob Stone' } }]);
    // Nothing can be awaited for "nothing happened": wait until a session
    // left unresumed would have ended (grace + debounce + slack).
    await sleep(Math.max(0, t0 + GRACE + 700 - Date.now()));
    assert.deepEqual((await memberEvents(pageB)).slice(before), [], 'Bob saw Ann leave or join during her reload');
    assert.equal(await pageB.evaluate((ch) => window.__pusher.channel(ch).members.count, CHANNEL), 2);
  }));

test('closing Ann\'s page: Bob gets member_removed after the grace, once', () =>
  withScreenshots('pusher', 'close', pages, async () => {
    const before = (await memberEvents(pageB)).length;
    const t0 = Date.now();
    await pageA.close();
    pageA = null;
    await pageB.waitForFunction((n) => window.__log.filter((e) => e[0] === 'added' || e[0] === 'removed').length > n,
      before, { timeout: GRACE + T });
    const took = Date.now() - t0;
    assert.ok(took >= GRACE - 100, `member_removed ${took} ms after the close, before the ${GRACE} ms grace`);
    assert.ok(took <= GRACE + 3000 * MULT, `member_removed only ${took} ms after the close`);
    await sleep(300);
    assert.deepEqual((await memberEvents(pageB)).slice(before), [['removed', 'ann']]);
    assert.equal(await pageB.evaluate((ch) => window.__pusher.channel(ch).members.count, CHANNEL), 1);
    assert.deepEqual(await pageB.evaluate((ch) => Object.keys(window.__pusher.channel(ch).members.members), CHANNEL), ['bob']);
  }));
