// max-sessions-per-user counts only what can refuse: sessions without a
// live connection (dropped sockets in their reconnect grace, socketless
// HTTP sessions) are ended, oldest first, to make room, so ten of them
// never lock the user's next real connection out. Ten live sockets still
// make the 11th refused with close 1008.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { Client } from './lib/client.mjs';

let srv;
before(async () => { srv = await startServer(['--workers', '2', '--reconnect-grace-ms', '30000']); });
after(async () => { await stopClean(srv, assert); });

let n = 0;
const id = (p) => `${p}-${process.pid}-${++n}`;

test('ten dropped sockets do not refuse the 11th connection', async () => {
  const user = id('drop');
  for (let i = 0; i < 10; i++) {
    const c = await Client.open(srv, { user });
    assert.equal(c.welcome.type, 'welcome');
    await c.kill();
  }
  const c = await Client.open(srv, { user });
  assert.equal(c.welcome.type, 'welcome', JSON.stringify(c.welcome));
  await c.close();
});

test('ten HTTP heartbeats without a sessionId do not refuse the 11th connection', async () => {
  const user = id('http');
  for (let i = 0; i < 10; i++) {
    const r = await fetch(`${srv.url}/v1/heartbeat`, { method: 'POST', body: JSON.stringify({ user }) });
    assert.equal(r.status, 200, await r.text());
  }
  const c = await Client.open(srv, { user });
  assert.equal(c.welcome.type, 'welcome', JSON.stringify(c.welcome));
  await c.close();
});

test('ten live sockets still refuse the 11th with 1008', async () => {
  const user = id('live');
  const cs = [];
  for (let i = 0; i < 10; i++) cs.push(await Client.open(srv, { user }));
  const c = await Client.open(srv, { user });
  assert.equal(c.welcome.type, 'error');
  assert.equal(c.welcome.code, 'too_many_sessions');
  assert.equal((await c.closed).code, 1008);
  await Promise.all(cs.map((x) => x.close()));
});
