// An abrupt crash, in Debian's headless Chromium (playwright-core): A's page
// runs in a browser process of its own, which is killed (SIGKILL: no
// pagehide, no leave, no close frame; the kernel closes the socket). B, in
// another browser, must keep showing A online and in the room through the
// reconnect grace, then show A offline with a last seen. Screenshots on
// failure under tests/out/crash-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, MULT } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, row, openDemo, withScreenshots } from './lib.mjs';

const ROOM = 'crash-room';
const GRACE = 2000;
let srv, browser, serverA, browserA, pageA, pageB;

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www', '--reconnect-grace-ms', String(GRACE), '--presence-debounce-ms', '50']);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  // A's browser is a separate process we can kill.
  serverA = await chromium.launchServer({ executablePath: CHROMIUM, args: ARGS });
  browserA = await chromium.connect(serverA.wsEndpoint());
  pageA = await openDemo(await browserA.newContext({ viewport: VIEWPORT }), srv.url, ROOM, { user: 'ann', name: 'Ann Lee' });
  pageB = await openDemo(await browser.newContext({ viewport: VIEWPORT }), srv.url, ROOM, { user: 'bob', name: 'Bob Stone' });
});

after(async () => {
  await browserA?.close().catch(() => {});
  await serverA?.close().catch(() => {});
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

test("A's browser is killed: B shows A online through the grace, then offline with last seen", () =>
  withScreenshots('crash', 'kill', () => ({ B: pageB }), async () => {
    await pageB.waitForSelector(`${row('ann')}[data-status="online"]:not(.gone)`, { timeout: T });
    await pageB.evaluate(() => {
      window.__annSeen = [];
      window.__presenced.client.onPresence((m) => { const p = m.get('ann'); if (p) window.__annSeen.push([Date.now(), p.status]); });
      window.__presenced.room.onChange((m) => window.__annSeen.push([Date.now(), m.has('ann') ? 'in' : 'out']));
    });
    const killedAt = await pageB.evaluate(() => Date.now());
    await serverA.kill(); // SIGKILL of A's browser
    serverA = null; browserA = null; pageA = null;

    // Half-way through the grace: nothing has changed for B.
    await sleep(GRACE / 2);
    assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'online');
    assert.doesNotMatch(await pageB.getAttribute(row('ann'), 'class'), /gone/);

    const off = `${row('ann')}[data-status="offline"]`;
    await pageB.waitForSelector(off, { timeout: GRACE + T });
    await pageB.waitForFunction((sel) => /last seen (just now|1 minute ago)/.test(document.querySelector(sel)?.textContent || ''), off, { timeout: T });
    await pageB.waitForFunction(() => !window.__presenced.room.members.has('ann'), null, { timeout: T });
    const seen = await pageB.evaluate(() => window.__annSeen);
    const first = seen.find(([, s]) => s !== 'online' && s !== 'in');
    assert.ok(first, JSON.stringify(seen));
    const after = first[0] - killedAt; // an explicit leave (pagehide) would have made this ~0
    if (process.env.PRESENCED_TEST_VERBOSE) console.log(`crash: B saw the change ${after} ms after the kill: ${JSON.stringify(seen)}`);
    // Not before the grace (one 100 ms timer tick of slack), and not long after it.
    assert.ok(after >= GRACE - 150, `B saw a change ${after} ms after the kill (grace ${GRACE} ms): ${JSON.stringify(seen)}`);
    assert.ok(after <= GRACE + 3000 * MULT, `B saw A offline only ${after} ms after the kill`);
    assert.ok(!seen.some(([, s]) => s === 'away' || s === 'unknown'), JSON.stringify(seen));
    assert.match(await pageB.getAttribute(row('ann'), 'class'), /gone/);
    assert.equal(await pageB.locator('#cursors .cursor[data-user="ann"]').count(), 0);
  }));
