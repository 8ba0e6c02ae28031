// A kick reason with invalid UTF-8 must never reach a WebSocket text frame
// (issue 15, item 6): the client's WebSocket would fail the connection
// (1007) instead of seeing session_ended. The server either refuses the
// body (400) or sends the reason with U+FFFD in place of the bad bytes;
// the session ends with 4000 either way.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, stopClean } from './lib/server.mjs';

const KEY = 'kick-utf8-test-key-0123456789abcdef';
let srv;
before(async () => { srv = await startServer(['--workers', '2', '--admin-api-key', KEY]); });
after(async () => { await stopClean(srv, assert); });

test('a kick reason with invalid UTF-8 does not break the text frame', async () => {
  const ws = new WebSocket(`${srv.wsUrl}/v1/ws?user=kicked-utf8`);
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  ws.on('error', () => {}); // an invalid frame shows as the close code below
  const closed = new Promise((r) => ws.on('close', (code) => r(code)));
  await once(ws, 'open');
  while (!msgs.some((m) => m.type === 'welcome')) await new Promise((r) => setTimeout(r, 20));

  const body = Buffer.concat([Buffer.from('{"reason":"bad \\u00e9 '), Buffer.from([0xff, 0xc3]),
    Buffer.from(' end"}')]);
  const r = await fetch(`${srv.url}/v1/admin/users/kicked-utf8/kick`, {
    method: 'POST', body, headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
  });
  if (r.status === 400) { // refused at the door: the session goes on
    ws.close();
    await closed;
    return;
  }
  assert.equal(r.status, 200, await r.text());
  assert.equal(await closed, 4000);
  const ended = msgs.find((m) => m.type === 'session_ended');
  assert.ok(ended, JSON.stringify(msgs));
  assert.equal(ended.reason, 'kicked');
  assert.equal(ended.message, 'bad \u00e9 \ufffd\ufffd end');
});
