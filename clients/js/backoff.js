// backoff.js - exponential backoff with full jitter:
// delay = random() * min(cap, base * 2^attempt).
export function createBackoff({ baseMs = 500, capMs = 30000, random = Math.random } = {}) {
  let attempt = 0;
  return {
    next() {
      const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
      attempt++;
      return Math.floor(random() * ceiling);
    },
    reset() { attempt = 0; },
    get attempt() { return attempt; },
  };
}
