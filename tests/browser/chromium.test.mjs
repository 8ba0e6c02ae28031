// Debian's headless Chromium, driven by playwright-core, loads the landing
// page from presenced and opens a WebSocket to /v1/ws (welcome + ping/pong
// round trip). A screenshot is saved on failure under tests/out/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, ROOT } from '../integration/lib/server.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
let srv;
let browser;

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www']);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  await stopClean(srv, assert);
});

test('Chromium opens a WebSocket to presenced and gets welcome + pong', async () => {
  const page = await browser.newPage();
  try {
    await page.goto(`${srv.url}/`);
    await page.waitForSelector('body[data-ready="yes"]', { timeout: 10000 });
    assert.equal(await page.textContent('#state'), 'open');
    const welcome = JSON.parse(await page.textContent('#welcome'));
    assert.equal(welcome.type, 'welcome');
    assert.match(await page.textContent('#rtt'), /ms$/);
    // A second socket from page script, straight through the browser API.
    const echoed = await page.evaluate((url) => new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.onmessage = (ev) => { const m = JSON.parse(ev.data); if (m.type === 'pong') { ws.close(1000); resolve(m.ref); } };
      ws.onopen = () => ws.send(JSON.stringify({ type: 'ping', ref: 'from-chromium' }));
      ws.onerror = () => reject(new Error('ws error'));
    }), `${srv.wsUrl}/v1/ws`);
    assert.equal(echoed, 'from-chromium');
  } catch (e) {
    const out = path.join(ROOT, 'tests/out');
    fs.mkdirSync(out, { recursive: true });
    await page.screenshot({ path: path.join(out, 'chromium-failure.png') }).catch(() => {});
    throw e;
  } finally {
    await page.close();
  }
});
