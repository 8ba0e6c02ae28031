// usePresence / useConnectionState with a minimal React-like hooks runtime
// (no React dependency): one component instance, hooks by call order,
// effects after render with cleanup on dependency change and unmount. Run
// twice: with useSyncExternalStore (React 18+) and with the useState +
// useEffect fallback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeClock } from './_clock.mjs';
import { fakeSockets } from './_fakews.mjs';
import { createClient } from '../index.js';
import { createPresenceHooks } from '../react.js';

function fakeReact({ withSyncStore }) {
  let inst = null; // the component being rendered
  const same = (a, b) => a && b && a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
  function slot(init) {
    const i = inst.i++;
    if (!(i in inst.slots)) inst.slots[i] = init();
    return inst.slots[i];
  }
  const React = {
    useState(init) {
      const me = inst;
      const s = slot(() => ({ v: typeof init === 'function' ? init() : init }));
      s.set ??= (v) => { const nv = typeof v === 'function' ? v(s.v) : v; if (!Object.is(nv, s.v)) { s.v = nv; me.rerender(); } };
      return [s.v, s.set];
    },
    useEffect(fn, deps) {
      const s = slot(() => ({ deps: undefined, cleanup: undefined }));
      if (deps && same(deps, s.deps)) return;
      s.deps = deps;
      inst.effects.push(() => { if (s.cleanup) s.cleanup(); s.cleanup = fn() || undefined; });
    },
    useCallback(fn, deps) {
      const s = slot(() => ({ fn, deps }));
      if (!same(deps, s.deps)) { s.fn = fn; s.deps = deps; }
      return s.fn;
    },
  };
  if (withSyncStore) {
    React.useSyncExternalStore = (subscribe, getSnapshot) => {
      const me = inst;
      const s = slot(() => ({ sub: null, unsub: null }));
      if (s.sub !== subscribe) {
        if (s.unsub) s.unsub();
        s.sub = subscribe;
        s.unsub = subscribe(() => { if (!Object.is(getSnapshot(), s.last)) me.rerender(); });
      }
      s.last = getSnapshot();
      return s.last;
    };
  }
  function mount(component, props) {
    const me = {
      slots: [], effects: [], renders: 0, props, output: undefined, mounted: true,
      render() {
        if (!me.mounted) return;
        inst = me; me.i = 0; me.renders++;
        me.output = component(me.props);
        inst = null;
        for (const e of me.effects.splice(0)) e();
      },
      rerender() { me.render(); },
      update(p) { me.props = p; me.render(); },
      unmount() {
        me.mounted = false;
        for (const s of me.slots) { if (s && s.cleanup) s.cleanup(); if (s && s.unsub) s.unsub(); }
      },
    };
    me.render();
    return me;
  }
  return { React, mount };
}

for (const withSyncStore of [true, false]) {
  test(`usePresence (${withSyncStore ? 'useSyncExternalStore' : 'useState fallback'}): watches while mounted, one render per flush, unwatches on unmount`, async () => {
    const clock = fakeClock();
    const { FakeWS, sockets } = fakeSockets();
    const client = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, window: null, document: null, navigator: null });
    const ws = sockets[0];
    ws.recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
    const { React, mount } = fakeReact({ withSyncStore });
    const { usePresence, useConnectionState } = createPresenceHooks(React);

    const view = mount(({ users }) => {
      const map = usePresence(client, users);
      const state = useConnectionState(client);
      return { map, state, text: users.map((u) => `${u}:${map.get(u)?.status ?? '…'}`).join(' ') };
    }, { users: ['bob', 'carol'] });
    assert.equal(view.output.state, 'open');
    assert.equal(view.output.text, 'bob:… carol:…');
    assert.deepEqual(ws.sent.filter((m) => m.type === 'watch').map((m) => m.users), [['bob', 'carol']]);

    // A burst of 50 updates: one re-render.
    const r0 = view.renders;
    for (let i = 0; i < 25; i++) {
      ws.recv({ type: 'presence', presence: { user: 'bob', status: i % 2 ? 'busy' : 'online', devices: {} } });
      ws.recv({ type: 'presence', presence: { user: 'carol', status: 'away', devices: {}, custom: { text: `t${i}` } } });
    }
    assert.equal(view.renders, r0);
    clock.advance(200);
    assert.equal(view.renders, r0 + 1);
    assert.equal(view.output.text, 'bob:online carol:away');
    assert.equal(view.output.map, client.presence, 'the client\'s immutable map');
    assert.equal(view.output.map.get('carol').custom.text, 't24');

    // Same users in a new array: no re-watch. Another list: unwatch + watch.
    view.update({ users: ['bob', 'carol'] });
    assert.equal(ws.sent.filter((m) => m.type === 'watch').length, 1);
    view.update({ users: ['bob'] });
    await Promise.resolve();
    assert.deepEqual(ws.sent.filter((m) => m.type === 'unwatch').map((m) => m.users), [['carol']], 'bob stays watched');
    assert.equal(ws.sent.filter((m) => m.type === 'watch').length, 1);
    clock.advance(200);
    assert.equal(view.output.text, 'bob:online');
    assert.equal(view.output.map.has('carol'), false);

    // Connection state re-renders.
    ws.drop(1006);
    clock.advance(200);
    assert.equal(view.output.state, 'reconnecting');
    assert.equal(view.output.map.get('bob').stale, true);

    view.unmount();
    await Promise.resolve();
    const rn = view.renders;
    client.unwatch(['x']); // no effect, just stays quiet
    clock.advance(60000);
    sockets.at(-1).recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: true });
    assert.equal(view.renders, rn, 'no renders after unmount');
    assert.equal(sockets.at(-1).sent.filter((m) => m.type === 'watch').length, 0, 'nothing watched after unmount');
    client.close();
  });
}

test('usePresence with one user as a string and with no users', async () => {
  const clock = fakeClock();
  const { FakeWS, sockets } = fakeSockets();
  const client = createClient({ url: 'http://h:1', user: 'ann', WebSocket: FakeWS, timers: clock, window: null, document: null, navigator: null });
  sockets[0].recv({ type: 'welcome', heartbeatMs: 15000, user: 'ann', sessionId: 's1', resumed: false });
  const { React, mount } = fakeReact({ withSyncStore: true });
  const { usePresence } = createPresenceHooks(React);
  const a = mount(({ u }) => usePresence(client, u), { u: 'bob' });
  const b = mount(() => usePresence(client, []), {});
  assert.deepEqual(sockets[0].sent.filter((m) => m.type === 'watch').map((m) => m.users), [['bob']]);
  assert.equal(a.output.size, 0);
  assert.equal(b.output, client.presence);
  a.unmount(); b.unmount();
  await Promise.resolve();
  assert.deepEqual(sockets[0].sent.filter((m) => m.type === 'unwatch').map((m) => m.users), [['bob']]);
  client.close();
});
