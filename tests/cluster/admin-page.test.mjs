// admin-page.test.mjs - the admin page (/admin/) on a cluster, in Debian's
// headless Chromium (playwright-core): node a's page lists both nodes with
// their epochs and counts; when Redis stops, a's node shows "redis
// degraded" in red and the page says the other nodes are unknown; when
// Redis is back, the badge goes and b is listed again. Screenshots under
// tests/out/admin-cluster-*.png (every page on failure).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { Client } from '../integration/lib/client.mjs';
import { stopClean, ROOT } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, withScreenshots } from '../browser/lib.mjs';
import { startRedis, startNode, uid } from './lib/nodes.mjs';

const KEY = 'cluster-page-key-0123456789';
const ARGS_NODE = ['--admin-api-key', KEY, '--static-dir', 'www', '--cluster-lease-ms', '1500'];

test('the nodes panel lists every node, and a node cut off from Redis in red', async () => {
  const redis = await startRedis();
  const a = await startNode(redis.url, 'node-a', ARGS_NODE);
  const b = await startNode(redis.url, 'node-b', ARGS_NODE);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  const clients = [];
  let page;
  const shoot = async (name) => {
    fs.mkdirSync(path.join(ROOT, 'tests/out'), { recursive: true });
    await page.screenshot({ path: path.join(ROOT, `tests/out/admin-cluster-${name}.png`), fullPage: true });
  };
  try {
    await withScreenshots('admin-cluster', 'nodes', () => ({ page }), async () => {
      clients.push(await Client.open(b, { user: uid('bea') }), await Client.open(b, { user: uid('ben') }));
      clients.push(await Client.open(a, { user: uid('ada') }));
      const ctx = await browser.newContext({ viewport: VIEWPORT });
      page = await ctx.newPage();
      await page.goto(`${a.url}/admin/?poll=400`);
      await page.fill('#key', KEY);
      await page.click('#key-submit');
      const nodeB = '#nodes li[data-node="node-b"]';
      await page.waitForFunction((sel) => document.querySelector(`${sel} [data-field="counts"]`)?.textContent === '2 · 2', nodeB, { timeout: T });
      assert.deepEqual(await page.$$eval('#nodes li', (lis) => lis.map((li) => li.dataset.node)), ['node-a', 'node-b']);
      assert.match(await page.textContent('#nodes li[data-node="node-a"]'), /this node.*ready/s);
      assert.match(await page.textContent(nodeB), /epoch [0-9a-f]+.*ready.*dependencies ok/s);
      assert.equal(await page.locator('#nodes .badge.bad').count(), 0);
      await shoot('ok');

      // Redis stops: a runs degraded, in red; b is unknown.
      await redis.stop();
      const red = '#nodes li[data-node="node-a"].degraded .badge.bad';
      await page.waitForSelector(red, { timeout: T });
      assert.equal((await page.textContent(red)).trim(), 'redis degraded');
      await page.waitForSelector('#nodes-error:not([hidden])', { timeout: T });
      assert.equal(await page.textContent('#nodes-error'), 'The other nodes could not be read from redis: only this node is shown.');
      assert.equal(await page.locator('#nodes li').count(), 1);
      await shoot('degraded');

      // Redis is back: both nodes again, nothing in red.
      await redis.start();
      await page.waitForSelector(nodeB, { timeout: 3 * T });
      await page.waitForFunction(() => document.querySelectorAll('#nodes .badge.bad').length === 0, null, { timeout: 3 * T });
      assert.equal(await page.isVisible('#nodes-error'), false);
    });
  } finally {
    await browser.close();
    for (const c of clients) c.ws.terminate();
    for (const n of [a, b]) if (n.child.exitCode === null && n.child.signalCode === null) await stopClean(n, assert);
    await redis.close();
  }
});
