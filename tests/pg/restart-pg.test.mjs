// A clean restart keeps presence with the PostgreSQL store too (issue 20):
// SIGTERM writes the sessions to presenced_saved_sessions, the next start
// restores them in their grace and deletes the rows; a resumed client
// finds its status and room metadata as they were. With PostgreSQL down at
// the stop, the failure is logged and the process still exits 0.
// Run through tests/pg/run.sh (PRESENCED_TEST_PG, PRESENCED_TEST_PG_CTL).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer } from '../integration/lib/server.mjs';
import { Client } from '../integration/lib/client.mjs';

const PG = process.env.PRESENCED_TEST_PG;
const CTL = process.env.PRESENCED_TEST_PG_CTL;
const FLAGS = ['--workers', '2', '--reconnect-grace-ms', '8000', '--presence-debounce-ms', '20',
  '--room-batch-ms', '20'];
const RUN = `${process.pid}-${Date.now().toString(36)}`;
let n = 0;
const uid = (p) => `${p}-${RUN}-${++n}`;

before(() => {
  assert.ok(PG && CTL, 'PRESENCED_TEST_PG is not set: run this through tests/pg/run.sh');
});

const start = () => startServer([...FLAGS, '--store', PG]);
const psql = (sql) => execFileSync('psql', [PG, '-XAtq', '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8' }).trim();
const rows = (sid) => Number(psql(`SELECT count(*) FROM presenced_saved_sessions WHERE sid = '${sid}'`));

async function cleanStop(srv) {
  const { code, signal } = await srv.stop('SIGTERM');
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
  assert.doesNotMatch(srv.stderr, /ERROR: AddressSanitizer|runtime error:|LeakSanitizer/);
}

async function ok(c, msg) {
  c.send({ ...msg, ref: 'x' });
  const m = await c.next((x) => x.ref === 'x');
  assert.notEqual(m.type, 'error', JSON.stringify(m));
}

test('PostgreSQL: saved at SIGTERM, restored and deleted at start, resumed without a change', async () => {
  const [ann, eve] = [uid('ann'), uid('eve')];
  const room = uid('room');
  let srv = await start();
  const a = await Client.open(srv, { user: ann });
  await ok(a, { type: 'status', status: 'busy' });
  await ok(a, { type: 'join', room, meta: { name: 'Ann' } });
  await cleanStop(srv);
  assert.equal(rows(a.welcome.sessionId), 1, 'saved in presenced_saved_sessions');
  srv = await start();
  try {
    assert.equal(rows(a.welcome.sessionId), 0, 'taken out at start');
    const w = await Client.open(srv, { user: eve });
    await ok(w, { type: 'watch', users: [ann] });
    const p = await w.presenceOf(ann);
    assert.equal(p.status, 'busy');
    w.send({ type: 'join', room, ref: 'j' });
    const snap = await w.next((m) => m.type === 'room_snapshot' && m.room === room);
    assert.deepEqual(snap.members.find((m) => m.user === ann)?.meta, { name: 'Ann' });
    const a2 = await Client.open(srv, { user: ann, resume: a.welcome.sessionId });
    assert.equal(a2.welcome.resumed, true);
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(w.msgs.filter((m) => m.type === 'presence' || m.type === 'room_delta'), []);
    a2.send({ type: 'leave' });
    w.send({ type: 'leave' });
    await Promise.all([a2.closed, w.closed]);
  } finally {
    await cleanStop(srv);
  }
});

test('PostgreSQL down at the stop: the save fails, is logged, and the process exits 0', async () => {
  const ann = uid('ann');
  const srv = await start();
  const a = await Client.open(srv, { user: ann });
  assert.equal(a.welcome.type, 'welcome');
  execFileSync(CTL, ['stop'], { stdio: 'ignore' });
  try {
    const t0 = Date.now();
    await cleanStop(srv);
    assert.ok(Date.now() - t0 < 30000, 'no hang');
    assert.match(srv.stderr, /cannot save 1 sessions for the next start/);
  } finally {
    execFileSync(CTL, ['start'], { stdio: 'ignore' });
  }
  assert.equal(rows(a.welcome.sessionId), 0, 'nothing saved');
});
