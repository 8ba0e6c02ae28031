// Durable settings: acknowledged privacy, contact and block changes survive
// kill -9. presenced runs on its own --store; the writers and the check are
// lib/durability.mjs's; after a random number of acknowledged changes the
// server is killed with SIGKILL while more are in flight, then restarted on
// the same store, and every acknowledged change must be there. A few rounds,
// cumulative.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopClean } from './lib/server.mjs';
import { durability, seeded } from './lib/durability.mjs';

const KEY = 'durable-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--reconnect-grace-ms', '0', '--query-rate', '10000', '--query-burst', '10000'];

// The seed is printed so that a failing run can be replayed.
const SEED = Number(process.env.DURABLE_SEED || (Date.now() % 100000));
const rnd = seeded(SEED);
const { round, verify } = durability({ key: KEY, rnd, run: `${process.pid}` });

test('acknowledged settings survive kill -9 (admin API and protocol, interleaved)', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-durable-'));
  const store = path.join(dir, 'settings.db');
  const log = [`seed ${SEED} (DURABLE_SEED to replay)`];
  const recs = [];
  let srv = await startServer([...FLAGS, '--store', store]);
  try {
    for (let r = 0; r < 3; r++) {
      const target = 60 + Math.floor(rnd() * 60);
      recs.push(await round(srv, r, target, log));
      srv = await startServer([...FLAGS, '--store', store]);
      await verify(srv, recs);
    }
    const total = recs.reduce((t, rec) => t + rec.contacts.acked.length + rec.blocks.acked.length
      + Object.values(rec.privacy).reduce((a, p) => a + p.lastAcked + 1, 0), 0);
    assert.ok(total >= 180, `enough acknowledged changes: ${total}`);
    // A clean stop and start keeps everything too.
    await stopClean(srv, assert);
    srv = await startServer([...FLAGS, '--store', store]);
    await verify(srv, recs);
    t.diagnostic(log.join('; '));
  } catch (e) {
    e.message += `\n${log.join('\n')}`;
    throw e;
  } finally {
    await stopClean(srv, assert);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
