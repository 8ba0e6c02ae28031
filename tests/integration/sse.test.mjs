// Server-Sent Events on the test stream: headers, retry, event ids,
// Last-Event-ID resume (header and query), keep-alive comments.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { connect } from './lib/raw.mjs';

let srv;
before(async () => { srv = await startServer(['--workers', '1', '--sse-keepalive-ms', '300', '--sse-retry-ms', '1500']); });
after(async () => { await stopClean(srv, assert); });

async function readEvents(path, headers = {}, wantComment = false) {
  const ctrl = new AbortController();
  const r = await fetch(`${srv.url}${path}`, { headers, signal: ctrl.signal });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  const reader = r.body.getReader();
  let text = '';
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    const events = text.split('\n\n').filter((b) => /^id: /m.test(b));
    if (events.length >= 3 && (!wantComment || /^:\s*$/m.test(text))) break;
  }
  ctrl.abort();
  return text;
}

test('stream starts with retry and carries event ids', async () => {
  const text = await readEvents('/test/sse');
  assert.match(text, /^retry: 1500\n\n/);
  assert.match(text, /id: 1\nevent: tick\ndata: \{"n":1\}\n\n/);
  assert.match(text, /id: 3\nevent: tick\ndata: \{"n":3\}\n\n/);
});

test('Last-Event-ID header resumes after the given id', async () => {
  const text = await readEvents('/test/sse', { 'Last-Event-ID': '41' });
  assert.match(text, /id: 42\n/);
  assert.doesNotMatch(text, /id: 41\n/);
});

test('lastEventId query parameter works for clients without headers', async () => {
  const text = await readEvents('/test/sse?lastEventId=7');
  assert.match(text, /id: 8\n/);
});

test('keep-alive comments arrive on an idle stream', async () => {
  const text = await readEvents('/test/sse', {}, true);
  assert.match(text, /^:\s*$/m);
});

test('raw client: stream stays open without Content-Length', async () => {
  const c = await connect(srv.port);
  await c.write('GET /test/sse HTTP/1.1\r\nHost: x\r\n\r\n');
  const buf = await c.until((d) => d.includes('id: 3'));
  assert.doesNotMatch(buf.toString(), /Content-Length/i);
  assert.equal(c.ended, false);
  c.close();
});
