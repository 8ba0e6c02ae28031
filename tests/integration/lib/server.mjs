// server.mjs - start the real presenced binary on a free loopback port for a
// test and stop it afterwards. The binary is $PRESENCED_BIN (make test sets
// it to the ASan build); the port is whatever the kernel gives port 0, read
// back from the "listening on" log line. stderr is kept for assertions.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(here, '../../..');
export const BIN = process.env.PRESENCED_BIN || path.join(ROOT, 'build/asan/presenced');
export const MULT = Number(process.env.PRESENCED_TEST_TIMEOUT_MULT || 1);

// Unless the test names its own --store, each server gets a fresh SQLite
// settings store in a temporary directory, removed when it stops.
export async function startServer(args = [], { env = {}, cwd = ROOT } = {}) {
  let tmp = null;
  if (!args.includes('--store') && !env.PRESENCED_STORE) {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-store-'));
    args = ['--store', path.join(tmp, 'presenced.db'), ...args];
  }
  // A stop drains at once unless the test asks for a window: the default
  // window (5 s) would make every stop with a client still open that long.
  if (!args.includes('--drain-window-ms') && !env.PRESENCED_DRAIN_WINDOW_MS) args = ['--drain-window-ms', '0', ...args];
  const child = spawn(BIN, ['--port', '0', '--bind', '127.0.0.1', ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stdout.on('data', (d) => { stdout += d; });
  if (tmp) child.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${stderr}`)), 10000 * MULT);
    child.stderr.on('data', (d) => {
      stderr += d;
      const m = /listening on http:\/\/[^ ]*:(\d+) /.exec(stderr);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${stderr}`)); });
  });
  const srv = {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    get stderr() { return stderr; },
    get stdout() { return stdout; },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
      child.kill(signal);
      const [code, sig] = await once(child, 'exit');
      return { code, signal: sig };
    },
  };
  return srv;
}

// Stops the server and fails when it did not exit 0 (a sanitizer report
// makes the ASan build exit non-zero, so every test also checks for leaks).
export async function stopClean(srv, assert) {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, `server killed by ${signal}\n${srv.stderr}`);
  assert.equal(code, 0, `server exit code ${code}\n${srv.stderr}`);
  assert.doesNotMatch(srv.stderr, /ERROR: AddressSanitizer|runtime error:|LeakSanitizer/);
}

export function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// Polls fn until it returns something truthy (its value is returned), for
// at most ms (scaled by PRESENCED_TEST_TIMEOUT_MULT); throws naming what.
export async function waitUntil(fn, what, ms = 5000) {
  const deadline = Date.now() + ms * MULT;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
