// Reloads and statuses, in Debian's headless Chromium (playwright-core),
// against a server with the default reconnect grace (5 s) and debounce
// (100 ms). Ann's demo page runs in one browser context, Bob's (the
// observer: a watcher of Ann and a member of her room) in another; every
// WebSocket frame Bob's page receives is recorded.
//  - Ann sets dnd + a custom status and reloads a page that takes 2 s to
//    load: Bob receives no frame about Ann at all (no offline/online, no
//    leave/join, no away, no cursor), and Ann is still dnd with her custom
//    status, in the same session, in the room.
//  - The standard's unload order (hidden, then pagehide) and a return from
//    the back/forward cache: the page pushes no away and no cursor removal,
//    and resumes its session.
//  - An explicit away sticks through a custom status and the tab becoming
//    visible (the SDK's activity:true).
//  - Ann closes her tab for good: Bob sees her offline within 6 s (the
//    grace plus the debounce), not after the 45 s TTL.
// Screenshots on failure under tests/out/reload-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, MULT } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, row, withScreenshots } from './lib.mjs';

const ROOM = 'reload-room';
const GRACE = 5000; // the server's default reconnect-grace-ms
const LOAD_MS = 2000; // how long Ann's reloaded page takes to load
let srv, browser, ctxA, ctxB, pageA, pageB;
let slow = false; // while true, Ann's app.js is served LOAD_MS late
const frames = []; // [ms, text] of every frame Bob's page received

async function openDemo(ctx, user, name, extra = {}) {
  const page = await ctx.newPage();
  if (user === 'bob') {
    page.on('websocket', (ws) => ws.on('framereceived', (f) => frames.push([Date.now(), String(f.payload)])));
  }
  const q = new URLSearchParams({ room: ROOM, user, name, device: 'desktop', ...extra });
  await page.goto(`${srv.url}/?${q}`);
  await page.waitForSelector('body[data-ready="yes"]', { timeout: T });
  return page;
}
// Frames Bob received since mark that mention Ann (presence, room deltas,
// ephemerals: anything).
const aboutAnn = (mark) => frames.slice(mark).map(([, f]) => f).filter((f) => f.includes('"ann"'));
const annPresence = (mark) => aboutAnn(mark).map((f) => JSON.parse(f)).filter((m) => m.type === 'presence');

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www']);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctxA = await browser.newContext({ viewport: VIEWPORT });
  ctxB = await browser.newContext({ viewport: VIEWPORT });
  await ctxA.route('**/app.js', async (route) => {
    if (slow) await sleep(LOAD_MS);
    await route.continue();
  });
  // hiddenAwayMs=50: were the unloading page's hidden state ever taken for
  // a hidden tab, Bob would see an away at once.
  pageA = await openDemo(ctxA, 'ann', 'Ann Lee', { hiddenAwayMs: '50' });
  pageB = await openDemo(ctxB, 'bob', 'Bob Stone');
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]:not(.gone)`, { timeout: T });
  await pageB.waitForFunction(() => window.__presenced.room.members.has('ann'), null, { timeout: T });
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

const pages = () => ({ A: pageA, B: pageB });

test('a reload (a 2 s page load) gives watchers and room members no event at all, and keeps dnd + custom', () =>
  withScreenshots('reload', 'reload', pages, async () => {
    await pageA.fill('#custom-text', 'In a meeting');
    await pageA.click('#custom-save');
    await pageA.click('#status-buttons button[data-status="dnd"]');
    const r = `${row('ann')}[data-status="dnd"]`;
    await pageB.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('In a meeting'), r, { timeout: T });
    const before = await pageA.evaluate(() => window.__presenced.client.sessionId);
    assert.ok(before);
    const mark = frames.length;

    slow = true;
    const t0 = Date.now();
    await pageA.reload({ waitUntil: 'commit', timeout: T });
    await pageA.waitForSelector('body[data-ready="yes"]', { timeout: T + LOAD_MS });
    slow = false;
    assert.ok(Date.now() - t0 >= LOAD_MS, `the page took ${Date.now() - t0} ms to load`);
    await pageA.waitForFunction(() => window.__presenced.room.joined, null, { timeout: T });
    // Nothing can be awaited for "nothing happened": wait until a session
    // left unresumed would have ended (grace + debounce + slack), counted
    // from the reload.
    await sleep(Math.max(0, t0 + GRACE + 1000 - Date.now()));
    assert.deepEqual(aboutAnn(mark), [], 'Bob received frames about Ann during her reload');
    const w = await pageA.evaluate(() => window.__presenced.client.welcome);
    assert.equal(w.resumed, true, JSON.stringify(w));
    assert.equal(w.sessionId, before, 'the same session');
    // Ann's own page shows what she chose.
    await pageA.waitForSelector('#status-buttons button.on[data-status="dnd"]', { timeout: T });
    await pageA.waitForFunction(() => document.querySelector('#members li[data-user="ann"] .custom-text')?.textContent === 'In a meeting', null, { timeout: T });
    assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'dnd');
    assert.doesNotMatch(await pageB.getAttribute(row('ann'), 'class'), /gone|stale/);
    assert.equal(await pageB.textContent(`${row('ann')} .custom-text`), 'In a meeting');
    assert.equal(await pageB.evaluate(() => window.__presenced.room.members.has('ann')), true);
  }));

test('hidden, pagehide, then back from the cache (the standard event order): the page pushes no away, nobody sees a thing', () =>
  withScreenshots('reload', 'bfcache', pages, async () => {
    // Chromium fires pagehide before the unload's visibilitychange; the
    // HTML standard (and Firefox) the other way round. Play the standard's
    // order on Ann's page, as a visit to the back/forward cache does.
    await pageA.click('#status-buttons button[data-status="online"]');
    await pageB.waitForSelector(`${row('ann')}[data-status="online"]`, { timeout: T });
    const mark = frames.length;
    const setVisibility = (state) => pageA.evaluate((st) => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => st });
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => st === 'hidden' });
      document.dispatchEvent(new Event('visibilitychange'));
    }, state);
    await pageA.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
      document.dispatchEvent(new Event('visibilitychange'));
      window.dispatchEvent(new PageTransitionEvent('pagehide', { persisted: true }));
    });
    await pageA.waitForFunction(() => window.__presenced.client.state === 'closed', null, { timeout: T });
    // Past hiddenAwayMs (50 ms) and the page's own deferred work: a timer
    // that survived the pagehide would have fired by now.
    await sleep(300);
    const before = await pageA.evaluate(() => window.__presenced.client.sessionId);
    await pageA.evaluate(() => window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true })));
    await setVisibility('visible');
    await pageA.waitForFunction(() => window.__presenced.client.state === 'open', null, { timeout: T });
    const w = await pageA.evaluate(() => window.__presenced.client.welcome);
    assert.equal(w.resumed, true, JSON.stringify(w));
    assert.equal(w.sessionId, before);
    // A marker: Ann's changes reach Bob in order.
    await pageA.fill('#custom-text', 'marker');
    await pageA.click('#custom-save');
    await pageB.waitForFunction(() => document.querySelector('#members li[data-user="ann"] .custom-text')?.textContent === 'marker', null, { timeout: T });
    const seen = aboutAnn(mark).map((f) => JSON.parse(f));
    assert.deepEqual(seen.map((m) => [m.type, m.presence?.status, m.presence?.custom?.text]), [['presence', 'online', 'marker']], JSON.stringify(seen));
  }));

test('an explicit away sticks through a custom status and the tab becoming visible', () =>
  withScreenshots('reload', 'away', pages, async () => {
    await pageA.click('#status-buttons button[data-status="away"]');
    await pageB.waitForSelector(`${row('ann')}[data-status="away"]`, { timeout: T });
    const mark = frames.length;
    await pageA.fill('#custom-text', 'Back at two');
    await pageA.click('#custom-save');
    await pageB.waitForFunction(() => document.querySelector('#members li[data-user="ann"] .custom-text')?.textContent === 'Back at two', null, { timeout: T });
    const setVisibility = (state) => pageA.evaluate((s) => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => s });
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => s === 'hidden' });
      document.dispatchEvent(new Event('visibilitychange'));
    }, state);
    await setVisibility('hidden');
    await setVisibility('visible'); // the SDK reports activity:true
    await pageA.mouse.move(20, 20); // and real input, for the idle tracker
    // A marker after the activity: Ann's changes reach Bob in order, so once
    // he sees it, whatever the activity did has reached him too.
    await pageA.fill('#custom-text', 'Back at three');
    await pageA.click('#custom-save');
    await pageB.waitForFunction(() => document.querySelector('#members li[data-user="ann"] .custom-text')?.textContent === 'Back at three', null, { timeout: T });
    const seen = annPresence(mark);
    assert.ok(seen.length >= 2, JSON.stringify(seen));
    assert.deepEqual(seen.map((m) => m.presence.status), seen.map(() => 'away'), JSON.stringify(seen));
    assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'away');
    await pageA.waitForSelector('#status-buttons button.on[data-status="away"]', { timeout: T });
  }));

test('closing the tab for good: offline for Bob within 6 s (grace + debounce), not after the TTL', () =>
  withScreenshots('reload', 'close', pages, async () => {
    const t0 = Date.now();
    await pageA.close();
    pageA = null;
    await pageB.waitForSelector(`${row('ann')}[data-status="offline"]`, { timeout: 6000 * MULT + 2000 });
    const took = Date.now() - t0;
    assert.ok(took <= 6000 * MULT, `offline after ${took} ms`);
    await pageB.waitForFunction(() => !window.__presenced.room.members.has('ann'), null, { timeout: 1000 * MULT });
    assert.match(await pageB.getAttribute(row('ann'), 'class'), /gone/);
  }));
