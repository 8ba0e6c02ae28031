// Page lifecycle against a fake page (EventTarget window and document, a
// Map as sessionStorage, fake sockets, a fake clock): a reload sends nothing
// on the way out and the next page resumes the session; a new session
// re-asserts the chosen status and custom status; a hidden tab goes away
// after hiddenAwayMs, never while the page unloads; a duplicated tab does
// not take over the session of the tab it was copied from.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from '../index.js';
import { fakeClock } from './_clock.mjs';
import { fakeSockets, tick } from './_fakews.mjs';

function fakeStorage(init) {
  const m = new Map(init);
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k), _m: m };
}
function fakePage(storage = fakeStorage()) {
  const win = new EventTarget();
  const doc = new EventTarget();
  doc.visibilityState = 'visible';
  return { win, doc, storage };
}
function visibility(page, state) {
  page.doc.visibilityState = state;
  page.doc.dispatchEvent(new Event('visibilitychange'));
}
// What a reload does to the old page, in the browser's order.
function unload(page) {
  visibility(page, 'hidden');
  page.win.dispatchEvent(Object.assign(new Event('pagehide'), { persisted: false }));
}
function open(page, clock, FakeWS, extra = {}) {
  return createClient({
    url: 'http://h:1', user: 'ann', device: 'web', WebSocket: FakeWS, timers: clock,
    window: page.win, document: page.doc, navigator: null, storage: page.storage, ...extra,
  });
}
const welcome = (sessionId, resumed) => ({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId, resumed, connectionId: 'c1' });
const resumeOf = (ws) => new URL(ws.url).searchParams.get('resume');

test('a reload sends no leave and no away, and the next page resumes the session (nothing re-sent)', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c1 = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  c1.setStatus('busy').catch(() => {});
  c1.setCustom({ text: 'In a meeting', emoji: ':calendar:' }).catch(() => {});
  const mark = sockets[0].sent.length;
  unload(page);
  clock.advance(120000); // nothing is sent later either (no timer survives the pagehide)
  await tick();
  const out = sockets[0].sent.slice(mark);
  assert.deepEqual(out.filter((m) => m.type === 'leave' || m.type === 'activity'), [], JSON.stringify(out));
  assert.equal(sockets[0].closed, 1000, 'the socket is closed: the server starts its reconnect grace');
  assert.equal(sockets.length, 1, 'no reconnect from the unloaded page');

  // The next page of the tab.
  const page2 = fakePage(page.storage);
  const c2 = open(page2, clock, FakeWS);
  await tick();
  assert.equal(resumeOf(sockets[1]), 's1');
  assert.doesNotMatch([...page.storage._m.values()].join(), /s1/, 'the session id is taken, not copied');
  sockets[1].recv(welcome('s1', true));
  assert.equal(c2.sessionId, 's1');
  const sent = sockets[1].sent.map((m) => m.type);
  assert.ok(!sent.includes('status') && !sent.includes('custom') && !sent.includes('activity'), `resumed: the server kept it all, got ${sent}`);
  c1.close(); c2.close();
});

test('after a reload, a new session (the old one ended) re-asserts the chosen status and custom status', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c1 = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  c1.setStatus('dnd', { expiresInMs: 3600000 }).catch(() => {});
  c1.setCustom({ text: 'In a meeting', emoji: ':calendar:' }, { expiresInMs: 1800000 }).catch(() => {});
  unload(page);
  clock.advance(10000);
  const page2 = fakePage(page.storage);
  const c2 = open(page2, clock, FakeWS);
  await tick();
  assert.equal(resumeOf(sockets[1]), 's1');
  sockets[1].recv(welcome('s2', false));
  const st = sockets[1].last('status'), cu = sockets[1].last('custom');
  assert.equal(st?.status, 'dnd');
  assert.equal(st.expiresInMs, 3600000 - 10000, 'the expiry is kept, not restarted');
  assert.equal(cu?.text, 'In a meeting');
  assert.equal(cu.emoji, ':calendar:');
  assert.equal(cu.expiresInMs, 1800000 - 10000);
  // A choice cleared before the reload stays cleared.
  c2.setCustom(null).catch(() => {});
  unload(page2);
  const c3 = open(fakePage(page.storage), clock, FakeWS);
  await tick();
  assert.equal(resumeOf(sockets.at(-1)), 's2');
  sockets.at(-1).recv(welcome('s3', false));
  assert.equal(sockets.at(-1).last('custom'), undefined);
  assert.equal(sockets.at(-1).last('status')?.status, 'dnd');
  c1.close(); c2.close(); c3.close();
});

test('a duplicated tab (sessionStorage copied from a live tab) starts its own session', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c1 = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  c1.setStatus('busy').catch(() => {});
  const copy = fakePage(fakeStorage(page.storage._m)); // what "Duplicate tab" does
  const c2 = open(copy, clock, FakeWS);
  await tick();
  assert.equal(resumeOf(sockets[1]), null);
  sockets[1].recv(welcome('s2', false));
  assert.equal(sockets[1].last('status')?.status, 'busy', "the user's choice comes along");
  assert.equal(sockets[0].closed, null);
  c1.close(); c2.close();
});

test('an explicit leave() ends the session: the next page does not resume it', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c1 = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  c1.leave();
  assert.ok(sockets[0].last('leave'));
  unload(page);
  const c2 = open(fakePage(page.storage), clock, FakeWS);
  await tick();
  assert.equal(resumeOf(sockets[1]), null);
  c1.close(); c2.close();
});

test('hiddenAwayMs (default 60 s): a hidden tab goes away, visible again undoes it', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c = open(page, clock, FakeWS, { idleMs: 3600000 });
  await tick();
  sockets[0].recv(welcome('s1', false));
  const acts = () => sockets[0].sent.filter((m) => m.type === 'activity').map((m) => m.active);
  visibility(page, 'hidden');
  clock.advance(59999);
  assert.deepEqual(acts(), [], 'not before hiddenAwayMs');
  assert.equal(c.active, true);
  clock.advance(1);
  assert.deepEqual(acts(), [false]);
  assert.equal(c.active, false);
  visibility(page, 'visible');
  assert.deepEqual(acts(), [false, true]);
  assert.equal(c.active, true);
  // Hidden and visible again within the time: only the visible report.
  visibility(page, 'hidden');
  clock.advance(30000);
  visibility(page, 'visible');
  clock.advance(120000);
  assert.deepEqual(acts(), [false, true, true]);
  c.close();
});

test('hiddenAwayMs is configurable, null turns it off, and a tab that starts hidden counts', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  page.doc.visibilityState = 'hidden'; // opened in the background
  const c = open(page, clock, FakeWS, { hiddenAwayMs: 500 });
  await tick();
  sockets[0].recv(welcome('s1', false));
  clock.advance(500);
  assert.deepEqual(sockets[0].sent.filter((m) => m.type === 'activity').map((m) => m.active), [false]);
  c.close();

  const page2 = fakePage();
  const c2 = open(page2, clock, FakeWS, { hiddenAwayMs: null, idleMs: 7200000 });
  await tick();
  sockets[1].recv(welcome('s2', false));
  visibility(page2, 'hidden');
  clock.advance(3600000);
  assert.deepEqual(sockets[1].sent.filter((m) => m.type === 'activity' && !m.active), []);
  c2.close();
});

test('back from the back/forward cache: the same session is resumed, the hidden timer is gone', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c = open(page, clock, FakeWS, { hiddenAwayMs: 1000 });
  await tick();
  sockets[0].recv(welcome('s1', false));
  unload(page);
  clock.advance(2000);
  assert.equal(sockets.length, 1);
  page.win.dispatchEvent(Object.assign(new Event('pageshow'), { persisted: true }));
  visibility(page, 'visible');
  await tick();
  assert.equal(sockets.length, 2);
  assert.equal(resumeOf(sockets[1]), 's1');
  assert.equal(sockets[0].sent.filter((m) => m.type === 'activity' && !m.active).length, 0);
  c.close();
});

test("with a token, choices stored for another user (the tab signed in anew) are not re-sent", async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const opts = { user: undefined, token: 'not-a-jwt' };
  const c1 = open(page, clock, FakeWS, opts);
  await tick(); await tick();
  sockets[0].recv(welcome('s1', false));
  c1.setStatus('dnd').catch(() => {});
  unload(page);
  const c2 = open(fakePage(page.storage), clock, FakeWS, opts);
  await tick(); await tick();
  assert.equal(resumeOf(sockets[1]), 's1');
  sockets[1].recv({ ...welcome('s9', false), user: 'bob' });
  assert.equal(sockets[1].last('status'), undefined, "ann's dnd is not bob's");
  c1.close(); c2.close();
});

test('a draining server\'s reconnect: the client waits afterMs (plus a little), then resumes its session', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  sockets[0].recv({ type: 'reconnect', afterMs: 2000 });
  clock.advance(1500);
  await tick();
  sockets[0].drop(1001); // the server closes at its time (a little early here)
  await tick();
  clock.advance(400);
  await tick();
  assert.equal(sockets.length, 1, 'not before afterMs');
  clock.advance(400); // afterMs + at most 250 ms of jitter
  await tick();
  assert.equal(sockets.length, 2, 'reconnected after afterMs');
  assert.equal(resumeOf(sockets[1]), 's1', 'resuming the session');
  sockets[1].recv(welcome('s1', true));
  assert.equal(c.sessionId, 's1');
  c.close();
});

test('a reconnect whose socket the server does not close: the client closes it at afterMs and comes back', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const page = fakePage();
  const c = open(page, clock, FakeWS);
  await tick();
  sockets[0].recv(welcome('s1', false));
  sockets[0].recv({ type: 'reconnect', afterMs: 100 });
  clock.advance(400);
  await tick();
  await tick();
  assert.equal(sockets[0].closed, 1000);
  clock.advance(10);
  await tick();
  assert.equal(sockets.length, 2);
  assert.equal(resumeOf(sockets[1]), 's1');
  c.close();
});
