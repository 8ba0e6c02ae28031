// Spoofing: a client that names other users in every client message type
// ("user", "uid", "from", "sender", "sub", "session", "sessionId", ...)
// changes nothing for anyone but itself. Checked through the admin API's
// unfiltered view (presence with versions, privacy, room members) before and
// after, and through the transcripts of observers watching the victim and
// sharing its room. Under auth = none and auth = jwt (HS256 tokens minted here).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean, sleep, MULT, waitUntil } from './lib/server.mjs';
import { Client } from './lib/client.mjs';
import { adminOk } from './lib/admin.mjs';

const KEY = 'spoof-admin-key-0123456789abcdef';
const SECRET = 'spoof-secret-0123456789-abcdefghijklmnop';
const FLAGS = ['--workers', '2', '--admin-api-key', KEY, '--presence-debounce-ms', '20',
  '--room-batch-ms', '20', '--reconnect-grace-ms', '300', '--heartbeat-interval-ms', '1000',
  '--heartbeat-min-ms', '100', '--session-ttl-ms', '30000', '--idle-ms', '600000'];
const SETTLE = 300 * MULT;

let n = 0;
const uid = (p) => `${p}-${process.pid}-${++n}`;
const b64u = (x) => Buffer.from(x).toString('base64url');
function token(claims) {
  const now = Math.floor(Date.now() / 1000);
  const h = b64u(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const p = b64u(JSON.stringify({ exp: now + 600, iat: now, ...claims }));
  return `${h}.${p}.${crypto.createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const admin = (srv, method, p, body) => adminOk(srv, KEY, method, p, body);

for (const auth of ['none', 'jwt']) {
  describe(`spoofing, auth=${auth}`, () => {
    let srv;
    before(async () => {
      const args = [...FLAGS];
      if (auth === 'jwt') args.push('--auth', 'jwt', '--jwt-leeway-s', '0');
      srv = await startServer(args, { env: { PRESENCED_JWT_HS256_SECRET: SECRET } });
    });
    after(async () => { await stopClean(srv, assert); });

    // A connection as `user`; with jwt the token carries the identity and
    // ?user= names someone else on purpose.
    async function open(user, { device, resume, anon } = {}) {
      if (auth === 'none') return Client.open(srv, anon ? {} : { user, device, resume });
      const q = new URLSearchParams();
      if (!anon) q.set('token', token({ sub: user, ...(device ? { device } : {}) }));
      q.set('user', 'victim-by-query');
      if (resume) q.set('resume', resume);
      if (anon) {
        // Under jwt even an observer needs a token; give it a throwaway identity.
        q.set('token', token({ sub: uid('watcher') }));
      }
      const c = new Client(new WebSocket(`${srv.wsUrl}/v1/ws?${q}`));
      await once(c.ws, 'open');
      c.welcome = await c.next((m) => m.type === 'welcome' || m.type === 'error');
      return c;
    }
    const httpHeaders = (user) => (auth === 'jwt' ? { Authorization: `Bearer ${token({ sub: user })}` } : {});

    async function snapshot(victim, room) {
      const p = await admin(srv, 'GET', `/v1/admin/presence?user=${victim}`);
      const pv = await admin(srv, 'GET', `/v1/admin/users/${victim}/privacy`);
      const r = await admin(srv, 'GET', `/v1/admin/rooms/${room}`);
      const ls = await admin(srv, 'GET', `/v1/admin/lastseen?user=${victim}`);
      // The public room read has the metadata (the admin one has sessions and visibility).
      const pr = await (await fetch(`${srv.url}/v1/rooms/${room}`, { headers: httpHeaders(`reader-${process.pid}`) })).json();
      const meta = (pr.members || []).filter((m) => m.user === victim);
      return { presence: p.users[0], privacy: pv.privacy, members: r.members.filter((m) => m.user === victim), meta, lastseen: ls.users[0] };
    }

    test('every client message type naming the victim changes only the sender', async () => {
      const victim = uid('victim');
      const mallory = uid('mallory');
      const friend = uid('friend');
      const room = uid('room');
      const room2 = uid('room2');
      const v = await open(victim, { device: 'desktop' });
      assert.equal(v.welcome.user, victim);
      const vSid = v.welcome.sessionId;
      v.send({ type: 'status', status: 'busy', ref: 's' });
      await v.next((m) => m.ref === 's');
      v.send({ type: 'custom', text: 'real', ref: 'c' });
      await v.next((m) => m.ref === 'c');
      v.send({ type: 'join', room, meta: { name: 'Victim' }, ref: 'j' });
      await v.next((m) => m.type === 'room_joined');
      v.send({ type: 'watch', users: [friend], ref: 'vw' });
      await v.next((m) => m.type === 'ack' && m.ref === 'vw');
      await admin(srv, 'PUT', `/v1/admin/users/${victim}/privacy`, { lastSeen: 'contacts' });
      // Observers of the victim: a watcher and a room member.
      const obs = await open(null, { anon: true });
      obs.send({ type: 'watch', users: [victim], ref: 'ow' });
      await obs.next((m) => m.type === 'ack');
      await obs.presenceOf(victim);
      const member = await open(uid('member'));
      member.send({ type: 'join', room, ref: 'mj' });
      await member.next((m) => m.type === 'room_joined');
      await waitUntil(async () => (await snapshot(victim, room)).presence.status === 'busy', 'victim busy');
      const f = await open(friend);
      await waitUntil(async () => v.msgs.some((m) => m.type === 'presence' && m.presence.user === friend && m.presence.status === 'online'), 'victim sees friend');
      await sleep(SETTLE);
      const before = await snapshot(victim, room);
      const obsMark = obs.seen.length;
      const memberMark = member.seen.length;
      const vMark = v.seen.length;

      const m = await open(mallory, { device: 'mobile' });
      assert.equal(m.welcome.user, mallory);
      assert.notEqual(m.welcome.sessionId, vSid);
      const spoof = { user: victim, uid: victim, from: victim, sender: victim, sub: victim, userId: victim,
        session: vSid, sessionId: vSid, connectionId: v.welcome.connectionId, id: victim, as: victim };
      const msgs = [
        { type: 'heartbeat' },
        { type: 'status', status: 'dnd', expiresInMs: 60000 },
        { type: 'activity', active: false },
        { type: 'custom', text: 'pwned', emoji: ':skull:' },
        { type: 'watch', users: [victim, friend] },
        { type: 'unwatch', users: [friend] },
        { type: 'join', room, meta: { name: 'Victim (fake)' } },
        { type: 'patch', room, meta: { name: 'pwned' } },
        { type: 'ephemeral', room, kind: 'cursor', data: { x: 666 } },
        { type: 'room_leave', room },
        { type: 'join', room: room2, meta: { name: 'M' } },
        { type: 'ephemeral', room: room2, kind: 'typing', data: true },
        { type: 'privacy', invisible: true, online: 'nobody', lastSeen: 'nobody' },
        { type: 'auth', token: auth === 'jwt' ? token({ sub: victim }) : 'x' },
        { type: 'ping' },
      ];
      const answers = [];
      for (const [i, msg] of msgs.entries()) {
        m.send({ ...spoof, ...msg, ref: `m${i}` });
        // Most requests answer (ack or error); ephemeral and heartbeat may not.
        if (msg.type !== 'ephemeral' && msg.type !== 'heartbeat') {
          answers.push(await m.next((x) => x.ref === `m${i}`, 3000));
        }
      }
      if (auth === 'jwt') {
        const a = answers.find((x) => x.ref === `m${msgs.findIndex((x) => x.type === 'auth')}`);
        assert.equal(a.type, 'error');
        assert.equal(a.code, 'token_user_mismatch', 'a token for someone else is refused on a live socket');
      }
      // Mallory's own session is what changed.
      const mp = await waitUntil(async () => {
        const r = await admin(srv, 'GET', `/v1/admin/presence?user=${mallory}`);
        return r.users[0].status === 'dnd' ? r.users[0] : null;
      }, 'mallory dnd');
      assert.equal(mp.custom.text, 'pwned');
      assert.deepEqual((await admin(srv, 'GET', `/v1/admin/users/${mallory}/privacy`)).privacy,
        { online: 'nobody', lastSeen: 'nobody', invisible: true });
      const r2 = await admin(srv, 'GET', `/v1/admin/rooms/${room2}`);
      assert.deepEqual(r2.members.map((x) => x.user), [mallory]);
      // Mallory leaves (naming the victim): its own session ends, the victim's not.
      m.send({ ...spoof, type: 'leave' });
      assert.equal((await m.next((x) => x.type === 'session_ended')).reason, 'leave');
      await m.closed;
      await waitUntil(async () => (await admin(srv, 'GET', `/v1/admin/presence?user=${mallory}`)).users[0].status === 'offline', 'mallory offline');

      // HTTP: a heartbeat naming the victim's session ends nothing of the victim.
      const hb = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', headers: httpHeaders(mallory),
        body: JSON.stringify(auth === 'jwt' ? { sessionId: vSid, leave: true } : { user: mallory, sessionId: vSid, leave: true }) });
      assert.ok([200, 400, 403].includes(hb.status), `heartbeat: ${hb.status}`);
      // A resume of the victim's session id by another user starts a new session.
      const m2 = await open(mallory, { resume: vSid });
      assert.equal(m2.welcome.user, mallory);
      assert.equal(m2.welcome.resumed, false);
      assert.notEqual(m2.welcome.sessionId, vSid);
      m2.send({ type: 'leave' });
      await m2.closed;
      await sleep(SETTLE);

      const afterSnap = await snapshot(victim, room);
      assert.deepEqual(afterSnap, before, 'the victim\'s true state, version, privacy, room membership and last seen are unchanged');
      assert.equal(v.ws.readyState, 1, 'the victim is still connected');
      // The victim's own view: nothing about itself, and it still watches friend.
      const vPres = v.seen.slice(vMark).filter((x) => x.type === 'presence' && x.presence.user === victim);
      assert.deepEqual(vPres, []);
      assert.equal(v.seen.slice(vMark).filter((x) => x.type === 'privacy_changed').length, 0, 'no privacy_changed for the victim');
      assert.equal(v.seen.slice(vMark).filter((x) => x.type === 'session_ended').length, 0);
      const fm = f.seen.length;
      f.send({ type: 'status', status: 'away', ref: 'fa' });
      await f.next((x) => x.ref === 'fa');
      await waitUntil(async () => v.seen.slice(vMark).some((x) => x.type === 'presence' && x.presence.user === friend && x.presence.status === 'away'),
        'the victim still watches its friend (unwatch naming it did nothing)');
      assert.ok(fm >= 0);
      // The watcher of the victim saw nothing at all.
      assert.deepEqual(obs.seen.slice(obsMark).filter((x) => x.type === 'presence'), []);
      // The room member saw only mallory: its join/leave and its cursor, never the victim changing.
      const roomMsgs = member.seen.slice(memberMark).filter((x) => x.room === room);
      for (const x of roomMsgs) {
        if (x.type === 'room_delta') {
          assert.ok(!x.leaves.includes(victim), `victim never leaves: ${JSON.stringify(x)}`);
          assert.ok(!x.patches.some((p) => p.user === victim), `victim never patched: ${JSON.stringify(x)}`);
          assert.ok(!x.joins.some((p) => p.user === victim));
        }
        if (x.type === 'ephemeral') assert.equal(x.user, mallory, `ephemeral attributed to its sender: ${JSON.stringify(x)}`);
      }
      assert.equal(afterSnap.meta.length, 1, JSON.stringify(afterSnap));
      assert.deepEqual(afterSnap.meta[0].meta, { name: 'Victim' });
      await f.close();
      await obs.close();
      await member.close();
      await v.close();
    });

    test('HTTP heartbeat naming another user', async () => {
      const victim = uid('hvictim');
      const v = await open(victim);
      await waitUntil(async () => (await admin(srv, 'GET', `/v1/admin/presence?user=${victim}`)).users[0].status === 'online', 'online');
      const before = (await admin(srv, 'GET', `/v1/admin/presence?user=${victim}`)).users[0];
      if (auth === 'jwt') {
        // The token's sub is the identity; another user in the body is refused.
        const r = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', headers: httpHeaders(uid('mal')),
          body: JSON.stringify({ user: victim, sessionId: v.welcome.sessionId, leave: true }) });
        assert.equal(r.status, 403);
        // Other spoof fields are ignored: the session is the sender's own.
        const r2 = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', headers: httpHeaders(uid('mal')),
          body: JSON.stringify({ uid: victim, from: victim, sub: victim, device: 'other' }) });
        assert.equal(r2.status, 200);
        assert.notEqual((await r2.json()).sessionId, v.welcome.sessionId);
      } else {
        // auth=none: the body's user is the identity; a foreign session id does not attach to it.
        const r = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST',
          body: JSON.stringify({ user: uid('mal'), sessionId: v.welcome.sessionId, leave: true, uid: victim, from: victim }) });
        assert.equal(r.status, 200);
      }
      await sleep(SETTLE);
      assert.deepEqual((await admin(srv, 'GET', `/v1/admin/presence?user=${victim}`)).users[0], before);
      assert.equal(v.ws.readyState, 1);
      await v.close();
    });

    if (auth === 'jwt') {
      test('HTTP, SSE and WS: ?as= does not choose the viewer; the token does', async () => {
        const owner = uid('asowner');
        const contact = uid('ascontact');
        const stranger = uid('asstranger');
        await admin(srv, 'PUT', `/v1/admin/users/${owner}/privacy`, { online: 'contacts', lastSeen: 'contacts' });
        await admin(srv, 'PUT', `/v1/admin/users/${owner}/contacts`, { contacts: [contact] });
        const o = await open(owner);
        o.send({ type: 'status', status: 'busy', ref: 'b' });
        await o.next((m) => m.ref === 'b');
        const asContact = async (q) => (await (await fetch(`${srv.url}/v1/presence?user=${owner}${q}`, { headers: httpHeaders(contact) })).json()).users[0];
        await waitUntil(async () => (await asContact('')).status === 'busy', 'the contact sees busy');
        const hidden = { user: owner, status: 'offline', devices: {} };
        for (const q of [`&as=${contact}`, `&as=${owner}`]) {
          const r = await fetch(`${srv.url}/v1/presence?user=${owner}${q}`, { headers: httpHeaders(stranger) });
          assert.ok([200, 400].includes(r.status), `${q}: ${r.status}`);
          if (r.status === 200) assert.deepEqual((await r.json()).users[0], hidden, `as= ignored under jwt: ${q}`);
          const l = await fetch(`${srv.url}/v1/lastseen?user=${owner}${q}`, { headers: httpHeaders(stranger) });
          if (l.status === 200) assert.deepEqual((await l.json()).users[0], { user: owner, online: false }, `lastseen as= ignored: ${q}`);
          // SSE with the token in the query (EventSource cannot set headers).
          const ctrl = new AbortController();
          const sr = await fetch(`${srv.url}/v1/presence/events?user=${owner}${q}&token=${token({ sub: stranger })}`, { signal: ctrl.signal });
          if (sr.status === 200) {
            let text = '';
            const reader = sr.body.getReader();
            const deadline = Date.now() + 3000 * MULT;
            while (!/^data: /m.test(text) && Date.now() < deadline) {
              const { value, done } = await Promise.race([reader.read(), sleep(500).then(() => ({}))]);
              if (done) break;
              if (value) text += Buffer.from(value).toString();
            }
            const data = /^data: (.*)$/m.exec(text);
            assert.ok(data, `an SSE event: ${text}`);
            assert.deepEqual(JSON.parse(data[1]).presence, hidden, `SSE as= ignored: ${q}`);
          }
          ctrl.abort();
        }
        // WebSocket: ?as= on the upgrade does not change the viewer either.
        const q = new URLSearchParams({ token: token({ sub: stranger }), as: contact, user: contact });
        const c = new Client(new WebSocket(`${srv.wsUrl}/v1/ws?${q}`));
        await once(c.ws, 'open');
        assert.equal((await c.next((m) => m.type === 'welcome')).user, stranger);
        c.send({ type: 'watch', users: [owner], as: contact, user: contact, ref: 'w' });
        assert.deepEqual(await c.presenceOf(owner), hidden);
        await c.close();
        await o.close();
      });

      test('client tokens and the admin key do not stand in for each other', async () => {
        const t = token({ sub: uid('tok') });
        const a = await fetch(`${srv.url}/v1/admin/presence?user=someone`, { headers: { Authorization: `Bearer ${t}` } });
        assert.equal(a.status, 401, 'a client JWT is not an admin key');
        const b = await fetch(`${srv.url}/v1/presence?user=someone`, { headers: { Authorization: `Bearer ${KEY}` } });
        assert.equal(b.status, 401, 'the admin key is not a client token');
        const c = await fetch(`${srv.url}/v1/admin/users/someone/privacy`, { method: 'PUT', body: '{"invisible":true}',
          headers: { Authorization: `Bearer ${t}` } });
        assert.equal(c.status, 401);
        assert.equal((await admin(srv, 'GET', '/v1/admin/users/someone/privacy')).privacy.invisible, false);
      });

      test('first-message auth: user fields next to the token are ignored', async () => {
        const victim = uid('avictim');
        const me = uid('amal');
        const c = new Client(new WebSocket(`${srv.wsUrl}/v1/ws?user=${victim}`));
        await once(c.ws, 'open');
        c.send({ type: 'auth', token: token({ sub: me }), user: victim, sub: victim, uid: victim, from: victim });
        const w = await c.next((m) => m.type === 'welcome');
        assert.equal(w.user, me);
        await waitUntil(async () => (await admin(srv, 'GET', `/v1/admin/presence?user=${me}`)).users[0].status === 'online', 'me online');
        const vp = (await admin(srv, 'GET', `/v1/admin/presence?user=${victim}`)).users[0];
        assert.equal(vp.status, 'offline');
        await c.close();
      });
    }
  });
}
