// Privacy on the demo page, in Debian's headless Chromium (playwright-core):
// two users in one room. A turns on "Appear invisible" -> B sees A offline
// (last seen frozen, no version in A's presence) and gone from the room, no
// cursor of A reaches B, while A's own page still shows A (its true status)
// with "You are invisible"; a reload of A keeps it (the server stores it and
// tells the new session) and B sees nothing of it; turning it off in one tab
// of A -> A's other tab follows, B sees A online in the room again. The privacy menu: online visibility "nobody" hides A like invisible,
// last seen "nobody" removes A's last seen. Screenshots of both pages on
// failure under tests/out/privacy-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, row, openDemo, withScreenshots } from './lib.mjs';

const ROOM = 'privacy-room';
let srv, browser, ctxA, ctxB, pageA, pageA2, pageB;
const check = (name, fn) => withScreenshots('privacy', name, () => ({ A: pageA, A2: pageA2, B: pageB }), fn);

// Everything B's page learns about ann, in order (presence flushes and room changes).
async function recordOnB() {
  await pageB.evaluate(() => {
    const { client, room } = window.__presenced;
    window.__annSeen = [];
    client.onPresence((m) => { const p = m.get('ann'); if (p) window.__annSeen.push({ status: p.status, version: p.version, lastSeen: !!p.lastSeen }); });
    room.onChange((members) => window.__annSeen.push({ inRoom: members.has('ann') }));
  });
}
const seenOnB = () => pageB.evaluate(() => window.__annSeen.splice(0));
const toggleInvisible = () => pageA.click('label.switch');

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www', '--reconnect-grace-ms', '1000', '--presence-debounce-ms', '50']);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctxA = await browser.newContext({ viewport: VIEWPORT });
  ctxB = await browser.newContext({ viewport: VIEWPORT });
  pageA = await openDemo(ctxA, srv.url, ROOM, { user: 'ann', name: 'Ann Lee' });
  pageB = await openDemo(ctxB, srv.url, ROOM, { user: 'bob', name: 'Bob Stone' });
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]:not(.gone)`, { timeout: T });
  await pageA.waitForSelector('#invisible:not([disabled])', { timeout: T });
  await recordOnB();
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

test('A turns invisible: B sees A offline and gone from the room; A still sees itself', () => check('invisible-on', async () => {
  assert.equal(await pageA.isVisible('#invisible-banner'), false);
  await toggleInvisible();
  // A's own page: the switch, the banner, and A itself, in its true state.
  await pageA.waitForSelector('body[data-invisible="yes"]', { timeout: T });
  assert.equal(await pageA.isChecked('#invisible'), true);
  assert.match(await pageA.textContent('#invisible-banner'), /You are invisible/);
  const self = `${row('ann')}[data-invisible="yes"]`;
  await pageA.waitForSelector(self, { timeout: T });
  assert.doesNotMatch(await pageA.getAttribute(self, 'class'), /gone/, 'A is still in the room for itself');
  assert.equal(await pageA.getAttribute(self, 'data-status'), 'online', 'A sees its true status');
  assert.match(await pageA.textContent(`${self} .sub`), /Invisible/);
  assert.deepEqual(await pageA.evaluate(() => window.__presenced.client.privacy), { online: 'everyone', lastSeen: 'everyone', invisible: true });
  assert.equal(typeof (await pageA.evaluate(() => window.__presenced.client.getPresence('ann').version)), 'number', 'own presence keeps version');

  // B's page: A offline with a last seen, out of the room.
  const off = `${row('ann')}[data-status="offline"]`;
  await pageB.waitForSelector(`${off}.gone`, { timeout: T });
  await pageB.waitForFunction((sel) => /last seen (just now|1 minute ago)/.test(document.querySelector(sel)?.textContent || ''), off, { timeout: T });
  assert.equal(await pageB.evaluate(() => window.__presenced.room.members.has('ann')), false);
  await pageB.waitForFunction(() => window.__presenced.room.count === 1, null, { timeout: T });
  assert.match(await pageB.textContent('#room-count'), /^1 here/);
  const p = await pageB.evaluate(() => window.__presenced.client.getPresence('ann'));
  assert.equal(p.version, undefined, "others' presence carries no version");
  assert.deepEqual(p.devices, {});
  assert.equal(p.custom, undefined);

  // A moves its pointer over the shared space: nothing reaches B.
  const box = await pageA.locator('#stage').boundingBox();
  await pageA.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.3, { steps: 6 });
  await sleep(500);
  assert.equal(await pageB.locator('#cursors .cursor[data-user="ann"]:not([hidden])').count(), 0, 'no cursor of an invisible user');
  const seen = await seenOnB();
  assert.ok(!seen.some((s) => s.status && s.status !== 'online' && s.status !== 'offline'), JSON.stringify(seen));
}));

test('invisible survives a reload of A; B never sees A online meanwhile, and the last seen stays frozen', () => check('invisible-reload', async () => {
  const frozenAt = await pageB.evaluate(() => window.__presenced.client.getPresence('ann').lastSeen?.at);
  assert.equal(typeof frozenAt, 'number');
  await pageA.reload();
  await pageA.waitForSelector('body[data-ready="yes"]', { timeout: T });
  await pageA.waitForSelector('body[data-invisible="yes"]', { timeout: T });
  assert.equal(await pageA.isChecked('#invisible'), true);
  await pageA.waitForSelector(`${row('ann')}[data-invisible="yes"]:not(.gone)`, { timeout: T }); // still listed for itself
  await sleep(1500); // past the reconnect grace of the old page's session
  const seen = await seenOnB();
  assert.ok(!seen.some((s) => s.status === 'online' || s.inRoom === true), `B saw A: ${JSON.stringify(seen)}`);
  assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'offline');
  assert.equal(await pageB.evaluate(() => window.__presenced.client.getPresence('ann').lastSeen?.at), frozenAt,
    'the session that ended on reload does not move the public last seen');
}));

test('A turns invisible off in one tab: its other tab follows, B sees A online and in the room again', () => check('invisible-off', async () => {
  // A second tab of A starts with the stored setting (privacy_changed after its welcome).
  pageA2 = await openDemo(ctxA, srv.url, ROOM, { user: 'ann', name: 'Ann Lee' });
  await pageA2.waitForSelector('body[data-invisible="yes"]', { timeout: T });
  assert.equal(await pageA2.isChecked('#invisible'), true);
  await toggleInvisible();
  await pageA2.waitForSelector('body[data-invisible="no"]', { timeout: T }); // told by the server
  assert.equal(await pageA2.isChecked('#invisible'), false);
  await pageA.waitForSelector('body[data-invisible="no"]', { timeout: T });
  assert.equal(await pageA.isChecked('#invisible'), false);
  assert.equal(await pageA.isVisible('#invisible-banner'), false);
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]:not(.gone)`, { timeout: T });
  await pageB.waitForFunction(() => window.__presenced.room.members.has('ann'), null, { timeout: T });
  // Cursors flow again.
  const box = await pageA.locator('#stage').boundingBox();
  await pageA.mouse.move(box.x + box.width * 0.7, box.y + box.height * 0.2, { steps: 6 });
  await pageB.waitForSelector('#cursors .cursor[data-user="ann"]:not([hidden])', { timeout: T });
  // Closing the second tab changes nothing for B: A is still here in the first.
  await seenOnB();
  await pageA2.close();
  pageA2 = null;
  await sleep(1500); // past the grace
  assert.deepEqual((await seenOnB()).filter((s) => s.status !== undefined ? s.status !== 'online' : !s.inRoom), []);
  assert.equal(await pageB.getAttribute(row('ann'), 'data-status'), 'online');
}));

test('privacy menu: online "nobody" hides A like invisible; last seen "nobody" hides the last seen', () => check('menu', async () => {
  await pageA.click('#privacy-menu summary');
  await pageA.selectOption('#vis-online', 'nobody');
  await pageA.waitForFunction(() => window.__presenced.client.privacy?.online === 'nobody', null, { timeout: T });
  await pageB.waitForSelector(`${row('ann')}[data-status="offline"].gone`, { timeout: T });
  await pageB.waitForFunction((sel) => /last seen/.test(document.querySelector(sel)?.textContent || ''), row('ann'), { timeout: T });
  assert.equal(await pageA.getAttribute(row('ann'), 'data-status'), 'online', 'A still sees itself online');

  await pageA.selectOption('#vis-lastseen', 'nobody');
  await pageB.waitForFunction(() => {
    const p = window.__presenced.client.getPresence('ann');
    return p && p.status === 'offline' && !p.lastSeen;
  }, null, { timeout: T });
  await pageB.waitForFunction((sel) => !/last seen/.test(document.querySelector(sel)?.textContent || 'last seen'), row('ann'), { timeout: T });

  await pageA.selectOption('#vis-online', 'everyone');
  await pageA.selectOption('#vis-lastseen', 'everyone');
  await pageA.waitForFunction(() => {
    const p = window.__presenced.client.privacy;
    return p.online === 'everyone' && p.lastSeen === 'everyone';
  }, null, { timeout: T });
  await pageB.waitForSelector(`${row('ann')}[data-status="online"]:not(.gone)`, { timeout: T });
  assert.equal(await pageA.isDisabled('#vis-online'), false);
}));
