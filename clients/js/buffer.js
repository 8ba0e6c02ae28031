// buffer.js - coalesces presence updates for a window and hands out one
// immutable map per flush. Per user, later updates overwrite earlier ones.
//
// Ordering: presence objects of other users carry no `version` (the server
// leaves it out so that versions cannot leak activity); they arrive in order
// on the socket, so the stream order is the order and the last one wins.
// Your own presence carries `version`: one not larger than the known one is
// ignored, unless forced (the first state after a (re)watch resets the
// baseline: after a server restart versions start again).
// An update equal to what is already shown (a snapshot after a reconnect,
// say) changes nothing and causes no callback.
//
// Each value is the server's presence object plus `stale` (true while the
// connection is down); after `unknown` the status reads "unknown", never
// "offline".
import { frozenMap } from './frozen-map.js';
import { timersFrom } from './timers.js';

export function createPresenceBuffer({ windowMs = 200, timers, onFlush } = {}) {
  const t = timersFrom(timers);
  const known = new Map(); // user -> raw presence (committed)
  const pending = new Map(); // user -> raw presence
  const stale = new Map(); // user -> 'stale' | 'unknown'
  const dirty = new Set(); // users whose view changes at the next flush
  let view = frozenMap();
  let timer = null;

  function schedule() {
    if (timer !== null) return;
    if (windowMs <= 0) { flush(); return; }
    timer = t.setTimeout(() => { timer = null; flush(); }, windowMs);
  }

  function viewOf(user) {
    const p = known.get(user);
    if (!p) return undefined;
    const s = stale.get(user);
    if (!s) return Object.freeze({ ...p, stale: false });
    if (s === 'stale') return Object.freeze({ ...p, stale: true });
    const { lastSeen, ...rest } = p;
    return Object.freeze({ ...rest, status: 'unknown', devices: Object.freeze({}), stale: true, lastKnown: p });
  }

  // Same state, `version` aside (the versions differ by definition).
  function same(a, b) {
    if (a === b) return true;
    if (!a || !b || typeof a !== 'object' || typeof b !== 'object' || Array.isArray(a) !== Array.isArray(b)) return false;
    const ka = Object.keys(a).filter((k) => k !== 'version'), kb = Object.keys(b).filter((k) => k !== 'version');
    if (ka.length !== kb.length) return false;
    for (const k of ka) if (!Object.prototype.hasOwnProperty.call(b, k) || !same(a[k], b[k])) return false;
    return true;
  }

  function flush() {
    if (timer !== null) { t.clearTimeout(timer); timer = null; }
    for (const [user, p] of pending) { known.set(user, p); dirty.add(user); }
    pending.clear();
    if (dirty.size === 0) return;
    const next = new Map(view);
    for (const user of dirty) {
      const v = viewOf(user);
      if (v) next.set(user, v); else next.delete(user);
    }
    const changed = Object.freeze([...dirty]);
    dirty.clear();
    view = frozenMap(next);
    if (onFlush) onFlush(view, changed);
  }

  return {
    // Returns true when the update was taken.
    push(p, { force = false } = {}) {
      if (!p || typeof p.user !== 'string') return false;
      const cur = pending.get(p.user) || known.get(p.user);
      const old = !force && cur && typeof p.version === 'number' && typeof cur.version === 'number' &&
          p.version <= cur.version;
      if (old || (cur && same(cur, p))) {
        // Nothing new, but a state from the server is fresh again.
        if (stale.has(p.user)) { stale.delete(p.user); dirty.add(p.user); schedule(); }
        if (!old && cur.version !== p.version) {
          // Same state under another version (a restarted server counts
          // again): keep it as the baseline, without a callback.
          const f = Object.freeze({ ...p });
          if (pending.has(p.user)) pending.set(p.user, f); else known.set(p.user, f);
        }
        return false;
      }
      if (stale.delete(p.user)) dirty.add(p.user);
      pending.set(p.user, Object.freeze({ ...p }));
      schedule();
      return true;
    },
    remove(user) {
      pending.delete(user);
      stale.delete(user);
      if (known.delete(user)) { dirty.add(user); schedule(); }
    },
    // level: 'stale' | 'unknown' for every known user; null clears none
    // (fresh states clear users one by one).
    markAll(level) {
      for (const user of known.keys()) {
        if (stale.get(user) !== level) { stale.set(user, level); dirty.add(user); }
      }
      schedule();
    },
    flush,
    get view() { return view; },
    get(user) { return view.get(user); },
    dispose() { if (timer !== null) t.clearTimeout(timer); timer = null; },
  };
}
