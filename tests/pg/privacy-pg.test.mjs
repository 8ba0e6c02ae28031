// The settings store on a real PostgreSQL (started by tests/pg/run.sh, which
// exports PRESENCED_TEST_PG): presenced runs with --store "$PRESENCED_TEST_PG".
// A basic privacy check (invisible, contacts, blocks, survive a restart),
// acknowledged changes surviving kill -9 of presenced (lib/durability.mjs,
// as in durable.test.mjs, a few rounds), and, when tests/pg/cluster.sh is
// available (PRESENCED_TEST_PG_CTL), fail-closed behaviour while PostgreSQL
// is down. Ids carry the pid and the time: the database outlives one run.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, stopClean, sleep, MULT, waitUntil } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';
import { adminRequest, adminOk as adminOkAs } from '../integration/lib/admin.mjs';
import { durability, seeded } from '../integration/lib/durability.mjs';

const PG = process.env.PRESENCED_TEST_PG;
const CTL = process.env.PRESENCED_TEST_PG_CTL;
const KEY = 'pg-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--room-batch-ms', '20', '--reconnect-grace-ms', '0', '--query-rate', '10000', '--query-burst', '10000'];
const DEFAULT = { online: 'everyone', lastSeen: 'everyone', invisible: false };
const RUN = `${process.pid}-${Date.now().toString(36)}`;
let n = 0;
const uid = (p) => `${p}-${RUN}-${++n}`;

const SEED = Number(process.env.DURABLE_SEED || (Date.now() % 100000));
const rnd = seeded(SEED);
const { round, verify } = durability({ key: KEY, rnd, run: RUN, prefix: 'pg' });

before(() => {
  // Not a skip: this suite exists to run against PostgreSQL.
  assert.ok(PG, 'PRESENCED_TEST_PG is not set: run this through tests/pg/run.sh');
  assert.match(PG, /^postgres(ql)?:\/\//);
});

const start = () => startServer([...FLAGS, '--store', PG]);
const admin = (srv, method, p, body, signal) => adminRequest(srv, method, p, { body, key: KEY, signal });
const adminOk = (srv, method, p, body) => adminOkAs(srv, KEY, method, p, body);
const view = async (srv, u, as) => (await (await fetch(`${srv.url}/v1/presence?user=${u}${as ? `&as=${as}` : ''}`)).json()).users[0];
const errCode = (j) => j && (typeof j.error === 'string' ? j.error : j.error && j.error.code);

test('privacy on PostgreSQL: invisible, contacts and blocks apply, and survive a restart', async () => {
  const X = uid('px');
  const C = uid('pc');
  const S = uid('ps');
  const B = uid('pb');
  const Y = uid('py');
  let srv = await start();
  try {
    assert.deepEqual(await adminOk(srv, 'GET', `/v1/admin/users/${X}/privacy`), { user: X, privacy: DEFAULT });
    await adminOk(srv, 'PUT', `/v1/admin/users/${X}/privacy`, { invisible: true, lastSeen: 'contacts' });
    await adminOk(srv, 'PUT', `/v1/admin/users/${Y}/privacy`, { online: 'contacts' });
    await adminOk(srv, 'PUT', `/v1/admin/users/${Y}/contacts`, { contacts: [C] });
    await adminOk(srv, 'PUT', `/v1/admin/users/${Y}/blocks/${B}`);
    for (let round = 0; round < 2; round++) {
      const x = await Client.open(srv, { user: X });
      assert.deepEqual((await x.next((m) => m.type === 'privacy_changed')).privacy,
        { online: 'everyone', lastSeen: 'contacts', invisible: true });
      const y = await Client.open(srv, { user: Y });
      await waitUntil(async () => (await adminOk(srv, 'GET', `/v1/admin/presence?user=${X}&user=${Y}`)).users.every((p) => p.status === 'online'), 'online');
      // X invisible: offline for everyone but itself.
      assert.deepEqual(await view(srv, X, S), { user: X, status: 'offline', devices: {} });
      assert.deepEqual(await view(srv, X), { user: X, status: 'offline', devices: {} });
      const self = await view(srv, X, X);
      assert.equal(self.status, 'online');
      assert.equal(typeof self.version, 'number');
      // Y: online for its contact only; its blocked user sees it as unknown.
      const yc = await view(srv, Y, C);
      assert.equal(yc.status, 'online');
      assert.ok(!('version' in yc));
      // To a stranger Y is offline. Its last seen is public (lastSeen:
      // everyone), so from round 1, after a restart, the stranger sees the one
      // stored before it (durable last seen), as it would of an absent Y.
      const { lastSeen: ySeen, ...yStranger } = await view(srv, Y, S);
      assert.deepEqual(yStranger, { user: Y, status: 'offline', devices: {} });
      if (round === 0) assert.equal(ySeen, undefined);
      else assert.equal(typeof ySeen?.at, 'number');
      assert.deepEqual(await view(srv, Y, B), { user: Y, status: 'offline', devices: {} });
      // A watcher that is a stranger sees nothing when X turns visible... then everything.
      if (round === 1) {
        const w = await Client.open(srv, { user: S });
        w.send({ type: 'watch', users: [X], ref: 'w' });
        assert.deepEqual(await w.presenceOf(X), { user: X, status: 'offline', devices: {} });
        x.send({ type: 'privacy', invisible: false, ref: 'v' });
        await x.next((m) => m.type === 'ack' && m.ref === 'v');
        const p = await w.presenceOf(X);
        assert.equal(p.status, 'online');
        x.send({ type: 'privacy', invisible: true, ref: 'i' });
        await x.next((m) => m.type === 'ack' && m.ref === 'i');
        assert.deepEqual(await w.presenceOf(X), { user: X, status: 'offline', devices: {} });
        await w.close();
      }
      for (const c of [x, y]) { c.send({ type: 'leave' }); await c.closed; }
      // Restart: everything comes back from PostgreSQL.
      await stopClean(srv, assert);
      srv = await start();
    }
    assert.deepEqual(await adminOk(srv, 'GET', `/v1/admin/users/${X}/privacy`),
      { user: X, privacy: { online: 'everyone', lastSeen: 'contacts', invisible: true } });
  } finally {
    await stopClean(srv, assert);
  }
});

test('acknowledged changes survive kill -9 of presenced (PostgreSQL store)', async () => {
  const log = [`seed ${SEED} (DURABLE_SEED to replay)`];
  const recs = [];
  let srv = await start();
  try {
    for (let r = 0; r < 3; r++) {
      recs.push(await round(srv, r, 50 + Math.floor(rnd() * 50), log));
      srv = await start();
      await verify(srv, recs);
    }
  } catch (e) {
    e.message += `\n${log.join('\n')}`;
    throw e;
  } finally {
    await stopClean(srv, assert);
  }
});

test('PostgreSQL down: writes fail with store_unavailable, reads fail closed; back up: works again', { skip: !CTL && 'PRESENCED_TEST_PG_CTL not set' }, async () => {
  const U = uid('fc');     // settings never read by this server: not cached
  const V = uid('fcv');
  const W = uid('fcw');
  let srv = await start();
  const ctl = (cmd) => execFileSync(CTL, [cmd], { stdio: 'inherit' });
  let down = false;
  try {
    await adminOk(srv, 'PUT', `/v1/admin/users/${W}/privacy`, { online: 'nobody' }); // stored now
    await stopClean(srv, assert);
    srv = await start();
    ctl('stop');
    down = true;
    // Admin writes: 503 store_unavailable.
    const w = await admin(srv, 'PUT', `/v1/admin/users/${V}/privacy`, { invisible: true });
    assert.equal(w.status, 503, w.text);
    assert.equal(errCode(w.json), 'store_unavailable');
    // Protocol writes: error store_unavailable, nothing announced.
    const v = await Client.open(srv, { user: V });
    v.send({ type: 'privacy', invisible: true, ref: 'p' });
    const e = await v.next((m) => m.ref === 'p', 15000);
    assert.equal(e.type, 'error');
    assert.equal(e.code, 'store_unavailable');
    // Reads fail closed: an online user whose settings cannot be read is
    // shown as the most private (offline to others), never as public.
    const u = await Client.open(srv, { user: U });
    const wc = await Client.open(srv, { user: W });
    await sleep(500 * MULT);
    const pu = await view(srv, U, V);
    assert.deepEqual(pu, { user: U, status: 'offline', devices: {} }, 'fail closed for an unreadable user');
    assert.deepEqual(await view(srv, W, V), { user: W, status: 'offline', devices: {} }, 'online=nobody stays hidden');
    // Room reads by a reader whose blockers cannot be read are refused
    // (503, or the degraded answer if the store is slower than 2 s),
    // never answered unfiltered; a room stream ends with an error event.
    const room = uid('fcroom');
    const rr = await fetch(`${srv.url}/v1/rooms/${room}?as=${V}`);
    const rb = await rr.json();
    if (rr.status === 503) assert.equal(errCode(rb), 'store_unavailable');
    else assert.deepEqual([rr.status, rb.degraded, rb.members], [200, true, undefined], JSON.stringify(rb));
    const es = await fetch(`${srv.url}/v1/rooms/${room}/events?as=${V}`);
    assert.equal(es.status, 200);
    const text = await es.text(); // the server ends the stream
    assert.match(text, /event: error\ndata: \{"code":"store_unavailable"/);
    assert.doesNotMatch(text, /room_snapshot/);
    ctl('start');
    down = false;
    // Back: writes succeed again (the store reconnects).
    await waitUntil(async () => (await admin(srv, 'PUT', `/v1/admin/users/${V}/privacy`, { lastSeen: 'nobody' })).status === 200, 'writes work again', 20000);
    assert.deepEqual((await adminOk(srv, 'GET', `/v1/admin/users/${V}/privacy`)).privacy,
      { online: 'everyone', lastSeen: 'nobody', invisible: false }, 'the refused write did not happen');
    for (const c of [u, v, wc]) await c.close();
  } finally {
    if (down) ctl('start');
    await stopClean(srv, assert);
  }
});
