// A fake clock for the SDK's injectable timers (not a test file).
export function fakeClock(start = 1_000_000) {
  let now = start, id = 0;
  const q = new Map();
  return {
    now: () => now,
    setTimeout(fn, ms) { const h = ++id; q.set(h, { at: now + Math.max(0, ms || 0), fn }); return h; },
    clearTimeout(h) { q.delete(h); },
    advance(ms) {
      const end = now + ms;
      for (;;) {
        let best = null;
        for (const [h, e] of q) if (e.at <= end && (!best || e.at < best[1].at)) best = [h, e];
        if (!best) break;
        q.delete(best[0]); now = best[1].at; best[1].fn();
      }
      now = end;
    },
    pending: () => q.size,
  };
}
