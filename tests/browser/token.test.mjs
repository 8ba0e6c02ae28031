// The demo page on a server with auth = jwt, in Debian's headless Chromium
// (playwright-core): without a token it shows the token form (no
// development identity, no room); a token that is not a JWT, or that the
// server refuses, is reported there without a reconnect loop; a good token
// in ?token= is taken out of the address bar, its sub is the user (a ?user=
// beside it changes nothing), and two such pages see each other. Screenshots
// on failure under tests/out/token-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startServer, stopClean, sleep } from '../integration/lib/server.mjs';
import { CHROMIUM, ARGS, T, VIEWPORT, row, withScreenshots, mintJwt } from './lib.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const ROOM = 'token-room';
let srv, browser, ctxA, ctxB, pageA, pageB;
const check = (name, fn) => withScreenshots('token', name, () => ({ A: pageA, B: pageB }), fn);
const tokenFor = (sub, extra = {}, secret = SECRET) =>
  mintJwt(secret, { sub, exp: Math.floor(Date.now() / 1000) + 3600, ...extra });

before(async () => {
  srv = await startServer(['--workers', '2', '--static-dir', 'www', '--auth', 'jwt', '--jwt-hs256-secret', SECRET,
    '--presence-debounce-ms', '50']);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  ctxA = await browser.newContext({ viewport: VIEWPORT });
  ctxB = await browser.newContext({ viewport: VIEWPORT });
});

after(async () => {
  await browser?.close();
  if (srv) await stopClean(srv, assert);
});

test('without a token the page asks for one; bad and refused tokens are reported', () => check('gate', async () => {
  pageA = await ctxA.newPage();
  await pageA.goto(`${srv.url}/?room=${ROOM}&user=mallory`);
  await pageA.waitForSelector('#token-gate:not([hidden])', { timeout: T });
  assert.equal(await pageA.getAttribute('body', 'data-auth'), 'jwt');
  assert.equal(await pageA.isVisible('#devnote'), false, 'no development identity under auth = jwt');
  assert.equal(await pageA.isVisible('#stage'), false);
  assert.equal(await pageA.evaluate(() => window.__presenced), undefined, 'no client without a token');

  await pageA.fill('#token-input', 'not a token');
  await pageA.click('#token-form button[type="submit"]');
  await pageA.waitForSelector('#token-error:not([hidden])', { timeout: T });
  assert.match(await pageA.textContent('#token-error'), /JWT/);

  // Well formed, wrong signature: the server refuses it; the page says so and stops.
  await pageA.fill('#token-input', tokenFor('mallory', {}, 'another-secret-0123456789abcdefghij'));
  await pageA.click('#token-form button[type="submit"]');
  await pageA.waitForFunction(() => /refused/.test(document.getElementById('token-error')?.textContent || ''), null, { timeout: T });
  assert.equal(await pageA.isVisible('#token-gate'), true);
  await sleep(1500);
  assert.equal(await pageA.evaluate(() => window.__presenced.client.state), 'closed', 'no reconnect loop with a refused token');
  await pageA.close();
}));

test('a token in ?token= signs the page in as its sub and leaves the address bar', () => check('signed-in', async () => {
  pageA = await ctxA.newPage();
  await pageA.goto(`${srv.url}/?room=${ROOM}&user=mallory&device=desktop&token=${tokenFor('carol', { name: 'Carol Diaz' })}`);
  await pageA.waitForSelector('body[data-ready="yes"]', { timeout: T });
  assert.doesNotMatch(pageA.url(), /token=/);
  assert.equal(new URL(pageA.url()).searchParams.get('room'), ROOM);
  assert.equal(JSON.parse(await pageA.textContent('#welcome')).user, 'carol');
  assert.equal(await pageA.textContent('#me-user'), 'carol');
  assert.equal(await pageA.inputValue('#name'), 'Carol Diaz');
  assert.equal(await pageA.isVisible('#authnote'), true);
  assert.equal(await pageA.isVisible('#devnote'), false);
  assert.match(await pageA.textContent('#authnote'), /carol/);
  assert.match(await pageA.textContent('#id-kind'), /token/);

  pageB = await ctxB.newPage();
  await pageB.goto(`${srv.url}/?room=${ROOM}&device=desktop&token=${tokenFor('dave')}`);
  await pageB.waitForSelector('body[data-ready="yes"]', { timeout: T });
  await pageB.waitForSelector(`${row('carol')}[data-status="online"]:not(.gone)`, { timeout: T });
  await pageA.waitForSelector(`${row('dave')}[data-status="online"]:not(.gone)`, { timeout: T });
  assert.equal(await pageB.locator(row('mallory')).count(), 0);

  // A reload keeps the token (per tab) and the identity.
  await pageA.reload();
  await pageA.waitForSelector('body[data-ready="yes"]', { timeout: T });
  assert.equal(await pageA.textContent('#me-user'), 'carol');

  // Privacy works the same with tokens.
  await pageA.waitForSelector('#invisible:not([disabled])', { timeout: T });
  await pageA.click('label.switch');
  await pageB.waitForSelector(`${row('carol')}[data-status="offline"].gone`, { timeout: T });
  await pageA.click('label.switch');
  await pageB.waitForSelector(`${row('carol')}[data-status="online"]:not(.gone)`, { timeout: T });
}));
