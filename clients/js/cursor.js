// cursor.js - cursor publishing: at most `maxPerSecond` (15) messages a
// second, unchanged positions skipped, the last position always delivered.
import { timersFrom } from './timers.js';

function same(a, b) {
  if (a === b) return true;
  if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => a[k] === b[k]);
}

// Viewport fractions (0..1, 4 decimals) from client coordinates.
export function viewportFraction(clientX, clientY, win = globalThis.window) {
  const w = (win && win.innerWidth) || 1, h = (win && win.innerHeight) || 1;
  const r = (v) => Math.round(Math.min(1, Math.max(0, v)) * 10000) / 10000;
  return { x: r(clientX / w), y: r(clientY / h) };
}

export function createCursorPublisher({ send, maxPerSecond = 15, timers } = {}) {
  const t = timersFrom(timers);
  const interval = 1000 / Math.min(15, Math.max(1, maxPerSecond));
  let lastSent; // position last sent
  let hasSent = false;
  let lastAt = -Infinity;
  let pending; let hasPending = false;
  let timer = null;

  function emit(pos) {
    lastSent = pos; hasSent = true; lastAt = t.now();
    send(pos);
  }
  function fire() {
    timer = null;
    if (!hasPending) return;
    const pos = pending; hasPending = false; pending = undefined;
    if (!(hasSent && same(pos, lastSent))) emit(pos);
  }

  return {
    // pos: {x, y} viewport fractions, or {block, offset} for editors; null hides.
    update(pos) {
      if (hasSent && !hasPending && same(pos, lastSent)) return false;
      const wait = lastAt + interval - t.now();
      if (wait <= 0 && timer === null) { hasPending = false; emit(pos); return true; }
      pending = pos; hasPending = true;
      if (timer === null) timer = t.setTimeout(fire, Math.max(0, wait));
      return true;
    },
    stop() { if (timer !== null) t.clearTimeout(timer); timer = null; hasPending = false; },
    reset() { hasSent = false; lastSent = undefined; },
  };
}
