// The admin API (HTTP, Authorization: Bearer <admin-api-key>): 401 for a
// missing or wrong key (also one differing only in its last byte), 403 when
// the admin API is disabled, 400 with a clear error body for bad input,
// privacy get/set, contacts replace/add/remove (10,000 ids), block/unblock,
// kicking a user or one session (session_ended "kicked", close 4000, offline
// at once), unfiltered presence and last seen next to the filtered public
// reads, rooms and their members including hidden ones.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep, MULT, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest } from './lib/admin.mjs';

const KEY = 'admin-test-key-0123456789abcdefXYZ';
const FLAGS = ['--workers', '2', '--presence-debounce-ms', '20', '--room-batch-ms', '20',
  '--reconnect-grace-ms', '5000', '--heartbeat-interval-ms', '1000', '--heartbeat-min-ms', '100',
  '--session-ttl-ms', '30000', '--query-rate', '10000', '--query-burst', '10000',
  '--http-max-body-bytes', '4000000'];

let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;
const req = (srv, method, p, { body, key = KEY, auth } = {}) => adminRequest(srv, method, p, { body, key, auth });
async function ok(srv, method, p, body) {
  const r = await req(srv, method, p, { body });
  assert.equal(r.status, 200, `${method} ${p} ${JSON.stringify(body)?.slice(0, 100)} -> ${r.status} ${r.text}`);
  assert.match(r.headers.get('content-type') || '', /application\/json/);
  return r.json;
}
// An anonymous observer watching u, then u online on a desktop and a mobile.
async function watchedOnTwoDevices(srv, u) {
  const obs = await Client.open(srv);
  obs.send({ type: 'watch', users: [u], ref: 'w' });
  await obs.presenceOf(u);
  const s1 = await Client.open(srv, { user: u, device: 'desktop' });
  const s2 = await Client.open(srv, { user: u, device: 'mobile' });
  await waitUntil(async () => Object.keys((await ok(srv, 'GET', `/v1/admin/presence?user=${u}`)).users[0].devices).length === 2, 'two devices');
  return { obs, s1, s2 };
}
// The spec writes errors as {"error":code,"message":...}; the older HTTP API
// as {"error":{"code":...,"message":...}}. Either is accepted; the code and a
// non-empty message are required.
function errOf(r) {
  const j = r.json;
  assert.ok(j && j.error, `a JSON error body: ${r.text}`);
  if (typeof j.error === 'string') return { code: j.error, message: j.message };
  return { code: j.error.code, message: j.error.message };
}
const pub = async (srv, u, as) => (await (await fetch(`${srv.url}/v1/presence?user=${u}${as ? `&as=${as}` : ''}`)).json()).users[0];

// Every admin endpoint with a valid request shape.
const ENDPOINTS = (u) => [
  ['GET', `/v1/admin/users/${u}/privacy`],
  ['PUT', `/v1/admin/users/${u}/privacy`, { invisible: false }],
  ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: [] }],
  ['POST', `/v1/admin/users/${u}/contacts`, { add: ['x1'] }],
  ['PUT', `/v1/admin/users/${u}/blocks/t1`],
  ['DELETE', `/v1/admin/users/${u}/blocks/t1`],
  ['POST', `/v1/admin/users/${u}/kick`, {}],
  ['GET', `/v1/admin/presence?user=${u}`],
  ['GET', `/v1/admin/lastseen?user=${u}`],
  ['GET', '/v1/admin/rooms'],
  ['GET', '/v1/admin/rooms/some-room'],
];

describe('admin API disabled (no admin-api-key)', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS]); });
  after(async () => { await stopClean(srv, assert); });

  test('every admin endpoint answers 403 admin_disabled, whatever the key', async () => {
    for (const [m, p, body] of ENDPOINTS('u1')) {
      for (const opt of [{ key: null }, { key: KEY }, { key: '' }]) {
        const r = await req(srv, m, p, { body, ...opt });
        assert.equal(r.status, 403, `${m} ${p} ${JSON.stringify(opt)}: ${r.text}`);
        const e = errOf(r);
        assert.equal(e.code, 'admin_disabled');
      }
    }
    // and nothing was changed
    const c = await Client.open(srv, { user: 'u1' });
    assert.deepEqual((await c.next((m) => m.type === 'privacy_changed')).privacy,
      { online: 'everyone', lastSeen: 'everyone', invisible: false });
    await c.close();
  });
});

describe('admin API', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS, '--admin-api-key', KEY]); });
  after(async () => { await stopClean(srv, assert); });

  test('401 for a missing, wrong, truncated, extended or last-byte-different key, on every endpoint', async () => {
    const last = KEY.at(-1);
    const wrong = [
      { key: null },
      { auth: '' },
      { auth: 'Bearer' },
      { auth: 'Bearer ' },
      { key: 'nope' },
      { key: KEY.slice(0, -1) + (last === 'Z' ? 'Y' : 'Z') },
      { key: KEY.slice(0, -1) },
      { key: `${KEY}x` },
      { key: KEY.toLowerCase() },
      { key: ` ${KEY}` },
      { auth: `Basic ${Buffer.from(`admin:${KEY}`).toString('base64')}` },
      { auth: KEY },
    ];
    const target = uid('auth-t');
    for (const [m, p, body] of ENDPOINTS(target)) {
      for (const w of wrong) {
        const r = await req(srv, m, p, { body, ...w });
        assert.equal(r.status, 401, `${m} ${p} with ${JSON.stringify(w)}: ${r.status} ${r.text}`);
        assert.equal(errOf(r).code, 'unauthorized');
      }
    }
    // Nothing changed for the target.
    const g = await ok(srv, 'GET', `/v1/admin/users/${target}/privacy`);
    assert.deepEqual(g, { user: target, privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
    // A client token is not an admin key, and the admin key is not a client identity.
    const r = await req(srv, 'GET', `/v1/presence?user=${target}`, { key: KEY });
    assert.equal(r.status, 200);
  });

  test('400 with a clear error body for bad JSON, bad ids and bad values; nothing changes', async () => {
    const u = uid('bad');
    const long = 'a'.repeat(129);
    const cases = [
      ['PUT', `/v1/admin/users/${u}/privacy`, '{'],
      ['PUT', `/v1/admin/users/${u}/privacy`, '{"online":"everyone"} x'],
      ['PUT', `/v1/admin/users/${u}/privacy`, '[]'],
      ['PUT', `/v1/admin/users/${u}/privacy`, 'null'],
      ['PUT', `/v1/admin/users/${u}/privacy`, '"invisible"'],
      ['PUT', `/v1/admin/users/${u}/privacy`, { online: 'friends' }],
      ['PUT', `/v1/admin/users/${u}/privacy`, { lastSeen: 'all' }],
      ['PUT', `/v1/admin/users/${u}/privacy`, { invisible: 'true' }],
      ['PUT', `/v1/admin/users/${u}/privacy`, { invisible: 1 }],
      ['PUT', `/v1/admin/users/${u}/privacy`, { online: null }],
      ['PUT', `/v1/admin/users/${u}/privacy`, { online: 'nobody', lastSeen: 'bogus' }],
      ['PUT', '/v1/admin/users/bad%20id/privacy', { invisible: true }],
      ['PUT', '/v1/admin/users/bad!id/privacy', { invisible: true }],
      ['PUT', `/v1/admin/users/${long}/privacy`, { invisible: true }],
      ['GET', '/v1/admin/users/bad!id/privacy'],
      ['PUT', `/v1/admin/users/${u}/contacts`, '{'],
      ['PUT', `/v1/admin/users/${u}/contacts`, {}],
      ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: 'x' }],
      ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: ['ok1', 'bad id'] }],
      ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: ['ok1', 7] }],
      ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: [long] }],
      ['PUT', `/v1/admin/users/${u}/contacts`, { contacts: Array.from({ length: 10001 }, (_, i) => `c${i}`) }],
      ['POST', `/v1/admin/users/${u}/contacts`, {}],
      ['POST', `/v1/admin/users/${u}/contacts`, { add: 'x' }],
      ['POST', `/v1/admin/users/${u}/contacts`, { add: ['ok1'], remove: ['bad id'] }],
      ['POST', `/v1/admin/users/${u}/contacts`, '{"add":['],
      ['PUT', `/v1/admin/users/${u}/blocks/bad!id`],
      ['PUT', `/v1/admin/users/bad!id/blocks/ok1`],
      ['DELETE', `/v1/admin/users/${u}/blocks/bad!id`],
      ['POST', `/v1/admin/users/${u}/kick`, '{'],
      ['POST', `/v1/admin/users/${u}/kick`, { session: 'bad id' }],
      ['POST', `/v1/admin/users/${u}/kick`, { session: 5 }],
      ['POST', `/v1/admin/users/bad!id/kick`, {}],
      ['GET', '/v1/admin/presence'],
      ['GET', '/v1/admin/presence?user=bad!id'],
      ['GET', '/v1/admin/lastseen'],
      ['GET', '/v1/admin/lastseen?user=bad!id'],
      ['GET', '/v1/admin/rooms/bad!room'],
    ];
    const failures = [];
    for (const [m, p, body] of cases) {
      const r = await req(srv, m, p, { body });
      const what = `${m} ${p.slice(0, 80)} ${String(typeof body === 'string' ? body : JSON.stringify(body)).slice(0, 60)}: ${r.status} ${r.text.slice(0, 200)}`;
      try {
        assert.equal(r.status, 400, what);
        const e = errOf(r);
        assert.equal(typeof e.code, 'string');
        assert.ok(e.code.length > 0);
        assert.equal(typeof e.message, 'string', `a message: ${r.text}`);
        assert.ok(e.message.length > 3, `a clear message: ${r.text}`);
      } catch (err) {
        failures.push(r.status === 400 ? `${what} (${err.message.split('\n')[0]})` : what);
      }
    }
    assert.deepEqual(failures, [], failures.join('\n'));
    assert.deepEqual(await ok(srv, 'GET', `/v1/admin/users/${u}/privacy`),
      { user: u, privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
    // ok1 never became a contact (the mixed requests were refused as a whole).
    await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { online: 'contacts' });
    const s = await Client.open(srv, { user: u });
    await waitUntil(async () => (await ok(srv, 'GET', `/v1/admin/presence?user=${u}`)).users[0].status === 'online', 'online');
    assert.equal((await pub(srv, u, 'ok1')).status, 'offline');
    await s.close();
  });

  test('privacy: GET defaults, PUT subsets, answers with the new values', async () => {
    const u = uid('pv');
    assert.deepEqual(await ok(srv, 'GET', `/v1/admin/users/${u}/privacy`),
      { user: u, privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { online: 'contacts' }),
      { user: u, privacy: { online: 'contacts', lastSeen: 'everyone', invisible: false } });
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { lastSeen: 'nobody', invisible: true }),
      { user: u, privacy: { online: 'contacts', lastSeen: 'nobody', invisible: true } });
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, {}),
      { user: u, privacy: { online: 'contacts', lastSeen: 'nobody', invisible: true } });
    assert.deepEqual(await ok(srv, 'GET', `/v1/admin/users/${u}/privacy`),
      { user: u, privacy: { online: 'contacts', lastSeen: 'nobody', invisible: true } });
  });

  test('contacts: replace, add, remove, 10,000 ids; the effect on online visibility', async () => {
    const u = uid('ct');
    await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { online: 'contacts' });
    const s = await Client.open(srv, { user: u });
    await waitUntil(async () => (await ok(srv, 'GET', `/v1/admin/presence?user=${u}`)).users[0].status === 'online', 'online');
    const sees = async (v) => (await pub(srv, u, v)).status === 'online';
    const big = Array.from({ length: 10000 }, (_, i) => `big-${i}`);
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/contacts`, { contacts: big }), { user: u, changed: 10000 });
    for (const v of ['big-0', 'big-4999', 'big-9999']) assert.equal(await sees(v), true, v);
    assert.equal(await sees('big-10000'), false);
    assert.equal((await pub(srv, u)).status, 'offline', 'anonymous');
    // Replace: the old set is gone.
    // "changed" of a replace: the net rows (9999 deleted + 2 inserted) or all
    // rows rewritten (10000 + 3); the spec does not say which.
    const rep = await ok(srv, 'PUT', `/v1/admin/users/${u}/contacts`, { contacts: ['c1', 'c2', 'big-0'] });
    assert.equal(rep.user, u);
    assert.ok([10001, 10003].includes(rep.changed), `changed ${rep.changed}`);
    assert.equal(await sees('big-9999'), false);
    assert.equal(await sees('big-0'), true);
    assert.equal(await sees('c1'), true);
    // Add and remove.
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { add: ['c3', 'c1'] }), { user: u, changed: 1 });
    assert.equal(await sees('c3'), true);
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { remove: ['c1', 'zz'] }), { user: u, changed: 1 });
    assert.equal(await sees('c1'), false);
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { add: ['c4'] }), { user: u, changed: 1 });
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { remove: ['c2'] }), { user: u, changed: 1 });
    assert.equal(await sees('c4'), true);
    assert.equal(await sees('c2'), false);
    // 10,000 in one add and one remove.
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { add: big }), { user: u, changed: 9999 });
    assert.equal(await sees('big-7777'), true);
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { remove: big }), { user: u, changed: 10000 });
    assert.equal(await sees('big-7777'), false);
    // Empty replace clears.
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/contacts`, { contacts: [] }), { user: u, changed: 2 });
    assert.equal(await sees('c3'), false);
    // Contacts are one-way: u being in c9's contacts says nothing about c9's view of u.
    await ok(srv, 'PUT', `/v1/admin/users/c9/contacts`, { contacts: [u] });
    assert.equal(await sees('c9'), false);
    // A current contact watcher loses u at once when removed.
    await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { add: ['w1'] });
    const w = await Client.open(srv, { user: 'w1' });
    w.send({ type: 'watch', users: [u], ref: 'w' });
    assert.equal((await w.presenceOf(u)).status, 'online');
    await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { remove: ['w1'] });
    assert.deepEqual(await w.presenceOf(u), { user: u, status: 'offline', devices: {} });
    await ok(srv, 'PUT', `/v1/admin/users/${u}/contacts`, { contacts: ['w1'] });
    assert.equal((await w.presenceOf(u)).status, 'online');
    // One list per call (docs/api.md): both at once is refused, nothing changes.
    const both = await req(srv, 'POST', `/v1/admin/users/${u}/contacts`, { body: { add: ['c5'], remove: ['w1'] } });
    assert.equal(both.status, 400, both.text);
    assert.equal(await sees('c5'), false);
    assert.equal(await sees('w1'), true);
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { add: ['c5'] }), { user: u, changed: 1 });
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/contacts`, { remove: ['w1'] }), { user: u, changed: 1 });
    assert.equal(await sees('c5'), true);
    assert.equal(await sees('w1'), false);
    await w.close();
    await s.close();
  });

  test('block and unblock: the blocked user sees offline at once, and online again', async () => {
    const u = uid('bl');
    const t = uid('blt');
    const s = await Client.open(srv, { user: u });
    s.send({ type: 'status', status: 'busy', ref: 'b' });
    await s.next((m) => m.ref === 'b');
    await waitUntil(async () => (await pub(srv, u)).status === 'busy', 'busy published');
    const w = await Client.open(srv, { user: t });
    w.send({ type: 'watch', users: [u], ref: 'w' });
    assert.equal((await w.presenceOf(u)).status, 'busy');
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/blocks/${t}`), { user: u, changed: 1 });
    assert.deepEqual(await w.presenceOf(u), { user: u, status: 'offline', devices: {} });
    assert.deepEqual(await pub(srv, u, t), { user: u, status: 'offline', devices: {} });
    assert.equal((await pub(srv, u, 'someone-else')).status, 'busy');
    assert.deepEqual(await ok(srv, 'PUT', `/v1/admin/users/${u}/blocks/${t}`), { user: u, changed: 0 });
    // Blocking is one-way.
    await waitUntil(async () => (await pub(srv, t, u)).status === 'online', 'u still sees t');
    assert.deepEqual(await ok(srv, 'DELETE', `/v1/admin/users/${u}/blocks/${t}`), { user: u, changed: 1 });
    const back = await w.presenceOf(u);
    assert.equal(back.status, 'busy');
    assert.ok(!('version' in back));
    assert.deepEqual(await ok(srv, 'DELETE', `/v1/admin/users/${u}/blocks/${t}`), { user: u, changed: 0 });
    await w.close();
    await s.close();
  });

  test('kick a user: every session gets session_ended kicked and close 4000; observers see offline at once', async () => {
    const u = uid('kick');
    const { obs, s1, s2 } = await watchedOnTwoDevices(srv, u);
    const room = uid('kroom');
    const m = await Client.open(srv, { user: uid('member') });
    for (const [c, r] of [[m, 'jm'], [s1, 'j1']]) {
      c.send({ type: 'join', room, ref: r });
      await c.next((x) => x.type === 'room_joined');
    }
    await m.next((x) => x.type === 'room_delta' && x.joins.some((j) => j.user === u));
    const t0 = Date.now();
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`, { reason: 'bye' }), { user: u, kicked: 2 });
    for (const s of [s1, s2]) {
      const e = await s.next((x) => x.type === 'session_ended');
      assert.equal(e.reason, 'kicked');
      assert.equal(e.message, 'bye');
      assert.equal((await s.closed).code, 4000);
    }
    let p = await obs.presenceOf(u, 3000);
    while (p.status !== 'offline') p = await obs.presenceOf(u, 3000);
    assert.ok(Date.now() - t0 < 2500 * MULT, `offline after ${Date.now() - t0} ms: no 5 s grace`);
    const d = await m.next((x) => x.type === 'room_delta' && x.leaves.includes(u), 3000);
    assert.equal(d.count, 1);
    // Kicking again finds nobody.
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`), { user: u, kicked: 0 });
    const nv = uid('never');
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${nv}/kick`, {}), { user: nv, kicked: 0 });
    await m.close();
    await obs.close();
  });

  test('kick one session: only it ends (with the reason text); the user stays online', async () => {
    const u = uid('kick1');
    const { obs, s1, s2 } = await watchedOnTwoDevices(srv, u);
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`, { session: s2.welcome.sessionId, reason: 'policy violation' }),
      { user: u, kicked: 1 });
    const e = await s2.next((x) => x.type === 'session_ended');
    assert.deepEqual([e.reason, e.message], ['kicked', 'policy violation']);
    assert.equal((await s2.closed).code, 4000);
    let p = await obs.presenceOf(u);
    while (p.devices.mobile) p = await obs.presenceOf(u);
    assert.deepEqual(p.devices, { desktop: 'online' }, 'the mobile session is gone at once');
    assert.equal(s1.ws.readyState, 1);
    // A session of another user is not kicked through this user.
    const v = uid('other');
    const sv = await Client.open(srv, { user: v });
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`, { session: sv.welcome.sessionId }), { user: u, kicked: 0 });
    await sleep(200 * MULT);
    assert.equal(sv.ws.readyState, 1);
    // An unknown session id kicks nothing.
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`, { session: 'f'.repeat(32) }), { user: u, kicked: 0 });
    // The kicked session cannot be resumed.
    const r = await Client.open(srv, { user: u, resume: s2.welcome.sessionId });
    assert.equal(r.welcome.resumed, false);
    await r.close();
    await sv.close();
    await s1.close();
    await obs.close();
  });

  test('kicking an invisible user is invisible to others', async () => {
    const u = uid('kinv');
    const room = uid('kinvroom');
    await ok(srv, 'PUT', `/v1/admin/users/${u}/privacy`, { invisible: true });
    const m = await Client.open(srv, { user: uid('kmember') });
    m.send({ type: 'join', room, ref: 'jm' });
    await m.next((x) => x.type === 'room_joined');
    const obs = await Client.open(srv);
    obs.send({ type: 'watch', users: [u], ref: 'w' });
    assert.deepEqual(await obs.presenceOf(u), { user: u, status: 'offline', devices: {} });
    const s = await Client.open(srv, { user: u });
    s.send({ type: 'join', room, ref: 'j' });
    await s.next((x) => x.type === 'room_joined');
    await waitUntil(async () => (await ok(srv, 'GET', `/v1/admin/presence?user=${u}`)).users[0].status === 'online', 'online (true state)');
    const marks = [obs.seen.length, m.seen.length];
    assert.deepEqual(await ok(srv, 'POST', `/v1/admin/users/${u}/kick`, { reason: 'bye' }), { user: u, kicked: 1 });
    assert.equal((await s.next((x) => x.type === 'session_ended')).reason, 'kicked');
    await waitUntil(async () => (await ok(srv, 'GET', `/v1/admin/presence?user=${u}`)).users[0].status === 'offline', 'offline (true state)');
    await sleep(300 * MULT);
    assert.deepEqual(obs.seen.slice(marks[0]), [], 'the watcher sees nothing');
    assert.deepEqual(m.seen.slice(marks[1]).filter((x) => x.room === room), [], 'the room sees nothing');
    assert.deepEqual((await (await fetch(`${srv.url}/v1/rooms/${room}`)).json()).count, 1);
    await m.close();
    await obs.close();
  });

  test('unfiltered presence and last seen next to the filtered public reads', async () => {
    const inv = uid('uinv');
    const gone = uid('ugone');
    const unk = uid('uunk');
    await ok(srv, 'PUT', `/v1/admin/users/${inv}/privacy`, { invisible: true });
    await ok(srv, 'PUT', `/v1/admin/users/${gone}/privacy`, { lastSeen: 'nobody', online: 'nobody' });
    const si = await Client.open(srv, { user: inv, device: 'tablet' });
    si.send({ type: 'status', status: 'dnd', ref: 'd' });
    await si.next((m) => m.ref === 'd');
    const t0 = Date.now();
    const sg = await Client.open(srv, { user: gone });
    sg.send({ type: 'leave' });
    await sg.closed;
    const a = await waitUntil(async () => {
      const r = await ok(srv, 'GET', `/v1/admin/presence?user=${inv}&user=${gone}&user=${unk}`);
      return r.users[0].status === 'dnd' && r.users[1].status === 'offline' && r.users[1].lastSeen ? r : null;
    }, 'true states');
    assert.deepEqual(a.users.map((p) => p.user), [inv, gone, unk]);
    assert.deepEqual(a.users[0].devices, { tablet: 'dnd' });
    for (const p of a.users.slice(0, 2)) assert.equal(typeof p.version, 'number', 'admin reads carry versions');
    assert.ok(a.users[1].lastSeen.at >= t0 - 5 && a.users[1].lastSeen.at <= Date.now());
    assert.equal(a.users[2].status, 'offline');
    // The public reads of the same users are all "unknown".
    const p = await (await fetch(`${srv.url}/v1/presence?user=${inv}&user=${gone}&user=${unk}`)).json();
    assert.deepEqual(p.users, [inv, gone, unk].map((u) => ({ user: u, status: 'offline', devices: {} })));
    const ls = await ok(srv, 'GET', `/v1/admin/lastseen?user=${inv}&user=${gone}&user=${unk}`);
    assert.equal(ls.users.length, 3);
    assert.equal(ls.users[0].user, inv);
    assert.equal(ls.users[1].user, gone);
    assert.equal(typeof ls.users[1].lastSeen.at, 'number');
    assert.ok(ls.users[1].lastSeen.at >= t0 - 5);
    // The spec's shape is {"user","lastSeen":{...}|null}; docs/api.md says
    // "like /v1/lastseen" ({"user","online"[,"lastSeen"]}). Either is taken.
    if ('online' in ls.users[2]) assert.deepEqual(ls.users[2], { user: unk, online: false });
    else assert.deepEqual(ls.users[2], { user: unk, lastSeen: null });
    assert.ok(!('online' in ls.users[1]) || ls.users[1].online === false);
    const pls = await (await fetch(`${srv.url}/v1/lastseen?user=${gone}`)).json();
    assert.equal(pls.users[0].lastSeen, undefined, 'the public read hides it');
    await si.close();
  });

  test('rooms: listing with member counts and the members of a room, hidden ones included', async () => {
    const room = uid('aroom');
    const vis = uid('rvis');
    const hid = uid('rhid');
    const nob = uid('rnob');
    await ok(srv, 'PUT', `/v1/admin/users/${hid}/privacy`, { invisible: true });
    await ok(srv, 'PUT', `/v1/admin/users/${nob}/privacy`, { online: 'nobody' });
    const cs = [];
    for (const u of [vis, hid, nob]) {
      const c = await Client.open(srv, { user: u });
      c.send({ type: 'join', room, meta: { name: u }, ref: 'j' });
      assert.equal((await c.next((m) => m.ref === 'j' && (m.type === 'room_joined' || m.type === 'error'))).type, 'room_joined');
      cs.push(c);
    }
    const info = await waitUntil(async () => {
      const r = await ok(srv, 'GET', `/v1/admin/rooms/${room}`);
      return r.members && r.members.length === 3 ? r : null;
    }, 'admin room info with 3 members');
    assert.equal(info.room, room);
    assert.deepEqual(info.members.map((m) => m.user).sort(), [vis, hid, nob].sort());
    const list = await ok(srv, 'GET', '/v1/admin/rooms');
    const mine = list.rooms.find((r) => r.room === room);
    assert.ok(mine, `the room is listed: ${JSON.stringify(list).slice(0, 300)}`);
    assert.equal(mine.members, 3, 'the listing counts hidden members too');
    // The public read shows only the visible member.
    const pr = await (await fetch(`${srv.url}/v1/rooms/${room}`)).json();
    assert.equal(pr.count, 1);
    assert.deepEqual(pr.members.map((m) => m.user), [vis]);
    // An unknown room.
    const none = await req(srv, 'GET', `/v1/admin/rooms/${uid('noroom')}`);
    assert.ok([200, 404].includes(none.status), none.text);
    if (none.status === 200) assert.deepEqual(none.json.members, []);
    for (const c of cs) { c.send({ type: 'leave' }); await c.closed; }
    await waitUntil(async () => !(await ok(srv, 'GET', '/v1/admin/rooms')).rooms.some((r) => r.room === room), 'room gone', 8000);
  });
});
