// metrics-auth.test.mjs - /metrics shows per-worker counts that move with
// one user's actions, so outside development it needs a bearer key
// (issue 16, item 11): the metrics key or the admin API key.
import assert from 'node:assert/strict';
import test from 'node:test';
import { startServer, stopClean } from './lib/server.mjs';

async function status(srv, key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const r = await fetch(`${srv.url}/metrics`, { headers });
  const body = await r.text();
  if (r.status === 200) assert.match(body, /presenced_users_online/);
  else assert.match(body, /"code":"unauthorized"/);
  return r.status;
}

test('development (auth = none, no key): /metrics is public', async () => {
  const srv = await startServer([]);
  try {
    assert.equal(await status(srv), 200);
  } finally {
    await stopClean(srv, assert);
  }
});

test('with an admin key, /metrics needs a key: the admin key or the metrics key', async () => {
  const srv = await startServer(['--admin-api-key', 'adm-secret-1', '--metrics-key', 'scrape-2']);
  try {
    assert.equal(await status(srv), 401);
    assert.equal(await status(srv, 'wrong'), 401);
    assert.equal(await status(srv, 'scrape-2x'), 401);
    assert.equal(await status(srv, 'adm-secret-1'), 200);
    assert.equal(await status(srv, 'scrape-2'), 200);
  } finally {
    await stopClean(srv, assert);
  }
});

test('auth = jwt with no key at all: /metrics answers 401 to everyone', async () => {
  const srv = await startServer(['--auth', 'jwt', '--jwt-hs256-secret', 'x'.repeat(32)]);
  try {
    assert.equal(await status(srv), 401);
    assert.equal(await status(srv, 'anything'), 401);
  } finally {
    await stopClean(srv, assert);
  }
});
