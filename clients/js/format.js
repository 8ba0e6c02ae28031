// format.js - last-seen text, in the server's `ago` units
// (seconds < 1 min, minutes < 1 h, today < 24 h, this_week < 7 d,
// this_month < 30 d, this_year < 365 d, long_ago).
const DAY = 24 * 3600 * 1000;

export function ageOf(ms) {
  const s = Math.floor(Math.max(0, ms) / 1000);
  if (s < 60) return { ago: 'seconds', value: s };
  if (s < 3600) return { ago: 'minutes', value: Math.floor(s / 60) };
  if (ms < DAY) return { ago: 'today' };
  if (ms < 7 * DAY) return { ago: 'this_week' };
  if (ms < 30 * DAY) return { ago: 'this_month' };
  if (ms < 365 * DAY) return { ago: 'this_year' };
  return { ago: 'long_ago' };
}

const TEXT = {
  today: 'last seen today',
  this_week: 'last seen this week',
  this_month: 'last seen this month',
  this_year: 'last seen this year',
  long_ago: 'last seen a long time ago',
};

// lastSeen: a presence object ({status, lastSeen}), a server lastSeen object
// ({at, ago, value}), or a timestamp in ms. With `now` and a known `at`, the
// age is recomputed so the text stays current; else the server's `ago` is used.
export function formatLastSeen(lastSeen, now) {
  let ls = lastSeen;
  if (ls && typeof ls === 'object' && 'status' in ls) {
    if (ls.status === 'unknown') return 'status unknown';
    if (ls.status !== 'offline') return 'online';
    ls = ls.lastSeen;
  }
  if (ls === null || ls === undefined) return 'offline';
  if (typeof ls === 'number') ls = { at: ls };
  let age;
  if (typeof ls.at === 'number' && (now !== undefined || !ls.ago)) {
    age = ageOf((now ?? Date.now()) - ls.at);
  } else {
    age = { ago: ls.ago, value: ls.value };
  }
  if (age.ago === 'seconds') return 'last seen just now';
  if (age.ago === 'minutes') {
    const n = age.value ?? 0;
    return n === 1 ? 'last seen 1 minute ago' : `last seen ${n} minutes ago`;
  }
  return TEXT[age.ago] || 'offline';
}
