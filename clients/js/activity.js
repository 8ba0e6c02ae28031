// activity.js - passive input listeners -> active/idle. One timer, re-armed
// lazily: input only records a time, so mousemove costs a comparison.
import { timersFrom } from './timers.js';

export const ACTIVITY_EVENTS = Object.freeze(['mousemove', 'keydown', 'click', 'scroll', 'touchstart']);

export function createActivityTracker({ target, idleMs = 5 * 60 * 1000, timers, onChange } = {}) {
  const t = timersFrom(timers);
  let active = true;
  let last = t.now();
  let timer = null;
  let stopped = false;

  function arm(ms) {
    if (timer !== null) t.clearTimeout(timer);
    timer = t.setTimeout(check, ms);
  }
  function check() {
    timer = null;
    if (stopped) return;
    const quiet = t.now() - last;
    if (quiet >= idleMs) {
      if (active) { active = false; if (onChange) onChange(false); }
    } else {
      arm(idleMs - quiet);
    }
  }
  function input() {
    if (stopped) return;
    last = t.now();
    if (!active) {
      active = true;
      if (onChange) onChange(true);
    }
    if (timer === null) arm(idleMs);
  }

  const opts = { passive: true, capture: true };
  if (target && typeof target.addEventListener === 'function') {
    for (const ev of ACTIVITY_EVENTS) target.addEventListener(ev, input, opts);
  }
  arm(idleMs);

  return {
    get active() { return active; },
    input, // for custom signals (e.g. a video that is playing)
    stop() {
      stopped = true;
      if (timer !== null) t.clearTimeout(timer);
      timer = null;
      if (target && typeof target.removeEventListener === 'function') {
        for (const ev of ACTIVITY_EVENTS) target.removeEventListener(ev, input, opts);
      }
    },
  };
}
