// phoenix.test.mjs - Phoenix Presence across two nodes: phoenix.js clients
// on node a and node b in one topic see each other under one key each,
// and a leave on one node is a presence_diff on the other after the
// grace; realtime-js on b sees a phoenix.js member of a.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { waitUntil } from '../integration/lib/server.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';

const require = createRequire(import.meta.url);
const { Socket, Presence } = require('phoenix');
const { RealtimeClient } = require('@supabase/realtime-js');

const ARGS = ['--reconnect-grace-ms', '500', '--presence-debounce-ms', '50'];

function phx(node, user, topic) {
  const socket = new Socket(`${node.wsUrl}/socket`, { params: { user }, transport: WebSocket,
    reconnectAfterMs: () => 200, rejoinAfterMs: () => 200 });
  socket.connect();
  const channel = socket.channel(topic, { meta: { on: user } });
  const presence = new Presence(channel);
  const joined = new Promise((resolve, reject) => channel.join().receive('ok', resolve)
    .receive('error', (e) => reject(new Error(JSON.stringify(e)))));
  const keys = () => presence.list((k) => k).sort();
  return { joined, keys, close: () => new Promise((r) => socket.disconnect(r)) };
}

test('phoenix.js on two nodes: one topic, each sees the other; a leave crosses nodes', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const topic = `room:${uid('x')}`;
    const [ann, bob] = [uid('ann'), uid('bob')];
    const onA = phx(a, ann, topic);
    await onA.joined;
    const onB = phx(b, bob, topic);
    await onB.joined;
    await waitUntil(() => onA.keys().length === 2, 'a sees both', 8000);
    await waitUntil(() => onB.keys().length === 2, 'b sees both', 8000);
    assert.deepEqual(onA.keys(), [ann, bob].sort());
    assert.deepEqual(onB.keys(), onA.keys());
    const rt = new RealtimeClient(`${b.wsUrl}/realtime/v1`, { params: { apikey: 'k', user: uid('rt') }, transport: WebSocket });
    const ch = rt.channel(topic, { config: { presence: { key: '' } } });
    await new Promise((res, rej) => ch.subscribe((s, e) => (s === 'SUBSCRIBED' ? res() : s === 'CHANNEL_ERROR' && rej(e))));
    await waitUntil(() => Object.keys(ch.presenceState()).sort().join() === [ann, bob].sort().join(),
      'realtime-js on b sees both', 8000);
    await onB.close();
    await waitUntil(() => onA.keys().length === 1, 'bob leaves a\'s list after the grace', 8000);
    assert.deepEqual(onA.keys(), [ann]);
    rt.disconnect();
    await onA.close();
  });
});

// A realtime-js client of user on node, subscribed to topic (vsn), its
// "cursor" broadcasts recorded.
function rtOn(node, user, topic, vsn = '2.0.0') {
  const client = new RealtimeClient(`${node.wsUrl}/realtime/v1`, { params: { apikey: 'k', user },
    transport: WebSocket, vsn });
  const ch = client.channel(topic, { config: { presence: { key: user } } });
  const casts = [];
  ch.on('broadcast', { event: 'cursor' }, (m) => casts.push(m.payload));
  const subscribed = new Promise((res, rej) => ch.subscribe((s, e) => (s === 'SUBSCRIBED' ? res() : s === 'CHANNEL_ERROR' && rej(e))));
  return { ch, casts, subscribed, close: () => client.disconnect() };
}

test('broadcasts across nodes: an ArrayBuffer arrives as bytes (vsn 2.0.0) or base64 (1.0.0); a blocker\'s never reaches the user it blocks', async () => {
  const KEY = 'cluster-phoenix-admin-key-0123456789';
  await withTwoNodes([...ARGS, '--admin-api-key', KEY], async (a, b) => {
    const topic = uid('cast');
    const [u, v, w, x] = [uid('blocker'), uid('blocked'), uid('other'), uid('old')];
    const r = await fetch(`${a.url}/v1/admin/users/${u}/blocks/${v}`, { method: 'PUT', headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(r.status, 200, await r.text());
    const cu = rtOn(a, u, topic);
    const [cv, cw, cx] = [rtOn(b, v, topic), rtOn(b, w, topic), rtOn(b, x, topic, '1.0.0')];
    try {
      await Promise.all([cu.subscribed, cv.subscribed, cw.subscribed, cx.subscribed]);
      // Subscriptions travel to the other node's room owner: wait until a
      // broadcast from a crosses, then count from there.
      await waitUntil(async () => {
        await cu.ch.send({ type: 'broadcast', event: 'cursor', payload: { probe: true } });
        return cw.casts.length > 0;
      }, 'a broadcast from a reaches b', 8000);
      const bytes = Uint8Array.from([9, 0, 255, 61, 128]);
      const [w0, x0] = [cw.casts.length, cx.casts.length];
      assert.equal(await cu.ch.send({ type: 'broadcast', event: 'cursor', payload: bytes.buffer }), 'ok');
      await waitUntil(() => cw.casts.length > w0 && cx.casts.length > x0, 'the binary broadcast crosses', 8000);
      const got = cw.casts[cw.casts.length - 1];
      assert.ok(got instanceof ArrayBuffer, 'realtime-js 2.0.0 on b decodes an ArrayBuffer');
      assert.deepEqual([...new Uint8Array(got)], [...bytes]);
      assert.equal(cx.casts[cx.casts.length - 1], Buffer.from(bytes).toString('base64'));
      assert.equal(await cw.ch.send({ type: 'broadcast', event: 'cursor', payload: { from: 'w' } }), 'ok');
      await waitUntil(() => cv.casts.some((p) => p && p.from === 'w'), 'the blocked user hears the other member', 8000);
      assert.deepEqual(cv.casts, [{ from: 'w' }], 'nothing from the blocker, across nodes');
    } finally {
      await Promise.all([cu.close(), cv.close(), cw.close(), cx.close()]);
    }
  });
});

// user -> its metas' phx_refs (sorted), as a phoenix.js Presence lists them.
function metasOf(presence) {
  const out = {};
  presence.list((k, { metas }) => { out[k] = metas.map((m) => m.phx_ref).sort(); });
  return out;
}

test('one user with a tab on each node: one key with two metas on every node, each with its own phx_ref; one tab leaving removes only its meta', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const topic = `room:${uid('m')}`;
    const ann = uid('ann');
    const open = (node, user, meta) => {
      const socket = new Socket(`${node.wsUrl}/socket`, { params: { user }, transport: WebSocket,
        reconnectAfterMs: () => 200, rejoinAfterMs: () => 200 });
      socket.connect();
      const channel = socket.channel(topic, { meta });
      const presence = new Presence(channel);
      const joined = new Promise((res, rej) => channel.join().receive('ok', res)
        .receive('error', (e) => rej(new Error(JSON.stringify(e)))));
      return { joined, presence, close: () => new Promise((r) => socket.disconnect(r)) };
    };
    const tabA = open(a, ann, { tab: 'on-a' });
    await tabA.joined;
    const tabB = open(b, ann, { tab: 'on-b' });
    await tabB.joined;
    const watchA = open(a, uid('wa'), {});
    const watchB = open(b, uid('wb'), {});
    await Promise.all([watchA.joined, watchB.joined]);
    const views = [tabA, tabB, watchA, watchB];
    try {
      for (const v of views)
        await waitUntil(() => (metasOf(v.presence)[ann] ?? []).length === 2, 'two metas of ann', 8000);
      const refs = metasOf(watchA.presence)[ann];
      assert.equal(new Set(refs).size, 2, `two phx_refs: ${refs}`);
      for (const v of views) assert.deepEqual(metasOf(v.presence)[ann], refs, 'the same metas on every node');
      const tabs = (v) => v.presence.list((k, { metas }) => (k === ann ? metas.map((m) => m.tab).sort() : null))
        .filter(Boolean)[0];
      assert.deepEqual(tabs(watchB), ['on-a', 'on-b'], 'each tab its own meta');
      await tabB.close();
      const left = refs.filter((r) => metasOf(tabA.presence)[ann].includes(r));
      for (const v of [tabA, watchA, watchB])
        await waitUntil(() => (metasOf(v.presence)[ann] ?? []).length === 1, 'one meta left', 8000);
      for (const v of [tabA, watchA, watchB]) {
        assert.deepEqual(tabs(v), ['on-a'], 'the tab on A stays');
        assert.equal(metasOf(v.presence)[ann].length, 1);
        assert.ok(left.includes(metasOf(v.presence)[ann][0]), 'with its phx_ref');
      }
    } finally {
      for (const v of [tabA, watchA, watchB]) await v.close();
    }
  });
});
