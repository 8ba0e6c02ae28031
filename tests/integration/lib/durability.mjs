// durability.mjs - the kill -9 test of durable settings, shared by the
// SQLite run (durable.test.mjs) and the PostgreSQL one (tests/pg/): writers
// (admin API privacy, protocol `privacy` messages pipelined on WebSockets,
// admin contact adds, admin blocks) run concurrently against a server until
// `target` changes are acknowledged, then the server is killed with SIGKILL
// while more are in flight; verify() then checks, on the restarted server,
// that every acknowledged change is there (an unacknowledged one may or may
// not be).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { sleep, waitUntil } from './server.mjs';
import { Client } from './client.mjs';
import { adminRequest } from './admin.mjs';

const MODES = ['everyone', 'contacts', 'nobody'];
const DEFAULT = { online: 'everyone', lastSeen: 'everyone', invisible: false };
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// A seeded PRNG (mulberry32) so that a failing run can be replayed.
export function seeded(seed) {
  let state = seed;
  return () => {
    state = (state + 0x6D2B79F5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The rounds and the check for one test: key is the admin API key, rnd a
// seeded() generator, run and prefix make the ids unique (a PostgreSQL
// database outlives one run). Returns {round(srv, r, target, log) -> rec,
// verify(srv, recs)}.
export function durability({ key, rnd, run, prefix = '' }) {
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const randomPrivacy = () => ({ online: pick(MODES), lastSeen: pick(MODES), invisible: rnd() < 0.5 });
  const admin = (srv, method, p, body, signal) => adminRequest(srv, method, p, { body, key, signal });

  // Runs the writers of one round against srv until `target` changes are
  // acknowledged, then kills the server with SIGKILL (writes still in flight).
  async function round(srv, r, target, log) {
    const tag = `${run}-r${r}`;
    const rec = { privacy: {}, contacts: { owner: `${prefix}dc-${tag}`, acked: [], sent: [] }, blocks: { owner: `${prefix}db-${tag}`, acked: [], sent: [] } };
    let acked = 0;
    let stop = false;
    const ctrl = new AbortController();
    const bump = () => { acked++; };
    // Setup (acknowledged before the round starts): the contacts owner shows
    // its online status to contacts only.
    const s0 = await admin(srv, 'PUT', `/v1/admin/users/${rec.contacts.owner}/privacy`, { online: 'contacts' });
    assert.equal(s0.status, 200, s0.text);

    // Per user, the values in the order sent, and the index of the last acked.
    const track = (u) => (rec.privacy[u] ||= { sent: [], lastAcked: -1 });

    const adminPrivacy = async (k) => {
      const u = `${prefix}da-${tag}-${k}`;
      const t = track(u);
      while (!stop) {
        const v = randomPrivacy();
        const i = t.sent.push(v) - 1;
        try {
          const res = await admin(srv, 'PUT', `/v1/admin/users/${u}/privacy`, v, ctrl.signal);
          if (res.status !== 200) throw new Error(`admin privacy ${res.status} ${res.text}`);
          assert.deepEqual(res.json, { user: u, privacy: v });
          t.lastAcked = i;
          bump();
        } catch (e) {
          if (stop) return;
          throw e;
        }
      }
    };
    const protoPrivacy = async (k) => {
      const u = `${prefix}dp-${tag}-${k}`;
      const t = track(u);
      const c = await Client.open(srv, { user: u });
      const pending = new Map();
      c.ws.on('message', (d) => {
        const m = JSON.parse(d.toString());
        if (m.type === 'ack' && pending.has(m.ref)) {
          const i = pending.get(m.ref);
          pending.delete(m.ref);
          if (i > t.lastAcked) t.lastAcked = i;
          bump();
        } else if (m.type === 'error' && !stop) log.push(`protocol error ${JSON.stringify(m)}`);
      });
      let seq = 0;
      while (!stop && c.ws.readyState === 1) {
        if (pending.size < 4) {
          const v = randomPrivacy();
          const i = t.sent.push(v) - 1;
          const ref = `p${seq++}`;
          pending.set(ref, i);
          c.send({ type: 'privacy', ...v, ref });
        } else {
          await sleep(2);
        }
        await sleep(1);
      }
    };
    const contacts = async () => {
      let i = 0;
      while (!stop) {
        const id = `${prefix}c-${tag}-${i++}`;
        rec.contacts.sent.push(id);
        try {
          const res = await admin(srv, 'POST', `/v1/admin/users/${rec.contacts.owner}/contacts`, { add: [id] }, ctrl.signal);
          if (res.status !== 200) throw new Error(`contacts ${res.status} ${res.text}`);
          rec.contacts.acked.push(id);
          bump();
        } catch (e) { if (stop) return; throw e; }
      }
    };
    const blocks = async () => {
      let i = 0;
      while (!stop) {
        const id = `${prefix}t-${tag}-${i++}`;
        rec.blocks.sent.push(id);
        try {
          const res = await admin(srv, 'PUT', `/v1/admin/users/${rec.blocks.owner}/blocks/${id}`, undefined, ctrl.signal);
          if (res.status !== 200) throw new Error(`block ${res.status} ${res.text}`);
          rec.blocks.acked.push(id);
          bump();
        } catch (e) { if (stop) return; throw e; }
      }
    };
    const writers = [adminPrivacy(0), adminPrivacy(1), adminPrivacy(2), protoPrivacy(0), protoPrivacy(1), contacts(), blocks()];
    const failed = Promise.race(writers.map((w) => w.then(() => new Promise(() => {})))); // rejects on the first writer error
    await Promise.race([failed, waitUntil(() => acked >= target, `${target} acknowledged changes`, 60000)]);
    // Kill while writes are in flight: no await between the check and the kill.
    stop = true;
    srv.child.kill('SIGKILL');
    await once(srv.child, 'exit').catch(() => {});
    ctrl.abort();
    await Promise.allSettled(writers);
    const inflight = Object.values(rec.privacy).reduce((t, p) => t + p.sent.length - 1 - p.lastAcked, 0)
      + rec.contacts.sent.length - rec.contacts.acked.length + rec.blocks.sent.length - rec.blocks.acked.length;
    log.push(`round ${r}: ${acked} acknowledged at the kill, ${inflight} sent and not acknowledged (${Object.entries(rec.privacy).map(([u, p]) => `${u.split("-")[0]}:${p.lastAcked + 1}/${p.sent.length}`).join(" ")} contacts:${rec.contacts.acked.length}/${rec.contacts.sent.length} blocks:${rec.blocks.acked.length}/${rec.blocks.sent.length})`);
    return rec;
  }

  async function verify(srv, recs) {
    for (const rec of recs) {
      for (const [u, t] of Object.entries(rec.privacy)) {
        const res = await admin(srv, 'GET', `/v1/admin/users/${u}/privacy`);
        assert.equal(res.status, 200, res.text);
        const got = res.json.privacy;
        // The acknowledged value or one sent after it (in flight at the kill).
        const allowed = t.lastAcked < 0 ? [DEFAULT, ...t.sent] : t.sent.slice(t.lastAcked);
        assert.ok(allowed.some((v) => same(v, got)),
          `${u}: after restart ${JSON.stringify(got)}; last acknowledged #${t.lastAcked} ${JSON.stringify(t.sent[t.lastAcked])} of ${t.sent.length} sent`);
      }
      // Contacts: the owner (online, visibility contacts) is seen online by
      // every acknowledged contact; blocks: every acknowledged target sees the
      // blocker offline while others see it online.
      const co = await Client.open(srv, { user: rec.contacts.owner });
      const bo = await Client.open(srv, { user: rec.blocks.owner });
      await waitUntil(async () => {
        const r = await admin(srv, 'GET', `/v1/admin/presence?user=${rec.contacts.owner}&user=${rec.blocks.owner}`);
        return r.json.users.every((p) => p.status === 'online');
      }, 'owners online');
      const view = async (u, as) => (await (await fetch(`${srv.url}/v1/presence?user=${u}&as=${as}`)).json()).users[0].status;
      for (const id of rec.contacts.acked) assert.equal(await view(rec.contacts.owner, id), 'online', `acknowledged contact ${id} lost`);
      assert.equal(await view(rec.contacts.owner, `${prefix}nobody-${run}`), 'offline');
      for (const id of rec.blocks.acked) assert.equal(await view(rec.blocks.owner, id), 'offline', `acknowledged block ${id} lost`);
      assert.equal(await view(rec.blocks.owner, `${prefix}nobody-${run}`), 'online');
      for (const c of [co, bo]) { c.send({ type: 'leave' }); await c.closed; }
    }
  }

  return { round, verify };
}
