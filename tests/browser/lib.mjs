// Shared by the browser tests (not a test file): Debian's Chromium through
// playwright-core, the demo page, screenshots on failure.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { ROOT, MULT } from '../integration/lib/server.mjs';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const T = 10000 * MULT;
export const VIEWPORT = { width: 1360, height: 820 };

export const row = (user) => `#members li[data-user="${user}"]`;

// Opens the demo page of `room` in a new page of ctx and waits until it is live.
export async function openDemo(ctx, base, room, query = {}) {
  const page = await ctx.newPage();
  const q = new URLSearchParams({ room, device: 'desktop', ...query });
  await page.goto(`${base}/?${q}`);
  await page.waitForSelector('body[data-ready="yes"]', { timeout: T });
  return page;
}

// Runs fn; on failure saves a full-page screenshot of every open page under
// tests/out/<prefix>-<name>-<tag>.png and rethrows.
export async function withScreenshots(prefix, name, pages, fn) {
  try {
    await fn();
  } catch (e) {
    const out = path.join(ROOT, 'tests/out');
    fs.mkdirSync(out, { recursive: true });
    for (const [tag, p] of Object.entries(pages())) {
      if (p && !p.isClosed()) await p.screenshot({ path: path.join(out, `${prefix}-${name}-${tag}.png`), fullPage: true }).catch(() => {});
    }
    throw e;
  }
}

// An HS256 JWT (auth = jwt with jwt-hs256-secret).
export function mintJwt(secret, claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${body}.${crypto.createHmac('sha256', secret).update(body).digest('base64url')}`;
}
