// roomtokens.test.mjs - per-room subscription tokens (room-token-secret):
// a join needs "<exp>.<hex HMAC-SHA256 of "<user>:<room>:<exp>">" signed by
// the backend, bound to the user, the room and an expiry (issue 15, item 5:
// a token bound to the connection id could be replayed after a restart);
// HTTP room reads need the one for their reader, or for holder "http"
// without one. With auth = jwt the token's rooms claim still admits its
// rooms without a room token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

const SECRET = 'room-secret-for-tests';
const inAMinute = () => Math.floor(Date.now() / 1000) + 60;
const sign = (holder, room, exp = inAMinute(), secret = SECRET) =>
  `${exp}.${createHmac('sha256', secret).update(`${holder}:${room}:${exp}`).digest('hex')}`;

async function join(c, room, token, ref) {
  c.send({ type: 'join', room, ...(token === undefined ? {} : { token }), ref });
  return c.next((m) => m.ref === ref && (m.type === 'error' || m.type === 'room_joined'));
}

test('room tokens: bound to the user, the room and an expiry; HTTP reads too', async () => {
  const srv = await startServer(['--room-token-secret', SECRET]);
  try {
    const a = await Client.open(srv, { user: 'rt-a' });
    const b = await Client.open(srv, { user: 'rt-b' });
    const idA = a.welcome.connectionId;
    const exp = inAMinute();
    const good = sign('rt-a', 'doc', exp);
    const mac = good.slice(good.indexOf('.') + 1);
    const refused = [
      undefined,                                  // no token
      '',                                         // empty
      sign('rt-a', 'other-room'),                 // another room
      sign('rt-b', 'doc'),                        // another user
      sign('rt-a', 'doc', exp, 'wrong-secret'),   // another secret
      sign('rt-a', 'doc', Math.floor(Date.now() / 1000) - 1), // expired
      `${exp + 3600}.${mac}`,                     // exp moved later
      `${exp}.${mac.toUpperCase()}`,              // not the exact encoding
      good.slice(0, -1),                          // truncated
      `${good}0`,                                 // extended
      mac,                                        // no exp
      `0${exp}.${mac}`,                           // not the exact exp text
      createHmac('sha256', SECRET).update(`${idA}:doc`).digest('hex'), // the old format
      42,                                         // not a string
    ];
    for (const [i, tok] of refused.entries()) {
      const r = await join(a, 'doc', tok, `bad${i}`);
      assert.equal(r.type, 'error', `token ${JSON.stringify(tok)} must be refused`);
      assert.equal(r.code, 'forbidden');
    }
    const ok = await join(a, 'doc', good, 'good');
    assert.equal(ok.type, 'room_joined');
    assert.equal(ok.count, 1);
    const okB = await join(b, 'doc', sign('rt-b', 'doc'), 'goodB');
    assert.equal(okB.type, 'room_joined');
    // Another connection of the same user may use the same token.
    const a2 = await Client.open(srv, { user: 'rt-a' });
    assert.equal((await join(a2, 'doc', good, 'again')).type, 'room_joined');

    const url = `${srv.url}/v1/rooms/doc`;
    assert.equal((await fetch(url)).status, 403);
    assert.equal((await fetch(`${url}?room_token=${sign('rt-a', 'doc')}`)).status, 403);
    assert.equal((await fetch(`${url}?room_token=${sign('http', 'doc', 1000)}`)).status, 403);
    const r = await fetch(`${url}?room_token=${sign('http', 'doc')}`);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).count, 2);
    // A reader (?as=) needs a token of its own.
    assert.equal((await fetch(`${url}?as=rt-b&room_token=${sign('http', 'doc')}`)).status, 403);
    assert.equal((await fetch(`${url}?as=rt-b&room_token=${sign('rt-b', 'doc')}`)).status, 200);
    assert.equal((await fetch(`${srv.url}/v1/rooms/doc/events?room_token=${sign('http', 'other')}`)).status, 403);
    await a.close();
    await a2.close();
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
