// The Grafana dashboard in contrib/grafana/ is built from the metrics that
// GET /metrics serves: every presenced_* name a panel queries must be one
// the server renders (a HELP line), so a renamed metric fails here, not on
// an operator's empty panel (a histogram's _bucket, _sum and _count series
// count as its name). Also: the file is valid JSON with panels that each
// have a query; every histogram served has a panel, which reads quantiles
// with histogram_quantile over the rate of its _bucket series; and the
// queue-depth and dependency gauges have panels.
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
    const histograms = [...text.matchAll(/^# TYPE (presenced_[a-z_]+) histogram$/gm)].map((m) => m[1]);
    const base = (n) => {
      const h = /^(.*)_(bucket|sum|count)$/.exec(n);
      return h && histograms.includes(h[1]) ? h[1] : n;
    };
    const missing = [...names].filter((n) => !served.has(base(n)));
    assert.deepEqual(missing, [], `queried but not served: ${missing}`);
    const exprs = dash.panels.flatMap((p) => p.targets.map((t) => t.expr));
    assert.ok(histograms.length >= 4, 'the latency histograms are served');
    for (const h of histograms) {
      const q = exprs.filter((e) => e.includes(h));
      assert.ok(q.length > 0, `no panel for ${h}`);
      for (const e of q) assert.match(e, new RegExp(`histogram_quantile\\(0\\.\\d+, sum by \\(le[a-z, ]*\\) \\(rate\\(${h}_bucket\\{`), e);
    }
    for (const g of ['presenced_bus_backlog', 'presenced_output_bytes', 'presenced_store_pending',
      'presenced_webhooks_queued', 'presenced_dependency_up'])
      assert.ok(names.has(g), `no panel for ${g}`);
  } finally {
    await stopClean(srv, assert);
  }
});
