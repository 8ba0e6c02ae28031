// The Grafana dashboard in contrib/grafana/ is built from the metrics that
// GET /metrics serves: every presenced_* name a panel queries must be one
// the server renders (a HELP line), so a renamed metric fails here, not on
// an operator's empty panel. Also: the file is valid JSON with panels that
// each have a query.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, stopClean, ROOT } from './lib/server.mjs';

test('every metric the dashboard queries is served by /metrics', async () => {
  const dash = JSON.parse(fs.readFileSync(path.join(ROOT, 'contrib/grafana/presenced.json'), 'utf8'));
  assert.ok(dash.panels.length >= 8);
  const names = new Set();
  for (const p of dash.panels) {
    assert.ok(p.targets?.length > 0, `panel ${p.title} has no query`);
    for (const t of p.targets) for (const m of t.expr.matchAll(/presenced_[a-z_]+/g)) names.add(m[0]);
  }
  const srv = await startServer([]);
  try {
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    const served = new Set([...text.matchAll(/^# HELP (presenced_[a-z_]+)/gm)].map((m) => m[1]));
    const missing = [...names].filter((n) => !served.has(n));
    assert.deepEqual(missing, [], `queried but not served: ${missing}`);
  } finally {
    await stopClean(srv, assert);
  }
});
