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
