// roomtokens.test.mjs - per-room subscription tokens (room-token-secret):
// a join needs HMAC-SHA256("<connectionId>:<room>") signed by the backend,
// bound to the connection and the room; HTTP room reads need the one for
// holder "http". With auth = jwt the token's rooms claim still admits its
// rooms without a room token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const SECRET = 'room-secret-for-tests';
const sign = (holder, room, secret = SECRET) =>
  createHmac('sha256', secret).update(`${holder}:${room}`).digest('hex');

async function join(c, room, token, ref) {
  c.send({ type: 'join', room, ...(token === undefined ? {} : { token }), ref });
  return c.next((m) => m.ref === ref && (m.type === 'error' || m.type === 'room_joined'));
}

test('room tokens: bound to the connection and the room; HTTP reads too', async () => {
  const srv = await startServer(['--room-token-secret', SECRET]);
  try {
    const a = await Client.open(srv, { user: 'rt-a' });
    const b = await Client.open(srv, { user: 'rt-b' });
    const idA = a.welcome.connectionId;
    const idB = b.welcome.connectionId;
    assert.notEqual(idA, idB);
    const refused = [
      undefined,                                  // no token
      '',                                         // empty
      sign(idA, 'other-room'),                    // another room
      sign(idB, 'doc'),                           // another connection
      sign(idA, 'doc', 'wrong-secret'),           // another secret
      sign(idA, 'doc').toUpperCase(),             // not the exact encoding
      sign(idA, 'doc').slice(0, 63),              // truncated
      `${sign(idA, 'doc')}0`,                     // extended
      42,                                         // not a string
    ];
    for (const [i, tok] of refused.entries()) {
      const r = await join(a, 'doc', tok, `bad${i}`);
      assert.equal(r.type, 'error', `token ${JSON.stringify(tok)} must be refused`);
      assert.equal(r.code, 'forbidden');
    }
    const ok = await join(a, 'doc', sign(idA, 'doc'), 'good');
    assert.equal(ok.type, 'room_joined');
    assert.equal(ok.count, 1);
    const okB = await join(b, 'doc', sign(idB, 'doc'), 'goodB');
    assert.equal(okB.type, 'room_joined');

    const url = `${srv.url}/v1/rooms/doc`;
    assert.equal((await fetch(url)).status, 403);
    assert.equal((await fetch(`${url}?room_token=${sign(idA, 'doc')}`)).status, 403);
    const r = await fetch(`${url}?room_token=${sign('http', 'doc')}`);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).count, 2);
    assert.equal((await fetch(`${srv.url}/v1/rooms/doc/events?room_token=${sign('http', 'other')}`)).status, 403);
    await a.close();
    await b.close();
  } finally {
    await stopClean(srv, assert);
  }
});

test('without room-token-secret, rooms stay open (and the field is ignored)', async () => {
  const srv = await startServer([]);
  try {
    const a = await Client.open(srv, { user: 'rt-open' });
    assert.equal((await join(a, 'open-doc', undefined, 'j')).type, 'room_joined');
    assert.equal((await join(a, 'open-doc2', 'garbage', 'k')).type, 'room_joined');
    assert.equal((await fetch(`${srv.url}/v1/rooms/open-doc`)).status, 200);
    await a.close();
  } finally {
    await stopClean(srv, assert);
  }
});
