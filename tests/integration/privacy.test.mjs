// Privacy over real sockets (docs: /work/spec/privacy-spec.md, issue 4):
// online and last-seen visibility (everyone | contacts | nobody) x viewer
// relationship (self, contact, stranger, blocked, anonymous) x invisible,
// checked on every channel (WebSocket watch snapshot and live updates, HTTP
// GET /v1/presence and /v1/lastseen with ?as=, SSE /v1/presence/events);
// settings set through the admin API and the `privacy` message;
// `privacy_changed` on every session; changes applied at once to current
// watchers; rooms hide invisible / not-everyone members; enumeration
// resistance (byte-identical answers); the per-connection query rate limit.
//
// The expected values come from the small model below (expectedView), written
// from the spec, never from server output.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean, sleep, MULT, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminRequest, adminOk as adminOkAs } from './lib/admin.mjs';
import { streamSse as sse } from './lib/sse.mjs';

// ---------------------------------------------------------------- helpers
const KEY = 'privacy-admin-key-0123456789abcdef';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--room-batch-ms', '20', '--reconnect-grace-ms', '200', '--heartbeat-interval-ms', '1000',
  '--heartbeat-min-ms', '100', '--session-ttl-ms', '20000', '--idle-ms', '600000'];
const SETTLE = 300 * MULT; // quiet period after the last expected event
const MODES = ['everyone', 'contacts', 'nobody'];

let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;


const admin = (srv, method, p, body, key = KEY) => adminRequest(srv, method, p, { body, key });
const adminOk = (srv, method, p, body) => adminOkAs(srv, KEY, method, p, body);
const setPrivacy = (srv, u, p) => adminOk(srv, 'PUT', `/v1/admin/users/${u}/privacy`, p);
const setContacts = (srv, u, ids) => adminOk(srv, 'PUT', `/v1/admin/users/${u}/contacts`, { contacts: ids });
const block = (srv, u, t) => adminOk(srv, 'PUT', `/v1/admin/users/${u}/blocks/${t}`);
const errCode = (j) => j && (typeof j.error === 'string' ? j.error : j.error && j.error.code);


async function watch(c, users, ref = 'w') {
  c.send({ type: 'watch', users, ref });
  const m = await c.next((x) => (x.type === 'ack' || x.type === 'error') && x.ref === ref);
  assert.equal(m.type, 'ack', `watch ${users}: ${JSON.stringify(m)}`);
}
const presOf = (msgs, u) => msgs.filter((m) => m.type === 'presence' && m.presence.user === u).map((m) => m.presence);

// ---------------------------------------------------------------- the model
// A user's true state is world.truth while world.online. world.realLs is the
// exact time (ms) of the user's last seen as it sees itself; world.publicLs
// the exact time others may see (the last time it appeared to go offline;
// frozen while invisible). Both null when there is none.
// Others get lastSeen.at rounded down by age: to the minute under an hour
// (every last seen in this file is seconds old), and `seconds` without value.
const floorMin = (t) => Math.floor(t / 60000) * 60000;
function allowed(mode, rel) { return mode === 'everyone' || (mode === 'contacts' && rel === 'contact'); }
function expectedView(u, settings, rel, world) {
  if (rel === 'self') {
    if (world.online) return { user: u, ...world.truth };
    return { user: u, status: 'offline', devices: {}, ...(world.realLs !== null ? { lastSeen: { at: world.realLs } } : {}) };
  }
  if (rel === 'blocked') return { user: u, status: 'offline', devices: {} };
  // anonymous viewers are strangers
  const r = rel === 'anon' ? 'stranger' : rel;
  const showOnline = !settings.invisible && allowed(settings.online, r);
  if (world.online && showOnline) return { user: u, ...world.truth };
  const ls = allowed(settings.lastSeen, r) ? world.publicLs : null;
  return { user: u, status: 'offline', devices: {}, ...(ls !== null ? { lastSeen: { at: floorMin(ls) } } : {}) };
}
// /v1/lastseen from the same view: online iff the view shows it online.
function expectedLastseen(view) {
  return { user: view.user, online: view.status !== 'offline', ...(view.lastSeen ? { lastSeen: view.lastSeen } : {}) };
}

// Checks the shape of lastSeen (ago) and of version (self only) and reduces
// lastSeen to its `at` for comparison with the model.
function normLsObj(o, self, p) {
  const { at, ago } = o.lastSeen;
  assert.equal(typeof at, 'number', JSON.stringify(p));
  assert.ok(at <= Date.now(), 'last seen never in the future');
  if (self) {
    assert.ok(['seconds', 'minutes'].includes(ago) && Number.isInteger(o.lastSeen.value), `self: exact, with value: ${JSON.stringify(p)}`);
  } else {
    assert.equal(at % 60000, 0, `rounded down to the minute for others: ${JSON.stringify(p)}`);
    if (ago === 'seconds') assert.ok(!('value' in o.lastSeen), `"seconds" without value for others: ${JSON.stringify(p)}`);
    else assert.equal(ago, 'minutes', JSON.stringify(p));
  }
  o.lastSeen = { at };
}
function norm(p, self) {
  const o = structuredClone(p);
  if (self) assert.equal(typeof o.version, 'number', `self view has a version: ${JSON.stringify(p)}`);
  else assert.ok(!('version' in o), `no version for others: ${JSON.stringify(p)}`);
  delete o.version;
  if (o.lastSeen !== undefined) normLsObj(o, self, p);
  return o;
}
function normLs(p, self) {
  const o = structuredClone(p);
  assert.ok(!('version' in o));
  if (o.lastSeen !== undefined) normLsObj(o, self, p);
  return o;
}
// The exact last seen of self differs by a few milliseconds between two reads
// of the same moment (each worker converts its monotonic clock to wall time
// with its own offset); tolerate 50 ms.
function near(actual, exp) {
  const a = structuredClone(actual);
  if (a.lastSeen && exp.lastSeen && Math.abs(a.lastSeen.at - exp.lastSeen.at) <= 50) a.lastSeen.at = exp.lastSeen.at;
  return a;
}
// Sleeps past the next minute boundary when it is close, so that a moment
// recorded now within a short window has one rounded value.
async function avoidMinuteEdge() {
  const left = 60000 - (Date.now() % 60000);
  if (left < 1500 * MULT) await sleep(left + 20);
}
async function exactLastSeen(srv, u) {
  return waitUntil(async () => {
    const r = await adminOk(srv, 'GET', `/v1/admin/lastseen?user=${u}`);
    return r.users[0].lastSeen ? r.users[0].lastSeen.at : null;
  }, `last seen of ${u} recorded`);
}

// ---------------------------------------------------------------- tests
describe('privacy', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS]); });
  after(async () => { await stopClean(srv, assert); });

  async function viewerOpen(rel, u, ids) {
    if (rel === 'anon') return Client.open(srv);
    return Client.open(srv, { user: ids[rel] });
  }
  const asQ = (rel, ids) => (rel === 'anon' ? '' : `&as=${ids[rel]}`);

  // One owner per combination of the three settings, all at once: the
  // snapshot on every channel, then a status change and going offline live.
  test('matrix: online x lastSeen x invisible x viewer, snapshot and live, on WS, HTTP and SSE', async () => {
    const combos = [];
    for (const invisible of [false, true]) for (const online of MODES) for (const lastSeen of MODES) combos.push({ online, lastSeen, invisible });
    const failures = [];
    await Promise.all(combos.map(async (settings) => {
      const tag = `${settings.online[0]}${settings.lastSeen[0]}${settings.invisible ? 'i' : 'v'}`;
      const clients = [];
      const streams = [];
      try {
        const ids = { self: uid(`${tag}-u`), contact: uid(`${tag}-c`), stranger: uid(`${tag}-s`), blocked: uid(`${tag}-b`) };
        const U = ids.self;
        assert.deepEqual((await setContacts(srv, U, [ids.contact])).user, U);
        await block(srv, U, ids.blocked);
        // A first session that ends: the last seen L0 (its exact time from
        // the unfiltered admin read, checked against the local clock).
        const first = await Client.open(srv, { user: U, device: 'mobile' });
        await avoidMinuteEdge(); // the rounded value for others must not depend on a millisecond
        const l0a = Date.now();
        first.send({ type: 'leave' });
        await first.closed;
        const L0 = await exactLastSeen(srv, U);
        assert.ok(L0 >= l0a - 5 && L0 <= Date.now(), 'L0 within the session end window');
        const got = await setPrivacy(srv, U, settings);
        assert.deepEqual(got, { user: U, privacy: settings });

        const u = await Client.open(srv, { user: U, device: 'desktop' });
        clients.push(u);
        const pc = await u.next((m) => m.type === 'privacy_changed');
        assert.deepEqual(pc.privacy, settings, 'a new session gets its settings after the welcome');
        u.send({ type: 'status', status: 'busy', ref: 's' });
        await u.next((m) => m.type === 'ack' && m.ref === 's');
        u.send({ type: 'custom', text: 'focus', ref: 'c' });
        await u.next((m) => m.type === 'ack' && m.ref === 'c');
        await waitUntil(async () => {
          const r = await adminOk(srv, 'GET', `/v1/admin/presence?user=${U}`);
          return r.users[0].status === 'busy' && r.users[0].custom && r.users[0].custom.text === 'focus';
        }, 'busy + custom recorded');
        const world = { online: true, truth: { status: 'busy', devices: { desktop: 'busy' }, custom: { text: 'focus' } }, realLs: L0, publicLs: L0 };

        // Viewers on every channel.
        const rels = ['self', 'contact', 'stranger', 'blocked', 'anon'];
        const ws = { self: u };
        for (const rel of rels.slice(1)) { ws[rel] = await viewerOpen(rel, U, ids); clients.push(ws[rel]); }
        const sses = {};
        for (const rel of rels) {
          sses[rel] = await sse(`${srv.url}/v1/presence/events?user=${U}${asQ(rel, ids)}`);
          assert.equal(sses[rel].status, 200);
          streams.push(sses[rel]);
        }
        for (const rel of rels) {
          const mark = ws[rel].seen.length;
          await watch(ws[rel], [U], `w-${rel}`);
          const snap = await ws[rel].presenceOf(U);
          const exp = expectedView(U, settings, rel, world);
          assert.deepEqual(near(norm(snap, rel === 'self'), exp), exp, `${tag} WS snapshot for ${rel}`);
          assert.equal(presOf(ws[rel].seen.slice(mark), U).length, 1);
          const [ev] = await sses[rel].until((e) => e.length >= 1);
          assert.equal(ev.event, 'presence');
          assert.deepEqual(near(norm(ev.data.presence, rel === 'self'), exp), exp, `${tag} SSE snapshot for ${rel}`);
          const hp = await fetch(`${srv.url}/v1/presence?user=${U}${asQ(rel, ids)}`);
          assert.equal(hp.status, 200);
          const hpj = await hp.json();
          assert.deepEqual(near(norm(hpj.users[0], rel === 'self'), exp), exp, `${tag} HTTP presence for ${rel}`);
          const hl = await fetch(`${srv.url}/v1/lastseen?user=${U}${asQ(rel, ids)}`);
          assert.equal(hl.status, 200);
          assert.deepEqual(near(normLs((await hl.json()).users[0], rel === 'self'), exp), expectedLastseen(exp), `${tag} HTTP lastseen for ${rel}`);
        }

        // Live 1: a status change.
        const prev = Object.fromEntries(rels.map((rel) => [rel, expectedView(U, settings, rel, world)]));
        let marks = Object.fromEntries(rels.map((rel) => [rel, [ws[rel].seen.length, sses[rel].events.length]]));
        u.send({ type: 'status', status: 'dnd', ref: 's2' });
        await u.next((m) => m.type === 'ack' && m.ref === 's2');
        world.truth = { status: 'dnd', devices: { desktop: 'dnd' }, custom: { text: 'focus' } };
        await checkLive('status dnd');

        // Live 2: the owner goes offline (its last session leaves).
        await avoidMinuteEdge();
        const l1a = Date.now();
        u.send({ type: 'leave' });
        await u.closed;
        world.online = false;
        const wsRels = rels.filter((r) => r !== 'self');
        await waitUntil(async () => (await adminOk(srv, 'GET', `/v1/admin/presence?user=${U}`)).users[0].status === 'offline', 'offline');
        const L1 = await exactLastSeen(srv, U);
        assert.ok(L1 >= l1a - 5 && L1 <= Date.now(), 'L1 within the leave window');
        world.realLs = L1;
        if (!settings.invisible) world.publicLs = L1; // invisible: frozen at L0
        await checkLive('offline', wsRels);
        // HTTP after going offline.
        for (const rel of rels) {
          const exp = expectedView(U, settings, rel, world);
          const hpj = await (await fetch(`${srv.url}/v1/presence?user=${U}${asQ(rel, ids)}`)).json();
          assert.deepEqual(near(norm(hpj.users[0], rel === 'self'), exp), exp, `${tag} HTTP presence offline for ${rel}`);
          const hlj = await (await fetch(`${srv.url}/v1/lastseen?user=${U}${asQ(rel, ids)}`)).json();
          assert.deepEqual(near(normLs(hlj.users[0], rel === 'self'), exp), expectedLastseen(exp), `${tag} HTTP lastseen offline for ${rel}`);
        }

        async function checkLive(what, only = rels) {
          const exp = Object.fromEntries(only.map((rel) => [rel, expectedView(U, settings, rel, world)]));
          // Wait for every viewer that must get something, then a quiet period.
          for (const rel of only) {
            if (JSON.stringify(exp[rel]) === JSON.stringify(prev[rel])) continue;
            await ws[rel].next((m) => m.type === 'presence' && m.presence.user === U && ws[rel].seen.indexOf(m) >= marks[rel][0], 3000 * MULT)
              .catch((e) => { throw new Error(`${tag} ${what}: WS ${rel} expected ${JSON.stringify(exp[rel])}: ${e.message}`); });
            await sses[rel].until((e) => e.length > marks[rel][1]);
          }
          await sleep(SETTLE);
          for (const rel of only) {
            const got = presOf(ws[rel].seen.slice(marks[rel][0]), U).map((p) => near(norm(p, rel === 'self'), exp[rel]));
            const gotSse = sses[rel].events.slice(marks[rel][1]).map((e) => near(norm(e.data.presence, rel === 'self'), exp[rel]));
            const want = JSON.stringify(exp[rel]) === JSON.stringify(prev[rel]) ? [] : [exp[rel]];
            assert.deepEqual(got, want, `${tag} ${what}: WS updates for ${rel}`);
            assert.deepEqual(gotSse, want, `${tag} ${what}: SSE updates for ${rel}`);
            prev[rel] = exp[rel];
          }
          marks = Object.fromEntries(rels.map((rel) => [rel, [ws[rel].seen.length, sses[rel].events.length]]));
        }
      } catch (e) {
        failures.push(`[${tag} ${JSON.stringify(settings)}] ${e.message}`);
      } finally {
        for (const s of streams) s.close();
        for (const c of clients) if (c.ws.readyState === 1) await c.close();
      }
    }));
    assert.deepEqual(failures, [], failures.join('\n\n'));
  });

  // One owner online through all 18 settings in turn, alternating the admin
  // API and the protocol message (from either of its two sessions): every
  // change reaches current watchers at once (lose -> offline, gain -> the
  // current state, unchanged -> nothing) and every session of the owner gets
  // privacy_changed.
  test('walk through all settings: changes apply at once to watchers; privacy_changed on every session', async () => {
    const ids = { self: uid('walk-u'), contact: uid('walk-c'), stranger: uid('walk-s'), blocked: uid('walk-b') };
    const U = ids.self;
    await setContacts(srv, U, [ids.contact]);
    await block(srv, U, ids.blocked);
    const s1 = await Client.open(srv, { user: U, device: 'desktop' });
    const s2 = await Client.open(srv, { user: U, device: 'mobile' });
    for (const s of [s1, s2]) {
      assert.deepEqual((await s.next((m) => m.type === 'privacy_changed')).privacy,
        { online: 'everyone', lastSeen: 'everyone', invisible: false }, 'defaults');
    }
    s1.send({ type: 'status', status: 'busy', ref: 'b' });
    await s1.next((m) => m.type === 'ack' && m.ref === 'b');
    await waitUntil(async () => (await adminOk(srv, 'GET', `/v1/admin/presence?user=${U}`)).users[0].devices.desktop === 'busy', 'busy');
    const truth = { status: 'online', devices: { desktop: 'busy', mobile: 'online' } };
    const rels = ['contact', 'stranger', 'blocked', 'anon'];
    const ws = {};
    const sses = {};
    for (const rel of rels) {
      ws[rel] = await viewerOpen(rel, U, ids);
      await watch(ws[rel], [U]);
      sses[rel] = await sse(`${srv.url}/v1/presence/events?user=${U}${asQ(rel, ids)}`);
    }
    await watch(s1, [U]);
    // No last seen ever (the owner never went offline), so only invisibility
    // can make one appear: "frozen at the moment U became invisible".
    let settings = { online: 'everyone', lastSeen: 'everyone', invisible: false };
    const prev = {};
    for (const rel of rels) {
      prev[rel] = expectedView(U, settings, rel, { online: true, truth, publicLs: null });
      assert.deepEqual(norm(await ws[rel].presenceOf(U), false), prev[rel], `initial WS ${rel}`);
      const [ev] = await sses[rel].until((e) => e.length >= 1);
      assert.deepEqual(norm(ev.data.presence, false), prev[rel], `initial SSE ${rel}`);
    }
    assert.deepEqual(norm(await s1.presenceOf(U), true), { user: U, ...truth });

    // A fixed pseudo-random order of the 18 combinations.
    const combos = [];
    for (const invisible of [false, true]) for (const online of MODES) for (const lastSeen of MODES) combos.push({ online, lastSeen, invisible });
    let seed = 7;
    const rnd = () => { seed = (seed * 48271) % 2147483647; return seed / 2147483647; };
    for (let i = combos.length - 1; i > 0; i--) { const j = Math.floor(rnd() * (i + 1)); [combos[i], combos[j]] = [combos[j], combos[i]]; }
    combos.push({ online: 'everyone', lastSeen: 'everyone', invisible: false });
    let step = 0;
    const failures = [];
    // The public last seen: the last moment the owner appeared to go offline,
    // i.e. became invisible while online (it never really went offline here).
    let publicLs = null;
    for (const next of combos) {
      if (JSON.stringify(next) === JSON.stringify(settings)) continue;
      step++;
      const delta = {};
      for (const k of ['online', 'lastSeen', 'invisible']) if (next[k] !== settings[k]) delta[k] = next[k];
      const marks = Object.fromEntries(rels.map((rel) => [rel, [ws[rel].seen.length, sses[rel].events.length]]));
      const selfMark = [s1.seen.length, s2.seen.length];
      await avoidMinuteEdge();
      const t0 = Date.now();
      if (step % 2) {
        const r = await setPrivacy(srv, U, delta);
        assert.deepEqual(r, { user: U, privacy: next }, `admin answer, step ${step}`);
      } else {
        const s = step % 4 === 0 ? s1 : s2;
        s.send({ type: 'privacy', ...delta, ref: `p${step}` });
        const a = await s.next((m) => (m.type === 'ack' || m.type === 'error') && m.ref === `p${step}`);
        assert.equal(a.type, 'ack', JSON.stringify(a));
      }
      if (next.invisible && !settings.invisible) {
        assert.equal(floorMin(t0), floorMin(Date.now()), 'the change happened within one minute');
        publicLs = t0;
      }
      settings = next;
      const world = { online: true, truth, publicLs };
      const what = `step ${step} ${JSON.stringify(delta)} -> ${JSON.stringify(settings)}`;
      for (const s of [s1, s2]) {
        const pc = await s.next((m) => m.type === 'privacy_changed');
        assert.deepEqual(pc.privacy, settings, `privacy_changed on every session: ${what}`);
      }
      const exp = Object.fromEntries(rels.map((rel) => [rel, expectedView(U, settings, rel, world)]));
      for (const rel of rels) {
        if (JSON.stringify(exp[rel]) === JSON.stringify(prev[rel])) continue;
        // Missing messages are reported below, with everything else.
        await ws[rel].next((m) => m.type === 'presence' && m.presence.user === U && ws[rel].seen.indexOf(m) >= marks[rel][0], 2000 * MULT).catch(() => {});
        await sses[rel].until((e) => e.length > marks[rel][1], 1000).catch(() => {});
      }
      await sleep(SETTLE);
      for (const rel of rels) {
        const want = JSON.stringify(exp[rel]) === JSON.stringify(prev[rel]) ? [] : [exp[rel]];
        const got = presOf(ws[rel].seen.slice(marks[rel][0]), U).map((p) => norm(p, false));
        const gotSse = sses[rel].events.slice(marks[rel][1]).map((e) => norm(e.data.presence, false));
        if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`${what}: WS ${rel}: want ${JSON.stringify(want)} got ${JSON.stringify(got)} (before: ${JSON.stringify(prev[rel])})`);
        if (JSON.stringify(gotSse) !== JSON.stringify(want)) failures.push(`${what}: SSE ${rel}: want ${JSON.stringify(want)} got ${JSON.stringify(gotSse)}`);
        // What the viewer now sees (the model, unless the server sent otherwise).
        prev[rel] = got.length ? got.at(-1) : (want.length ? prev[rel] : exp[rel]);
      }
      assert.deepEqual(presOf(s1.seen.slice(selfMark[0]), U), [], `${what}: the self view does not change`);
      assert.equal(s1.seen.slice(selfMark[0]).filter((m) => m.type === 'privacy_changed').length, 1);
      assert.equal(s2.seen.slice(selfMark[1]).filter((m) => m.type === 'privacy_changed').length, 1);
      const g = await adminOk(srv, 'GET', `/v1/admin/users/${U}/privacy`);
      assert.deepEqual(g, { user: U, privacy: settings }, what);
    }
    for (const rel of rels) { sses[rel].close(); await ws[rel].close(); }
    await s1.close();
    await s2.close();
    assert.deepEqual(failures, [], failures.join('\n'));
  });

  test('privacy message: validation, sessions only, ack, a new session gets the current settings', async () => {
    const U = uid('pm');
    const a = await Client.open(srv, { user: U });
    await a.next((m) => m.type === 'privacy_changed');
    for (const bad of [{ online: 'friends' }, { lastSeen: 'all' }, { invisible: 'yes' }, { online: 1 },
      { lastSeen: null }, { invisible: 1 }, { online: 'Everyone' }]) {
      a.send({ type: 'privacy', ...bad, ref: 'bad' });
      const e = await a.next((m) => (m.type === 'error' || m.type === 'ack') && m.ref === 'bad');
      assert.equal(e.type, 'error', JSON.stringify(bad));
      assert.equal(e.code, 'bad_request', JSON.stringify(bad));
    }
    await sleep(SETTLE);
    assert.equal(a.msgs.filter((m) => m.type === 'privacy_changed').length, 0, 'a refused change announces nothing');
    assert.deepEqual(await adminOk(srv, 'GET', `/v1/admin/users/${U}/privacy`),
      { user: U, privacy: { online: 'everyone', lastSeen: 'everyone', invisible: false } });
    // A mix of good and bad fields changes nothing.
    a.send({ type: 'privacy', online: 'nobody', lastSeen: 'bogus', ref: 'mix' });
    assert.equal((await a.next((m) => m.ref === 'mix')).type, 'error');
    assert.equal((await adminOk(srv, 'GET', `/v1/admin/users/${U}/privacy`)).privacy.online, 'everyone');
    // An anonymous connection has no settings to change.
    const anon = await Client.open(srv);
    anon.send({ type: 'privacy', invisible: true, ref: 'x' });
    const e = await anon.next((m) => m.ref === 'x');
    assert.equal(e.type, 'error');
    assert.equal(e.code, 'no_session');
    await anon.close();
    a.send({ type: 'privacy', lastSeen: 'contacts', ref: 'ok' });
    await a.next((m) => m.type === 'ack' && m.ref === 'ok');
    assert.deepEqual((await a.next((m) => m.type === 'privacy_changed')).privacy,
      { online: 'everyone', lastSeen: 'contacts', invisible: false });
    const b = await Client.open(srv, { user: U, device: 'mobile' });
    const i = b.seen.findIndex((m) => m.type === 'privacy_changed');
    assert.equal(i, 1, `privacy_changed right after the welcome: ${JSON.stringify(b.seen.slice(0, 3))}`);
    assert.deepEqual((await b.next((m) => m.type === 'privacy_changed')).privacy, { online: 'everyone', lastSeen: 'contacts', invisible: false });
    // An admin change reaches both sessions.
    await setPrivacy(srv, U, { invisible: true });
    for (const s of [a, b]) {
      assert.deepEqual((await s.next((m) => m.type === 'privacy_changed')).privacy,
        { online: 'everyone', lastSeen: 'contacts', invisible: true });
    }
    await a.close();
    await b.close();
  });

  // Privacy-setting races (reliability.md): the change applies before its
  // ack, and activity sent right behind it never leaks.
  test('race: invisible then activity in one burst leaks nothing; reads are offline as soon as the ack arrives', async () => {
    const X = uid('race-x');
    const room = uid('race-room');
    const x = await Client.open(srv, { user: X, device: 'desktop' });
    x.send({ type: 'join', room, meta: { name: 'X' }, ref: 'j' });
    await x.next((m) => m.type === 'room_joined');
    const w = await Client.open(srv, { user: uid('race-w') });
    w.send({ type: 'join', room, ref: 'jw' });
    await w.next((m) => m.type === 'room_joined');
    await waitUntil(async () => (await (await fetch(`${srv.url}/v1/presence?user=${X}`)).json()).users[0].status === 'online', 'X online');
    await watch(w, [X]);
    assert.equal((await w.presenceOf(X)).status, 'online');
    // A second room where w is already a member and X is not.
    const room2 = uid('race-room2');
    w.send({ type: 'join', room: room2, ref: 'jw2' });
    await w.next((m) => m.type === 'room_joined' && m.ref === 'jw2');
    const mark = w.seen.length;
    await avoidMinuteEdge();
    const t0 = Date.now();
    // Invisible while online = offline now, last seen now (rounded for others).
    const off = { user: X, status: 'offline', devices: {}, lastSeen: { at: floorMin(t0) } };
    // One TCP burst: privacy first, then activity of every kind.
    x.ws.send(JSON.stringify({ type: 'privacy', invisible: true, ref: 'inv' }));
    x.ws.send(JSON.stringify({ type: 'status', status: 'dnd' }));
    x.ws.send(JSON.stringify({ type: 'custom', text: 'leak' }));
    x.ws.send(JSON.stringify({ type: 'ephemeral', room, kind: 'typing', data: 'leak' }));
    x.ws.send(JSON.stringify({ type: 'patch', room, meta: { name: 'leak' } }));
    x.ws.send(JSON.stringify({ type: 'join', room: room2, meta: { name: 'leak' }, ref: 'j2' }));
    await x.next((m) => m.type === 'ack' && m.ref === 'inv');
    await x.next((m) => m.ref === 'j2' && (m.type === 'room_joined' || m.type === 'error'));
    // Right at the ack: every read already hides X.
    assert.deepEqual(norm((await (await fetch(`${srv.url}/v1/presence?user=${X}`)).json()).users[0], false), off,
      'the ack comes after the change applies');
    // Rooms publish in batches (room-batch-ms): the leave may lag the ack by one window.
    await waitUntil(async () => !(await (await fetch(`${srv.url}/v1/rooms/${room}`)).json()).members.some((m) => m.user === X),
      'hidden from the room within a batch window', 1000);
    await sleep(SETTLE);
    const got = w.seen.slice(mark);
    assert.ok(!JSON.stringify(got).includes('leak'), `leaked: ${JSON.stringify(got)}`);
    assert.deepEqual(presOf(got, X).map((p) => norm(p, false)), [off], 'exactly one update: offline');
    const deltas = got.filter((m) => m.type === 'room_delta');
    assert.deepEqual(deltas.map((d) => [d.joins, d.leaves, d.patches]), [[[], [X], []]], 'exactly one room change: the leave');
    assert.equal(got.filter((m) => m.type === 'ephemeral').length, 0);
    await x.close();
    await w.close();
  });

  test('race: activity after the invisible ack leaks nothing (WS, rooms, HTTP, SSE)', async () => {
    const X = uid('race2-x');
    const room = uid('race2-room');
    const x = await Client.open(srv, { user: X, device: 'desktop' });
    x.send({ type: 'join', room, meta: { name: 'X' }, ref: 'j' });
    await x.next((m) => m.type === 'room_joined');
    const w = await Client.open(srv, { user: uid('race2-w') });
    w.send({ type: 'join', room, ref: 'jw' });
    await w.next((m) => m.type === 'room_joined');
    await waitUntil(async () => (await (await fetch(`${srv.url}/v1/presence?user=${X}`)).json()).users[0].status === 'online', 'X online');
    await watch(w, [X]);
    const s = await sse(`${srv.url}/v1/presence/events?user=${X}`);
    await s.until((e) => e.length >= 1);
    const rs = await sse(`${srv.url}/v1/rooms/${room}/events`);
    await rs.until((e) => e.some((v) => v.data.type === 'room_joined'));
    await avoidMinuteEdge();
    const t0 = Date.now();
    const off = { user: X, status: 'offline', devices: {}, lastSeen: { at: floorMin(t0) } };
    const mark = w.seen.length;
    x.send({ type: 'privacy', invisible: true, ref: 'inv' });
    await x.next((m) => m.type === 'ack' && m.ref === 'inv');
    for (let i = 0; i < 3; i++) {
      x.send({ type: 'status', status: i % 2 ? 'busy' : 'dnd' });
      x.send({ type: 'custom', text: `leak${i}` });
      x.send({ type: 'activity', active: i % 2 === 0 });
      x.send({ type: 'ephemeral', room, kind: 'cursor', data: { leak: i } });
      x.send({ type: 'patch', room, meta: { name: `leak${i}` } });
      x.send({ type: 'heartbeat' });
    }
    const x2 = await Client.open(srv, { user: X, device: 'mobile' }); // a second device
    x2.send({ type: 'join', room, ref: 'j2' });
    await x2.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === 'j2');
    x2.send({ type: 'ephemeral', room, kind: 'typing', data: 'leak' });
    x.send({ type: 'ping', ref: 'sync' });
    await x.next((m) => m.type === 'pong' && m.ref === 'sync');
    await sleep(SETTLE);
    const got = w.seen.slice(mark);
    assert.ok(!JSON.stringify(got).includes('leak'), `leaked to a watcher: ${JSON.stringify(got)}`);
    assert.ok(!JSON.stringify(s.events).includes('leak') && !JSON.stringify(rs.events).includes('leak'), 'leaked to a stream');
    assert.deepEqual(presOf(got, X).map((p) => norm(p, false)), [off]);
    assert.deepEqual(s.events.slice(1).map((e) => norm(e.data.presence, false)), [off]);
    assert.deepEqual(norm((await (await fetch(`${srv.url}/v1/presence?user=${X}`)).json()).users[0], false), off);
    assert.deepEqual(got.filter((m) => m.type === 'room_delta').map((d) => [d.joins, d.leaves, d.patches]), [[[], [X], []]]);
    s.close();
    rs.close();
    await x2.close();
    await x.close();
    await w.close();
  });

  test('rooms: invisible or not-everyone members are hidden from snapshots, deltas, counts, cursors; visible again = a join', async () => {
    const room = uid('room');
    const A = uid('ra');
    const X = uid('rx');
    const D = uid('rd');
    const a = await Client.open(srv, { user: A });
    const x = await Client.open(srv, { user: X });
    const join = async (c, meta, ref) => {
      c.send({ type: 'join', room, meta, ref });
      const j = await c.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === ref);
      assert.equal(j.type, 'room_joined', JSON.stringify(j));
      return j;
    };
    await join(a, { name: 'A' }, 'ja');
    const rs = await sse(`${srv.url}/v1/rooms/${room}/events`);
    await rs.until((e) => e.some((v) => v.data.type === 'room_joined'));
    await join(x, { name: 'X' }, 'jx');
    let d = await a.next((m) => m.type === 'room_delta' && m.joins.length === 1);
    assert.equal(d.joins[0].user, X);
    assert.equal(d.count, 2);
    const deltas = (c) => c.msgs.filter((m) => m.type === 'room_delta' || m.type === 'ephemeral');
    const httpRoom = async () => (await fetch(`${srv.url}/v1/rooms/${room}`)).json();

    // Invisible: a leave, as if X left.
    x.send({ type: 'privacy', invisible: true, ref: 'inv' });
    await x.next((m) => m.type === 'ack' && m.ref === 'inv');
    d = await a.next((m) => m.type === 'room_delta');
    assert.deepEqual([d.joins, d.leaves, d.patches, d.count], [[], [X], [], 1]);
    await rs.until((e) => e.some((v) => v.data.type === 'room_delta' && v.data.leaves.includes(X)));
    let h = await httpRoom();
    assert.equal(h.count, 1);
    assert.deepEqual(h.members.map((m) => m.user), [A]);
    // Cursors, typing and patches of the hidden member go nowhere.
    x.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: 1, y: 2 } });
    x.send({ type: 'ephemeral', room, kind: 'typing', data: true });
    x.send({ type: 'patch', room, meta: { name: 'X2' }, ref: 'px' });
    await x.next((m) => m.ref === 'px');
    // A new member's snapshot does not list X.
    const dd = await Client.open(srv, { user: D });
    await join(dd, { name: 'D' }, 'jd');
    const snapD = dd.seen.find((m) => m.type === 'room_snapshot' && m.room === room);
    assert.ok(snapD, 'snapshot for the new member');
    assert.deepEqual(snapD.members.map((m) => m.user), [A, D]);
    assert.equal(snapD.count, 2);
    d = await a.next((m) => m.type === 'room_delta');
    assert.deepEqual([d.joins.map((j) => j.user), d.leaves, d.count], [[D], [], 2]);
    // Visible again but online=contacts (A is a contact): still hidden, rooms are for everyone.
    await setContacts(srv, X, [A, D]);
    await setPrivacy(srv, X, { invisible: false, online: 'contacts' });
    await sleep(SETTLE);
    assert.deepEqual(deltas(a), [], 'contacts-only visibility keeps X out of the room');
    assert.deepEqual(deltas(dd), []);
    h = await httpRoom();
    assert.equal(h.count, 2);
    assert.ok(!h.members.some((m) => m.user === X));
    // online=nobody: still hidden.
    x.send({ type: 'privacy', online: 'nobody', ref: 'nb' });
    await x.next((m) => m.type === 'ack' && m.ref === 'nb');
    await sleep(SETTLE);
    assert.deepEqual(deltas(a), []);
    // Everyone: a join with the current metadata.
    await setPrivacy(srv, X, { online: 'everyone' });
    d = await a.next((m) => m.type === 'room_delta');
    assert.deepEqual([d.joins.map((j) => j.user), d.leaves, d.patches, d.count], [[X], [], [], 3]);
    // Whether the patch sent while hidden was kept is not specified; either
    // way the member reappears whole.
    assert.ok([JSON.stringify({ name: 'X2' }), JSON.stringify({ name: 'X' })].includes(JSON.stringify(d.joins[0].meta)), JSON.stringify(d.joins[0]));
    await rs.until((e) => e.some((v) => v.data.type === 'room_delta' && v.data.joins.some((j) => j.user === X)));
    // Now its cursor arrives.
    x.send({ type: 'ephemeral', room, kind: 'cursor', data: { x: 5, y: 6 } });
    const eph = await a.next((m) => m.type === 'ephemeral');
    assert.deepEqual([eph.user, eph.data], [X, { x: 5, y: 6 }]);
    await rs.until((e) => e.some((v) => v.data.type === 'ephemeral' && v.data.user === X));
    // The room stream never carried X between its leave and its join.
    const evs = rs.events.map((e) => e.data);
    const iLeave = evs.findIndex((v) => v.type === 'room_delta' && v.leaves.includes(X));
    const iJoin = evs.findIndex((v, i) => i > iLeave && v.type === 'room_delta' && v.joins.some((j) => j.user === X));
    for (const v of evs.slice(iLeave + 1, iJoin)) assert.ok(!JSON.stringify(v).includes(X), `room stream leaked X: ${JSON.stringify(v)}`);
    assert.equal(evs.filter((v) => v.type === 'ephemeral' && v.user === X).length, 1, 'only the visible cursor');
    // The counts a subscriber sees: 1, 2 (D), 3 (X back).
    assert.deepEqual(a.seen.filter((m) => m.type === 'room_delta').map((m) => m.count), [2, 1, 2, 3]);
    // A room whose only member is hidden reads exactly like a room that does not exist.
    await setPrivacy(srv, X, { invisible: true });
    const solo = uid('solo');
    x.send({ type: 'join', room: solo, meta: { name: 'X' }, ref: 'js' });
    await x.next((m) => (m.type === 'room_joined' || m.type === 'error') && m.ref === 'js');
    const soloRead = await (await fetch(`${srv.url}/v1/rooms/${solo}`)).json();
    assert.deepEqual(soloRead, { room: solo, epoch: 0, seq: 0, mode: 'normal', count: 0, digest: '0000000000000000', members: [] },
      'the epoch of a room with only hidden members reveals them');
    rs.close();
    await a.close();
    await x.close();
    await dd.close();
  });

  test('enumeration: unknown, offline with hidden last seen, invisible, blocked and hidden-online users answer byte-identically', async () => {
    const V = uid('enum-viewer');
    // Same-length ids so that whole bodies compare after replacing the id.
    const base = `e${process.pid}${String(++n).padStart(4, '0')}`;
    const T = { unknown: `${base}-unk`, offline: `${base}-off`, invisible: `${base}-inv`, blocked: `${base}-blk`, hidden: `${base}-hid` };
    // offline, last seen hidden
    const off = await Client.open(srv, { user: T.offline });
    await setPrivacy(srv, T.offline, { lastSeen: 'nobody' });
    off.send({ type: 'leave' });
    await off.closed;
    await waitUntil(async () => (await adminOk(srv, 'GET', `/v1/admin/lastseen?user=${T.offline}`)).users[0].lastSeen, 'offline last seen');
    const live = [];
    // invisible, active
    await setPrivacy(srv, T.invisible, { invisible: true });
    live.push(await Client.open(srv, { user: T.invisible }));
    // blocks the viewer, active
    await block(srv, T.blocked, V);
    live.push(await Client.open(srv, { user: T.blocked }));
    // online and last seen both nobody, active, with an earlier session
    await setPrivacy(srv, T.hidden, { online: 'nobody', lastSeen: 'nobody' });
    const h0 = await Client.open(srv, { user: T.hidden });
    h0.send({ type: 'leave' });
    await h0.closed;
    live.push(await Client.open(srv, { user: T.hidden }));
    for (const c of live) {
      c.send({ type: 'status', status: 'dnd', ref: 'd' });
      await c.next((m) => m.ref === 'd');
      c.send({ type: 'custom', text: 'secret', ref: 'c' });
      await c.next((m) => m.ref === 'c');
    }
    await waitUntil(async () => (await adminOk(srv, 'GET', `/v1/admin/presence?${live.map((c) => `user=${c.welcome.user}`).join('&')}`))
      .users.every((p) => p.status === 'dnd'), 'activity recorded');

    const norm1 = (s, id) => s.split(id).join('<ID>');
    for (const viewer of [V, null]) {
      const as = viewer ? `&as=${viewer}` : '';
      for (const ep of ['presence', 'lastseen']) {
        const answers = {};
        for (const [k, id] of Object.entries(T)) {
          const r = await fetch(`${srv.url}/v1/${ep}?user=${id}${as}`);
          answers[k] = `${r.status} ${r.headers.get('content-type')} ${r.headers.get('content-length')} ${norm1(await r.text(), id)}`;
        }
        if (!viewer) answers.blocked = answers.unknown; // blocking is about V only
        for (const k of Object.keys(T)) assert.equal(answers[k], answers.unknown, `HTTP ${ep} as ${viewer}: ${k} vs unknown`);
        if (ep === 'presence') assert.equal(answers.unknown.split(' ').slice(3).join(' ').trimEnd(), '{"users":[{"user":"<ID>","status":"offline","devices":{}}]}');
      }
      // WebSocket: the raw text of the snapshot.
      const c = viewer ? await Client.open(srv, { user: viewer }) : await Client.open(srv);
      const raw = [];
      c.ws.on('message', (d) => raw.push(d.toString()));
      const texts = {};
      for (const [k, id] of Object.entries(T)) {
        if (!viewer && k === 'blocked') continue;
        await watch(c, [id], `w-${k}`);
        await c.presenceOf(id);
        texts[k] = norm1(raw.find((t) => t.includes('"presence"') && t.includes(`"${id}"`)), id);
      }
      for (const k of Object.keys(texts)) assert.equal(texts[k], texts.unknown, `WS snapshot as ${viewer}: ${k}`);
      assert.equal(texts.unknown, '{"type":"presence","presence":{"user":"<ID>","status":"offline","devices":{}}}');
      // SSE: the raw event block.
      const blocks = {};
      for (const [k, id] of Object.entries(T)) {
        if (!viewer && k === 'blocked') continue;
        const s = await sse(`${srv.url}/v1/presence/events?user=${id}${as}`);
        await s.until((e) => e.length >= 1);
        blocks[k] = norm1(s.blocks[0], id);
        s.close();
      }
      for (const k of Object.keys(blocks)) assert.equal(blocks[k], blocks.unknown, `SSE as ${viewer}: ${k}`);
      // Live activity of the hidden users reaches nobody.
      const mark = c.seen.length;
      for (const cl of live) { cl.send({ type: 'status', status: 'away', ref: 'aw' }); await cl.next((m) => m.ref === 'aw'); }
      await sleep(SETTLE);
      assert.deepEqual(c.seen.slice(mark).filter((m) => m.type === 'presence'), [], 'no updates about hidden users');
      for (const cl of live) { cl.send({ type: 'status', status: 'dnd', ref: 'dd' }); await cl.next((m) => m.ref === 'dd'); }
      await c.close();
    }
    for (const c of live) await c.close();
  });
});

describe('query rate limit', () => {
  let srv;
  before(async () => { srv = await startServer([...FLAGS, '--query-rate', '5', '--query-burst', '10']); });
  after(async () => { await stopClean(srv, assert); });

  test('WS: a watch beyond the burst is refused with rate_limited and not applied; others unaffected', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => uid(`rl${i}`));
    const c = await Client.open(srv, { user: uid('rl-viewer') });
    const t0 = Date.now();
    await watch(c, ids.slice(0, 10), 'w1'); // the whole burst
    c.send({ type: 'watch', users: ids.slice(10, 12), ref: 'w2' });
    const e = await c.next((m) => (m.type === 'error' || m.type === 'ack') && m.ref === 'w2');
    if (Date.now() - t0 < 300) { // fewer than 2 tokens can have come back
      assert.equal(e.type, 'error', JSON.stringify(e));
      assert.equal(e.code, 'rate_limited');
      assert.equal(typeof e.message, 'string');
      // Not applied: the two users' activity is not reported to c.
      const t = await Client.open(srv, { user: ids[10] });
      await sleep(SETTLE);
      assert.deepEqual(presOf(c.seen, ids[10]), [], 'a refused watch is not applied');
      await t.close();
    } else {
      // The machine was too slow to observe the burst; still, the limit holds overall.
      assert.ok(['ack', 'error'].includes(e.type));
    }
    // Many single-id watches in a burst: some must be refused, the accepted
    // ones fit the bucket (burst + rate x elapsed).
    const d = await Client.open(srv, { user: uid('rl-viewer2') });
    const t1 = Date.now();
    for (let i = 0; i < 30; i++) d.send({ type: 'watch', users: [uid('rlx')], ref: `m${i}` });
    const answers = [];
    for (let i = 0; i < 30; i++) answers.push(await d.next((m) => (m.type === 'error' || m.type === 'ack') && m.ref === `m${i}`));
    const elapsed = (Date.now() - t1) / 1000;
    const acks = answers.filter((m) => m.type === 'ack').length;
    assert.ok(acks >= 10, `the burst is allowed: ${acks}`);
    assert.ok(acks <= 10 + Math.ceil(5 * elapsed) + 1, `${acks} accepted in ${elapsed} s`);
    assert.ok(answers.filter((m) => m.type === 'error').every((m) => m.code === 'rate_limited'));
    // Another connection is unaffected, and the connection stays open.
    const other = await Client.open(srv);
    await watch(other, ids.slice(0, 10), 'ok');
    assert.equal(d.ws.readyState, 1);
    // After a pause the bucket refills.
    await sleep(1000);
    await watch(d, [uid('later')], 'later');
    await c.close();
    await d.close();
    await other.close();
  });

  test('HTTP: reads beyond the burst get 429 rate_limited; another connection is unaffected', async () => {
    const { connect, parseResponses } = await import('./lib/raw.mjs');
    const conn = await connect(srv.port);
    const q = Array.from({ length: 10 }, (_, i) => `user=h${i}`).join('&');
    const t0 = Date.now();
    // Three reads of 10 ids on one keep-alive connection.
    await conn.write(`GET /v1/presence?${q} HTTP/1.1\r\nHost: x\r\n\r\n` +
      `GET /v1/presence?${q} HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/lastseen?${q} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const res = parseResponses(await conn.until((d) => parseResponses(d).length === 3));
    const elapsed = (Date.now() - t0) / 1000;
    assert.equal(res[0].status, 200);
    if (elapsed < 1.5) assert.ok(res.slice(1).some((r) => r.status === 429), res.map((r) => r.status).join());
    if (res.length === 3 && elapsed < 1.5) assert.ok(res[1].status === 429 || res[2].status === 429);
    for (const r of res.filter((x) => x.status === 429)) {
      const j = JSON.parse(r.body);
      assert.equal(errCode(j), 'rate_limited', r.body);
    }
    conn.close();
    const fresh = await connect(srv.port);
    await fresh.write(`GET /v1/presence?${q} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const [ok] = parseResponses(await fresh.until((d) => parseResponses(d).length === 1));
    assert.equal(ok.status, 200, 'a fresh connection has its own bucket');
    fresh.close();
    // More ids in one request than the burst: refused whole, on a fresh connection.
    const q11 = Array.from({ length: 11 }, (_, i) => `user=k${i}`).join('&');
    for (const ep of ['presence', 'lastseen', 'presence/events']) {
      const c = await connect(srv.port);
      await c.write(`GET /v1/${ep}?${q11} HTTP/1.1\r\nHost: x\r\n\r\n`);
      const [r] = parseResponses(await c.until((d) => parseResponses(d).length === 1 || /\r\n\r\n/.test(d.toString()) && !/content-length/i.test(d.toString())));
      assert.ok(r, `${ep}: a response with a body`);
      assert.equal(r.status, 429, `${ep} with 11 ids: ${r.status} ${r.body}`);
      assert.equal(errCode(JSON.parse(r.body)), 'rate_limited');
      c.close();
    }
  });
});
