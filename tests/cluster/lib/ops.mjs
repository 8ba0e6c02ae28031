// ops.mjs - what an operator's tooling reads from a node: /readyz (status
// and body) and single samples of /metrics (Prometheus text); control of
// the suite's PostgreSQL; free ports and process checks for the tests of
// scripts/run-cluster.sh.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ROOT } from '../../integration/lib/server.mjs';

export async function readyz(node) {
  const r = await fetch(`${node.url}/readyz`);
  return { status: r.status, json: await r.json() };
}

// The value of the sample `name{labels}` (labels as written between the
// braces, e.g. 'dependency="redis"'; '' for none), or undefined.
export async function metric(node, name, labels = '') {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const want = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(want));
  return line === undefined ? undefined : Number(line.slice(want.length));
}

// The suite's PostgreSQL (tests/cluster/run.sh exports PGRUN and PGPORT):
// stop it (an outage, data kept) or start it again on the same port.
export const canControlPg = Boolean(process.env.PGRUN && process.env.PGPORT);
export function pgctl(what) {
  execFileSync(path.join(ROOT, 'tests/pg/cluster.sh'), [what], { stdio: 'ignore' });
}

// A loopback port nobody listens on now (20000-59999).
export async function freePort() {
  for (let i = 0; i < 100; i++) {
    const p = 20000 + Math.floor(Math.random() * 40000);
    const ok = await new Promise((res) => {
      const s = net.createServer().once('error', () => res(false)).listen(p, '127.0.0.1', () => s.close(() => res(true)));
    });
    if (ok) return p;
  }
  throw new Error('no free port');
}

// Whether process pid is gone (a zombie nobody reaped yet counts as gone).
export function isGone(pid) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return /^State:\s+Z/m.test(st);
  } catch {
    return true;
  }
}
