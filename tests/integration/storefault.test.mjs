// Faults of the SQLite settings file under a running server (issue 15,
// item 4). The file deleted or replaced: every later write is refused
// (503 store_unavailable on the admin API, error store_unavailable on the
// protocol), never acknowledged; /readyz answers 503 store_unhealthy with
// the reason; the log says so. The -shm file truncated or made unwritable:
// no crash (presenced keeps the WAL index in its own memory), reads and
// writes go on and survive a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopClean, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest, adminOk as adminOkAs } from './lib/admin.mjs';

const KEY = 'storefault-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--reconnect-grace-ms', '0', '--query-rate', '10000', '--query-burst', '10000'];
const DEFAULT = { online: 'everyone', lastSeen: 'everyone', invisible: false };
let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;
const admin = (srv, method, p, body) => adminRequest(srv, method, p, { body, key: KEY });
const adminOk = (srv, method, p, body) => adminOkAs(srv, KEY, method, p, body);
const errCode = (j) => j && (typeof j.error === 'string' ? j.error : j.error && j.error.code);

function tmpStore(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'presenced-storefault-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'settings.db');
}

async function readyz(srv) {
  const r = await fetch(`${srv.url}/readyz`);
  return { status: r.status, json: await r.json() };
}

async function refused(srv, u) {
  const w = await admin(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { invisible: true });
  assert.equal(w.status, 503, w.text);
  assert.equal(errCode(w.json), 'store_unavailable');
  assert.match(w.text, /deleted or replaced/);
}

for (const fault of ['deleted', 'replaced']) {
  test(`the settings file ${fault} while running: writes refused, /readyz 503, logged`, async (t) => {
    const db = tmpStore(t);
    const A = uid('a');
    const B = uid('b');
    const C = uid('c');
    let srv = await startServer([...FLAGS, '--store', db]);
    try {
      await adminOk(srv, 'PUT', `/v1/admin/users/${A}/privacy`, { invisible: true });
      assert.deepEqual(await readyz(srv), { status: 200, json: { status: 'ready' } });
      if (fault === 'deleted') {
        fs.unlinkSync(db);
      } else {
        fs.writeFileSync(`${db}.new`, '');
        fs.renameSync(`${db}.new`, db);
      }
      // Admin write: refused, not acknowledged.
      await refused(srv, B);
      // Protocol write: an error, no privacy_changed.
      const c = await Client.open(srv, { user: C });
      await c.next((m) => m.type === 'privacy_changed');
      c.send({ type: 'privacy', invisible: true, ref: 'p' });
      const e = await c.next((m) => m.ref === 'p');
      assert.equal(e.type, 'error');
      assert.equal(e.code, 'store_unavailable');
      assert.equal(c.msgs.filter((m) => m.type === 'privacy_changed').length, 0);
      await c.close();
      // Not ready, and why.
      const r = await readyz(srv);
      assert.equal(r.status, 503);
      assert.equal(errCode(r.json), 'store_unhealthy');
      assert.match(r.json.error.message, /deleted or replaced/);
      assert.match(srv.stderr, /deleted or replaced/);
      // Still no write goes through later.
      await refused(srv, B);
      await stopClean(srv, assert);
      // What was refused never happened.
      srv = await startServer([...FLAGS, '--store', db]);
      assert.deepEqual((await adminOk(srv, 'GET', `/v1/admin/users/${B}/privacy`)).privacy, DEFAULT);
      assert.equal((await readyz(srv)).status, 200);
    } finally {
      await stopClean(srv, assert);
    }
  });
}

// The WAL index must not live in a shared mapping of <db>-shm: a file
// someone truncates or makes unwritable would crash a mapped reader with
// SIGBUS. Whatever is done to that file, presenced goes on.
for (const fault of ['truncated', 'unwritable']) {
  test(`<db>-shm ${fault} while running: no crash, reads and writes go on`, async (t) => {
    const db = tmpStore(t);
    const shm = `${db}-shm`;
    const users = [];
    let srv = await startServer([...FLAGS, '--store', db]);
    try {
      for (let i = 0; i < 5; i++) {
        users.push(uid('s'));
        await adminOk(srv, 'PUT', `/v1/admin/users/${users[i]}/privacy`, { online: 'nobody' });
      }
      if (!fs.existsSync(shm)) fs.writeFileSync(shm, ''); // a stray file: harmless
      fs.truncateSync(shm, 0);
      if (fault === 'unwritable') fs.chmodSync(shm, 0);
      // Reads of users this server has not cached go to the database.
      const fresh = uid('f');
      assert.deepEqual((await adminOk(srv, 'GET', `/v1/admin/users/${fresh}/privacy`)).privacy, DEFAULT);
      for (let i = 0; i < 5; i++) {
        users.push(uid('s'));
        await adminOk(srv, 'PUT', `/v1/admin/users/${users.at(-1)}/privacy`, { online: 'nobody' });
      }
      assert.equal(srv.child.exitCode, null, srv.stderr);
      assert.equal(srv.child.signalCode, null, srv.stderr);
      assert.equal((await readyz(srv)).status, 200);
      await stopClean(srv, assert);
      srv = await startServer([...FLAGS, '--store', db]);
      for (const u of users)
        assert.equal((await adminOk(srv, 'GET', `/v1/admin/users/${u}/privacy`)).privacy.online, 'nobody', u);
      await waitUntil(async () => (await readyz(srv)).status === 200, 'ready');
    } finally {
      await stopClean(srv, assert);
    }
  });
}
