// metrics.mjs - reading GET /metrics (Prometheus text 0.0.4) and the
// metrics table of docs/api.md, for the tests that hold the two to each
// other (metrics.test.mjs, and tests/cluster/metrics.test.mjs for what
// exists only with `redis` set).
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './server.mjs';

// { types: Map name -> type (from # TYPE), samples: [{ name, labels, value }] }
export function parseMetrics(text) {
  const types = new Map();
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) { types.set(t[1], t[2]); continue; }
    if (line.startsWith('#')) continue;
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = {};
    for (const l of (m[2] || '').matchAll(/([a-z_]+)="([^"]*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { types, samples };
}

export async function scrape(srv, headers = {}) {
  const res = await fetch(`${srv.url}/metrics`, { headers });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

const seriesKey = (labels) => JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'le').sort());

// Checks every histogram of a scrape: each series' buckets come in
// ascending le, never decrease, end with +Inf, and +Inf equals _count;
// _sum is there and not negative. Returns Map "name{labels}" -> _count.
export function checkHistograms(assert, { types, samples }) {
  const counts = new Map();
  for (const [name, type] of types) {
    if (type !== 'histogram') continue;
    const series = new Map();
    for (const s of samples) {
      if (![`${name}_bucket`, `${name}_sum`, `${name}_count`].includes(s.name)) continue;
      const k = seriesKey(s.labels);
      if (!series.has(k)) series.set(k, { buckets: [], labels: s.labels });
      const e = series.get(k);
      if (s.name.endsWith('_bucket')) e.buckets.push([s.labels.le, s.value]);
      else if (s.name.endsWith('_sum')) e.sum = s.value;
      else e.count = s.value;
    }
    assert.ok(series.size > 0, `${name} has no series`);
    for (const e of series.values()) {
      const id = `${name}{${Object.entries(e.labels).filter(([k]) => k !== 'le').map(([k, v]) => `${k}="${v}"`).join(',')}}`;
      assert.ok(e.buckets.length >= 2, `${id}: buckets`);
      assert.equal(e.buckets.at(-1)[0], '+Inf', `${id}: the last bucket is +Inf`);
      for (let i = 1; i < e.buckets.length; i++) {
        const [le0, v0] = e.buckets[i - 1];
        const [le1, v1] = e.buckets[i];
        assert.ok(le1 === '+Inf' || Number(le1) > Number(le0), `${id}: le ascending (${le0}, ${le1})`);
        assert.ok(v1 >= v0, `${id}: bucket le=${le1} (${v1}) below le=${le0} (${v0})`);
      }
      assert.equal(typeof e.count, 'number', `${id}: _count`);
      assert.equal(e.buckets.at(-1)[1], e.count, `${id}: +Inf equals _count`);
      assert.ok(e.sum >= 0, `${id}: _sum`);
      counts.set(id, e.count);
    }
  }
  return counts;
}

// The metric names /metrics declares (its # TYPE lines).
export const servedNames = ({ types }) => new Set(types.keys());

// The metrics table of docs/api.md (the GET /metrics section): Map name ->
// { type, redisOnly }, one row per metric, the name in the first cell.
export function documentedMetrics() {
  const text = fs.readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');
  const start = text.indexOf('### `GET /metrics`');
  const end = text.indexOf('\n### ', start + 1);
  if (start < 0 || end < 0) throw new Error('docs/api.md has no GET /metrics section');
  const out = new Map();
  for (const row of text.slice(start, end).split('\n')) {
    const cells = row.split('|').map((c) => c.trim());
    const m = /^`(presenced_[a-z_]+)(?:\{[^}]*\})?`$/.exec(cells[1] || '');
    if (!m) continue;
    if (out.has(m[1])) throw new Error(`${m[1]} documented twice`);
    out.set(m[1], { type: cells[2], redisOnly: row.includes('(with `redis` set)') });
  }
  return out;
}
