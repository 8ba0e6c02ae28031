// phoenix.js 1.8.16's browser bundle in Debian's headless Chromium
// (playwright-core) on its LongPoll transport, which in a browser speaks
// XMLHttpRequest (the Node tests exercise its fetch path), against
// presenced's /socket/longpoll. presenced serves the page
// (tests/browser/phoenix-longpoll-page/index.html, --static-dir); the bundle is
// routed from tests/node_modules/phoenix, nothing copied into the repo.
//  - Ann's page on LongPoll and Bob's on WebSocket join one topic: each
//    sees both keys; a second page of Ann's on WebSocket is a second meta
//    of one key.
//  - Ann's long-poll page closed: her long-poll meta leaves once it misses
//    its polls (1.5 windows) and the reconnect grace; her WebSocket meta stays.
// Screenshots on failure under tests/out/phoenix-lp-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, MULT, ROOT } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, withScreenshots } from './lib.mjs';

const GRACE = 500;
const WINDOW = 1000;
const TOPIC = `room:phoenix-lp-browser-${process.pid}`;
const BUNDLE = path.join(ROOT, 'tests/node_modules/phoenix/priv/static/phoenix.min.js');
let srv, browser, ctx, pageA, pageA2, pageB;

async function openPage(query) {
  const page = await ctx.newPage();
  await page.goto(`${srv.url}/?${new URLSearchParams({ topic: TOPIC, ...query })}`);
  await page.waitForFunction(() => window.__log.some((e) => e[0] === 'joined' || e[0] === 'error'), null, { timeout: T });
  return page;
}

const lastSync = (page) => page.evaluate(() => (window.__log.filter((e) => e[0] === 'sync').pop() || [])[1]);
const waitSync = (page, want) => page.waitForFunction((w) => {
  const s = window.__log.filter((e) => e[0] === 'sync').pop();
  return s && JSON.stringify(s[1]) === JSON.stringify(w);
}, want, { timeout: T + WINDOW * 3 });

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'tests/browser/phoenix-longpoll-page',
    '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '50',
    '--phoenix-longpoll-window-ms', String(WINDOW)]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctx = await browser.newContext({ viewport: VIEWPORT });
  await ctx.route('**/phoenix.min.js', (route) => route.fulfill({ path: BUNDLE, contentType: 'text/javascript' }));
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

const pages = () => ({ A: pageA, A2: pageA2, B: pageB });

test('a LongPoll page and a WebSocket page see each other; a user\'s two pages are one key, two metas', () =>
  withScreenshots('phoenix-lp', 'join', pages, async () => {
    pageA = await openPage({ user: 'ann', transport: 'longpoll', meta: '{"tab":"lp"}' });
    assert.deepEqual((await pageA.evaluate(() => window.__log)).find((e) => e[0] === 'joined'), ['joined', 'longpoll']);
    pageB = await openPage({ user: 'bob', meta: '{"tab":"ws"}' });
    await waitSync(pageA, [['ann', 1], ['bob', 1]]);
    await waitSync(pageB, [['ann', 1], ['bob', 1]]);
    pageA2 = await openPage({ user: 'ann', meta: '{"tab":"ws2"}' });
    await waitSync(pageB, [['ann', 2], ['bob', 1]]);
    await waitSync(pageA, [['ann', 2], ['bob', 1]]);
  }));

test('closing the LongPoll page: its meta leaves after 1.5 windows and the grace, the key stays', () =>
  withScreenshots('phoenix-lp', 'close', pages, async () => {
    const t0 = Date.now();
    await pageA.close();
    pageA = null;
    await waitSync(pageB, [['ann', 1], ['bob', 1]]);
    const took = Date.now() - t0;
    assert.ok(took >= WINDOW * 1.5 + GRACE - 300 * MULT, `left after the window and the grace (${took} ms)`);
    assert.deepEqual(await lastSync(pageA2), [['ann', 1], ['bob', 1]]);
  }));
