// phoenix-longpoll.test.mjs - Phoenix's long-poll transport with two nodes:
// a phoenix.js LongPoll client on node a (its session lives there; a load
// balancer keeps its requests on a) and a phoenix.js WebSocket client on
// node b in one topic see each other under one key each, and when the
// long-poll client stops polling, b sees it leave once its session ended
// (1.5 windows) and the grace passed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import WebSocket from 'ws';
import { waitUntil } from '../integration/lib/server.mjs';
import { withTwoNodes, uid } from './lib/nodes.mjs';

const require = createRequire(import.meta.url);
const { Socket, Presence, LongPoll } = require('phoenix');

const WINDOW = 800;
const ARGS = ['--reconnect-grace-ms', '500', '--presence-debounce-ms', '50',
  '--phoenix-longpoll-window-ms', String(WINDOW)];

function phx(node, user, topic, transport) {
  const socket = new Socket(`${node.wsUrl}/socket`, { params: { user }, transport,
    reconnectAfterMs: () => 200, rejoinAfterMs: () => 200, longpollerTimeout: 5000 });
  socket.connect();
  const channel = socket.channel(topic, { meta: { on: user } });
  const presence = new Presence(channel);
  const joined = new Promise((resolve, reject) => channel.join().receive('ok', resolve)
    .receive('error', (e) => reject(new Error(JSON.stringify(e)))));
  const keys = () => presence.list((k) => k).sort();
  return { joined, keys, close: () => new Promise((r) => socket.disconnect(r)) };
}

test('a LongPoll client on a and a WebSocket client on b see each other; the poller\'s leave crosses nodes', async () => {
  await withTwoNodes(ARGS, async (a, b) => {
    const topic = `room:${uid('lp')}`;
    const [ann, bob] = [uid('ann'), uid('bob')];
    const onA = phx(a, ann, topic, LongPoll);
    const onB = phx(b, bob, topic, WebSocket);
    try {
      await onA.joined;
      await onB.joined;
      await waitUntil(() => onA.keys().length === 2, 'a sees both', 8000);
      await waitUntil(() => onB.keys().length === 2, 'b sees both', 8000);
      assert.deepEqual(onA.keys(), [ann, bob].sort());
      assert.deepEqual(onB.keys(), onA.keys());
      await onA.close();
      await waitUntil(() => onB.keys().length === 1, 'ann leaves b\'s list after her session ends', 10000);
      assert.deepEqual(onB.keys(), [bob]);
    } finally {
      await onA.close();
      await onB.close();
    }
  });
});
