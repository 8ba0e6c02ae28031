// The admin page (/admin/) end to end, in Debian's headless Chromium driven
// by playwright-core, against a server with an admin key and real native
// clients: ann on a desktop and a mobile with a custom status, bob and ann
// in one room, carol in another. A wrong key shows the 401 on the key form;
// the right key shows the nodes (ready, no degraded dependency), the counts,
// the busiest rooms (a click lists the members with their visibility) and a
// user lookup with sessions, devices, privacy settings, contacts and blocks; kicking one session ends it
// (session_ended on that socket) and the page lists it gone; a server that
// stops shows a banner, not a blank page. Screenshots go to tests/out/
// (admin-*.png; every open page on failure); PRESENCED_ADMIN_PNG=path also
// writes the README's screenshot (docs/admin.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep, ROOT } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, withScreenshots } from './lib.mjs';

const KEY = 'admin-page-key-0123456789abcdef';
const OUT = path.join(ROOT, 'tests/out');
let srv, browser, ctx, page;
const clients = [];
const check = (name, fn) => withScreenshots('admin', name, () => ({ page }), fn);
const text = (sel) => page.textContent(sel).then((s) => s.trim());

async function open(opts) {
  const c = await Client.open(srv, opts);
  clients.push(c);
  return c;
}
async function join(c, room) {
  c.send({ type: 'join', room, ref: `j-${room}` });
  await c.next((m) => m.type === 'room_snapshot' && m.room === room);
}
async function shoot(name) {
  fs.mkdirSync(OUT, { recursive: true });
  await page.screenshot({ path: path.join(OUT, `admin-${name}.png`), fullPage: true });
}

let annDesk, annMobile, bob, carol;

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www', '--admin-api-key', KEY,
    '--node-id', 'presence-eu-1', '--presence-debounce-ms', '20', '--room-batch-ms', '20',
    '--reconnect-grace-ms', '5000']);
  annDesk = await open({ user: 'ann', device: 'desktop' });
  annMobile = await open({ user: 'ann', device: 'mobile' });
  bob = await open({ user: 'bob', device: 'web' });
  carol = await open({ user: 'carol', device: 'desktop' });
  annDesk.send({ type: 'custom', text: 'Deep work until lunch', emoji: '🎧', ref: 'c' });
  await annDesk.next((m) => m.ref === 'c');
  await join(annDesk, 'design-review');
  await join(bob, 'design-review');
  await join(carol, 'standup');
  for (const [m, p, body] of [['PUT', '/v1/admin/users/ann/contacts', { contacts: ['bob', 'carol'] }],
    ['PUT', '/v1/admin/users/ann/blocks/mallory']]) {
    const r = await fetch(`${srv.url}${p}`, { method: m, headers: { Authorization: `Bearer ${KEY}` }, body: body && JSON.stringify(body) });
    assert.equal(r.status, 200, await r.text());
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctx = await browser.newContext({ viewport: VIEWPORT });
  page = await ctx.newPage();
  page.on('dialog', (d) => d.accept());
});

after(async () => {
  await browser?.close();
  for (const c of clients) if (c.ws.readyState <= 1) c.ws.terminate();
  if (srv && srv.child.exitCode === null) await stopClean(srv, assert);
});

test('/admin and /admin/ serve the page, which holds no secret', () => check('served', async () => {
  for (const p of ['/admin', '/admin/']) {
    const r = await fetch(`${srv.url}${p}`);
    assert.equal(r.status, 200, p);
    const html = await r.text();
    assert.match(html, /<script src="\/admin\/admin.js">/);
    assert.ok(!html.includes(KEY));
  }
  for (const f of ['admin.js', 'admin.css']) {
    const r = await fetch(`${srv.url}/admin/${f}`);
    assert.equal(r.status, 200, f);
    assert.ok(!(await r.text()).includes(KEY));
  }
}));

test('a wrong key shows the 401 on the key form; nothing else shows', () => check('wrong-key', async () => {
  await page.goto(`${srv.url}/admin?poll=300`);
  await page.waitForSelector('#gate:not([hidden])', { timeout: T });
  await page.fill('#key', 'not-the-key');
  await page.click('#key-submit');
  await page.waitForSelector('#key-error:not([hidden])', { timeout: T });
  assert.match(await text('#key-error'), /refused \(401 unauthorized: a valid admin key is required\)/);
  assert.equal(await page.isVisible('#dash'), false);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('presenced.adminKey')), null);
  await shoot('wrong-key');
}));

test('the right key: nodes, counts, the chart and the busiest rooms', () => check('dash', async () => {
  await page.fill('#key', KEY);
  await page.click('#key-submit');
  await page.waitForSelector('#dash:not([hidden])', { timeout: T });
  await page.waitForFunction(() => document.querySelector('[data-stat="usersOnline"]').textContent === '3', null, { timeout: T });
  assert.equal(await text('[data-stat="sessions"]'), '4');
  assert.equal(await text('[data-stat="rooms"]'), '2');
  assert.ok(Number(await text('[data-stat="connections"]')) >= 4);
  // The node: its id, ready, no degraded dependency (nothing in red).
  const node = '#nodes li[data-node="presence-eu-1"]';
  await page.waitForSelector(node, { timeout: T });
  assert.match(await text(`${node} .badges`), /ready/);
  assert.equal(await page.locator(`${node} .badge.bad`).count(), 0);
  assert.match(await text(`${node} [data-field="counts"]`), /^3 · 4$/);
  assert.equal(await text('#node-name'), 'presence-eu-1');
  // The busiest rooms, most members first.
  const rows = await page.$$eval('#rooms tr', (trs) => trs.map((tr) => [tr.dataset.room, ...[...tr.cells].slice(1).map((td) => td.textContent)]));
  assert.deepEqual(rows, [['design-review', '2', '2'], ['standup', '1', '1']]);
  // The chart grows with each poll.
  await page.waitForFunction(() => Number(document.getElementById('chart').dataset.samples) >= 3, null, { timeout: T });
  assert.equal(await page.getAttribute('#chart', 'data-last'), '3');
  assert.equal(await page.locator('#chart polyline').count(), 1);
  // The key is kept for this tab only.
  assert.equal(await page.evaluate(() => sessionStorage.getItem('presenced.adminKey')), KEY);
}));

test('a room click lists its members with their visibility', () => check('members', async () => {
  await page.click('#rooms tr[data-room="design-review"]');
  await page.waitForSelector('#members-box:not([hidden])', { timeout: T });
  assert.equal(await text('#members-room'), 'design-review');
  const members = await page.$$eval('#members li', (lis) => lis.map((li) => [li.dataset.user, li.dataset.visible]).sort());
  assert.deepEqual(members, [['ann', 'true'], ['bob', 'true']]);
  assert.match(await text('#members li[data-user="ann"]'), /1 session.*visible/);
}));

test('a user lookup lists the sessions, devices, statuses and privacy settings', () => check('lookup', async () => {
  await page.fill('#user-id', 'ann');
  await page.click('#lookup-submit');
  await page.waitForSelector('#user[data-user="ann"]:not([hidden])', { timeout: T });
  assert.equal(await text('#user-status'), 'online');
  assert.equal(await text('#user-custom'), '🎧 Deep work until lunch');
  assert.equal(await text('#user-devices'), 'desktop (online), mobile (online)');
  assert.match(await text('#user-privacy'), /online: everyone.*last seen: everyone.*visible/);
  assert.equal(await text('#user-relations'), '2 contacts · blocks 1: mallory');
  assert.equal(await text('#user-count'), '2 on node presence-eu-1');
  const sessions = await page.$$eval('#sessions tr', (trs) => trs.map((tr) => tr.dataset.device).sort());
  assert.deepEqual(sessions, ['desktop', 'mobile']);
  const desk = `#sessions tr[data-session="${annDesk.welcome.sessionId}"]`;
  assert.match(await text(desk), /desktop.*native.*online.*Deep work until lunch.*connected/);
  // An unknown user reads as offline without sessions, not as an error.
  await page.fill('#user-id', 'nobody-here');
  await page.click('#lookup-submit');
  await page.waitForSelector('#user[data-user="nobody-here"]', { timeout: T });
  assert.equal(await text('#user-status'), 'offline');
  assert.equal(await page.isVisible('#sessions-empty'), true);
  // A bad id: the server's 400, in words.
  await page.fill('#user-id', 'bad id!');
  await page.click('#lookup-submit');
  await page.waitForSelector('#user-error:not([hidden])', { timeout: T });
  assert.match(await text('#user-error'), /400 bad_user/);
}));

test("kicking one session: that socket gets session_ended, the page lists it gone", () => check('kick', async () => {
  await page.fill('#user-id', 'ann');
  await page.click('#lookup-submit');
  await page.waitForSelector('#user[data-user="ann"]:not([hidden])', { timeout: T });
  await page.waitForSelector('#sessions tr[data-device="mobile"]', { timeout: T });
  await page.fill('#kick-reason', 'lost phone');
  await page.click('#sessions tr[data-device="mobile"] button');
  const ended = await annMobile.next((m) => m.type === 'session_ended');
  assert.deepEqual([ended.reason, ended.message], ['kicked', 'lost phone']);
  assert.equal((await annMobile.closed).code, 4000);
  await page.waitForSelector('#kick-result:not([hidden])', { timeout: T });
  assert.equal(await text('#kick-result'), 'Kicked 1 session of ann.');
  await page.waitForFunction(() => document.querySelectorAll('#sessions tr').length === 1, null, { timeout: T });
  assert.equal(await page.locator('#sessions tr[data-device="mobile"]').count(), 0);
  // The user's view follows at the next poll.
  await page.waitForFunction(() => document.getElementById('user-devices').textContent === 'desktop (online)', null, { timeout: T });
  // The desktop session was left alone.
  assert.equal(annDesk.ws.readyState, 1);
  await page.waitForFunction(() => document.querySelector('[data-stat="sessions"]').textContent === '3', null, { timeout: T });
  await shoot('kick');
}));

test('more users over time: the chart follows (and the screenshot)', () => check('chart', async () => {
  // A few users come and go, so that the chart has a shape.
  const guests = [];
  for (let i = 0; i < 6; i++) {
    const c = await open({ user: `guest-${i}`, device: i % 2 ? 'mobile' : 'web' });
    guests.push(c);
    if (i < 3) await join(c, 'design-review');
    else if (i < 5) await join(c, 'standup');
    await sleep(350);
  }
  await page.waitForFunction(() => document.getElementById('chart').dataset.last === '9', null, { timeout: T });
  await guests[5].close();
  await page.waitForFunction(() => document.getElementById('chart').dataset.last === '8', null, { timeout: T });
  await page.waitForFunction(() => Number(document.getElementById('chart').dataset.samples) >= 10, null, { timeout: T });
  const rows = await page.$$eval('#rooms tr', (trs) => trs.map((tr) => tr.dataset.room));
  assert.equal(rows[0], 'design-review');
  await page.fill('#user-id', 'ann');
  await page.click('#lookup-submit');
  await page.waitForSelector('#user[data-user="ann"]', { timeout: T });
  await page.click('#rooms tr[data-room="design-review"]');
  await page.waitForSelector('#members li[data-user="guest-0"]', { timeout: T });
  await sleep(400);
  await shoot('dash');
  if (process.env.PRESENCED_ADMIN_PNG) await page.screenshot({ path: process.env.PRESENCED_ADMIN_PNG });
  // The dark palette follows the system's.
  const bg = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  assert.equal(await bg(), 'rgb(244, 245, 249)');
  await page.emulateMedia({ colorScheme: 'dark' });
  assert.equal(await bg(), 'rgb(16, 19, 26)');
  await shoot('dark');
  await page.emulateMedia({ colorScheme: 'light' });
}));

test('the server goes away: the page says so plainly', () => check('gone', async () => {
  for (const c of clients) if (c.ws.readyState === 1) await c.close();
  await stopClean(srv, assert);
  await page.waitForSelector('#banner:not([hidden])', { timeout: T });
  assert.match(await text('#banner'), /does not answer/);
  assert.equal(await text('#state'), 'server unreachable');
  assert.equal(await page.isVisible('#dash'), true, 'the last numbers stay on screen');
  await shoot('gone');
}));
