// timers.js - the clock the SDK uses; tests inject a fake one.
export const realTimers = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(h),
  now: () => Date.now(),
};

export function timersFrom(t) {
  if (!t) return realTimers;
  return {
    setTimeout: t.setTimeout || realTimers.setTimeout,
    clearTimeout: t.clearTimeout || realTimers.clearTimeout,
    now: t.now || realTimers.now,
  };
}
