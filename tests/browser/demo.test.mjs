// The demo page end to end, in Debian's headless Chromium driven by
// playwright-core: two pages (two browser contexts, so two users) in one
// room. A sets dnd with a custom status -> B shows it; A's cursor moves ->
// B draws it; A hides its tab -> B sees away once A's hiddenAwayMs (300 ms
// here) has passed, and presence is re-asserted on return; a server restart
// on the same port -> both pages reconnect and resume without a render
// storm; A closes -> B shows A offline when the reconnect grace (1 s here)
// ends, with a last-seen text. (Reloads: reload.test.mjs.) Each test saves screenshots of both pages on
// failure under tests/out/. PRESENCED_DEMO_PNG=path also writes the demo
// screenshot (docs/demo.png) from B's page during the cursor test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, ROOT, MULT } from '../integration/lib/server.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const SERVER_ARGS = ['--workers', '2', '--static-dir', 'www', '--reconnect-grace-ms', '1000', '--presence-debounce-ms', '50'];
const ROOM = 'e2e-room';
const T = 10000 * MULT;

let srv;
let browser;
let ctxA, ctxB, pageA, pageB;

async function open(ctx, user, name, extra = '') {
  const page = await ctx.newPage();
  await page.goto(`${srv.url}/?room=${ROOM}&user=${user}&name=${encodeURIComponent(name)}&device=desktop${extra}`);
  await page.waitForSelector('body[data-ready="yes"]', { timeout: T });
  return page;
}
const row = (user) => `#members li[data-user="${user}"]`;

async function onFailure(name, fn) {
  try {
    await fn();
  } catch (e) {
    const out = path.join(ROOT, 'tests/out');
    fs.mkdirSync(out, { recursive: true });
    for (const [tag, p] of [['A', pageA], ['B', pageB]]) {
      if (p && !p.isClosed()) await p.screenshot({ path: path.join(out, `demo-${name}-${tag}.png`), fullPage: true }).catch(() => {});
    }
    throw e;
  }
}

async function startOnPort(port) {
  // The old listener is gone, but give the kernel a moment if it says EADDRINUSE.
  for (let i = 0; ; i++) {
    try { return await startServer([...SERVER_ARGS, '--port', String(port)]); } catch (e) {
      if (i >= 20 || !/EADDRINUSE|in use|bind/i.test(e.message)) throw e;
      await sleep(250);
    }
  }
}

before(async () => {
  srv = await startServer(SERVER_ARGS);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  const viewport = { width: 1360, height: 820 };
  ctxA = await browser.newContext({ viewport });
  ctxB = await browser.newContext({ viewport });
  pageA = await open(ctxA, 'ann', 'Ann Lee', '&hiddenAwayMs=300');
  pageB = await open(ctxB, 'bob', 'Bob Stone');
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]`, { timeout: T });
  await pageA.waitForSelector(`${row('bob')}[data-status="online"]`, { timeout: T });
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

test('landing information and the labelled development mode are on the demo page', () => onFailure('landing', async () => {
  assert.equal(await pageA.textContent('#state'), 'open');
  assert.equal(JSON.parse(await pageA.textContent('#welcome')).user, 'ann');
  assert.match(await pageA.textContent('.devnote'), /auth = none.*user\s+name freely/s);
  for (const href of ['/healthz', '/readyz', '/metrics']) assert.equal(await pageA.locator(`a[href="${href}"]`).count(), 1);
  assert.equal(await pageA.isVisible('#authnote'), false);
  assert.equal(await pageA.isVisible('#token-gate'), false);
  assert.match(await pageA.textContent('#id-kind'), /development identity/);
  // The invisible switch works once the server has told the page its privacy settings.
  await pageA.waitForSelector('#invisible:not([disabled])', { timeout: T });
  assert.equal(await pageA.isChecked('#invisible'), false);
  assert.equal(await pageA.isVisible('#invisible-banner'), false);
  assert.deepEqual(await pageA.evaluate(() => window.__presenced.client.privacy), { online: 'everyone', lastSeen: 'everyone', invisible: false });
}));

test('A sets dnd with a custom status, B shows it', () => onFailure('dnd', async () => {
  await pageA.fill('#custom-text', 'Deep work until lunch');
  await pageA.click('#emoji-btn');
  await pageA.click('#emoji-grid button[data-emoji="🎧"]');
  await pageA.selectOption('#expiry', '3600000');
  await pageA.click('#custom-save');
  await pageA.click('#status-buttons button[data-status="dnd"]');
  const r = `${row('ann')}[data-status="dnd"]`;
  await pageB.waitForSelector(r, { timeout: T });
  await pageB.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('Deep work until lunch'), r, { timeout: T });
  assert.equal((await pageB.textContent(`${r} .emoji`)).trim(), '🎧');
  assert.match(await pageB.textContent(`${r} .sub`), /Do not disturb/);
  assert.equal(await pageB.locator(`${r} .device[title^="desktop"]`).count(), 1, 'device icon');
  assert.equal(await pageB.getAttribute(`${r} .avatar .dot`, 'class'), 'dot s-dnd');
  // A's own picker reflects it.
  await pageA.waitForSelector('#status-buttons button.on[data-status="dnd"]', { timeout: T });
}));

test("A's cursor moves, B draws it labelled at the same place", () => onFailure('cursor', async () => {
  const box = await pageA.locator('#stage').boundingBox();
  await pageA.mouse.move(box.x + 10, box.y + 10);
  await pageA.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.4, { steps: 8 });
  const c = '#cursors .cursor[data-user="ann"]';
  await pageB.waitForFunction((sel) => {
    const el = document.querySelector(sel);
    return el && !el.hidden && Math.abs(parseFloat(el.style.left) - 60) < 0.5 && Math.abs(parseFloat(el.style.top) - 40) < 0.5;
  }, c, { timeout: T });
  assert.equal(await pageB.textContent(`${c} .label`), 'Ann Lee');
  assert.equal(await pageA.locator('#cursors .cursor').count(), 0, 'A does not draw its own cursor');
  if (process.env.PRESENCED_DEMO_PNG) {
    await pageB.fill('#custom-text', 'Reviewing the design doc');
    await pageB.click('#emoji-btn');
    await pageB.click('#emoji-grid button[data-emoji="📅"]');
    await pageB.click('#custom-save');
    await pageB.waitForSelector(`${row('bob')} .custom-text`, { timeout: T });
    await pageB.mouse.move(5, 5);
    await sleep(400);
    await pageB.screenshot({ path: process.env.PRESENCED_DEMO_PNG });
    await pageB.click('#custom-clear');
  }
}));

test('A hides its tab: B sees away after hiddenAwayMs; on return presence is re-asserted', () => onFailure('hidden', async () => {
  await pageA.click('#status-buttons button[data-status="online"]');
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]`, { timeout: T });
  const setVisibility = (state) => pageA.evaluate((s) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => s });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => s === 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  }, state);
  const hiddenAt = Date.now();
  await setVisibility('hidden');
  await pageB.waitForSelector(`${row('ann')}[data-status="away"]`, { timeout: T });
  assert.ok(Date.now() - hiddenAt >= 300, 'not before hiddenAwayMs');
  assert.equal(await pageA.evaluate(() => window.__presenced.client.active), false);
  await setVisibility('visible');
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]`, { timeout: T });
  assert.equal(await pageA.evaluate(() => window.__presenced.client.active), true);
  await pageA.waitForSelector('#status-buttons button.on[data-status="online"]', { timeout: T });
}));

test('server restart on the same port: both pages reconnect and resume without a render storm', () => onFailure('restart', async () => {
  // A goes dnd again so we can see its status survive the restart (the SDK re-applies it).
  await pageA.click('#status-buttons button[data-status="dnd"]');
  await pageB.waitForSelector(`${row('ann')}[data-status="dnd"]`, { timeout: T });
  await sleep(300);
  const before = await Promise.all([pageA, pageB].map((p) => p.evaluate(() => window.__renders)));
  const port = srv.port;
  await stopClean(srv, assert);
  srv = null;
  for (const p of [pageA, pageB]) await p.waitForSelector('body[data-conn="reconnecting"]', { timeout: T });
  // While the server is down, nobody is shown offline: last known values, marked stale.
  assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'dnd');
  assert.match(await pageB.getAttribute(row('ann'), 'class'), /stale/);
  srv = await startOnPort(port);
  for (const p of [pageA, pageB]) await p.waitForSelector('body[data-conn="open"]', { timeout: 4 * T });
  await pageB.waitForSelector(`${row('ann')}[data-status="dnd"]:not(.stale)`, { timeout: T });
  await pageA.waitForSelector(`${row('bob')}[data-status="online"]:not(.stale)`, { timeout: T });
  assert.equal(await pageB.textContent(`${row('ann')} .custom-text`), 'Deep work until lunch');
  // Rooms resumed: both are members again and cursors flow.
  await pageA.waitForFunction(() => window.__presenced.room.joined && window.__presenced.room.members.has('bob'), null, { timeout: T });
  await pageB.waitForFunction(() => window.__presenced.room.joined && window.__presenced.room.members.has('ann'), null, { timeout: T });
  const box = await pageA.locator('#stage').boundingBox();
  await pageA.mouse.move(box.x + box.width * 0.25, box.y + box.height * 0.75, { steps: 4 });
  await pageB.waitForFunction(() => {
    const el = document.querySelector('#cursors .cursor[data-user="ann"]');
    return el && !el.hidden && Math.abs(parseFloat(el.style.left) - 25) < 0.5;
  }, null, { timeout: T });
  await sleep(500);
  const afterR = await Promise.all([pageA, pageB].map((p) => p.evaluate(() => window.__renders)));
  for (let i = 0; i < 2; i++) {
    const grew = afterR[i] - before[i];
    assert.ok(grew >= 2 && grew <= 15, `page ${'AB'[i]} rendered ${grew} times over the restart`);
  }
}));

test('A closes: B shows A offline when the grace ends, with last seen', () => onFailure('close', async () => {
  await ctxA.close();
  pageA = null;
  const r = `${row('ann')}[data-status="offline"]`;
  await pageB.waitForSelector(r, { timeout: T });
  await pageB.waitForFunction((sel) => /last seen (just now|\d+ minutes? ago)/.test(document.querySelector(sel)?.textContent || ''), r, { timeout: T });
  assert.equal(await pageB.locator(`${r} .custom-line`).count(), 0, 'no custom status once offline');
  await pageB.waitForFunction(() => !window.__presenced.room.members.has('ann'), null, { timeout: T });
  assert.match(await pageB.getAttribute(row('ann'), 'class'), /gone/);
  assert.equal(await pageB.locator('#cursors .cursor[data-user="ann"]').count(), 0, "A's cursor is gone");
}));
