// HTTP/1.1 behaviour of the real binary: routes, JSON errors, limits,
// keep-alive, pipelining, slowloris, static files. Clients: Node's fetch
// (undici) and raw sockets for what fetch cannot send.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { connect, parseResponses } from './lib/raw.mjs';

let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--http-header-timeout-ms', '700',
    '--http-max-body-bytes', '1024', '--static-dir', 'tests/integration/fixtures/www']);
});
after(async () => { await stopClean(srv, assert); });

test('GET /healthz answers 200 JSON', async () => {
  const r = await fetch(`${srv.url}/healthz`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /application\/json/);
  const body = await r.json();
  assert.equal(body.status, 'ok');
  assert.equal(typeof body.uptime_ms, 'number');
});

test('GET /readyz answers 200 while running', async () => {
  const r = await fetch(`${srv.url}/readyz`);
  assert.equal(r.status, 200);
  assert.equal((await r.json()).status, 'ready');
});

test('GET /metrics is Prometheus text with per-worker samples', async () => {
  await fetch(`${srv.url}/healthz`);
  const r = await fetch(`${srv.url}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const text = await r.text();
  for (const name of ['presenced_conns_accepted_total', 'presenced_conns_ws', 'presenced_frames_in_total',
    'presenced_bytes_out_total', 'presenced_ws_closes_total', 'presenced_output_limit_closes_total',
    'presenced_loop_lag_max_us', 'presenced_http_requests_total']) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
  }
  assert.match(text, /^presenced_http_requests_total\{worker="0"\} \d+$/m);
  assert.match(text, /^presenced_http_requests_total\{worker="1"\} \d+$/m);
  assert.match(text, /^presenced_ws_closes_total\{worker="0",code="1000"\} \d+$/m);
  const total = [...text.matchAll(/^presenced_http_requests_total\{worker="\d"\} (\d+)$/gm)]
    .reduce((a, m) => a + Number(m[1]), 0);
  assert.ok(total >= 2, `requests counted: ${total}`);
});

test('unknown path: 404 with a JSON error body', async () => {
  const r = await fetch(`${srv.url}/v1/nope`);
  assert.equal(r.status, 404);
  const body = await r.json();
  assert.equal(body.error.code, 'not_found');
  assert.equal(typeof body.error.message, 'string');
});

test('wrong method: 405 with Allow and a JSON error body', async () => {
  const r = await fetch(`${srv.url}/healthz`, { method: 'POST', body: 'x' });
  assert.equal(r.status, 405);
  assert.equal(r.headers.get('allow'), 'GET');
  assert.equal((await r.json()).error.code, 'method_not_allowed');
});

test('HEAD has the headers of GET and no body', async () => {
  const c = await connect(srv.port);
  await c.write('HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  const buf = await c.until((d) => (d.toString().match(/HTTP\/1\.1/g) || []).length >= 2 && /\}\n$/.test(d.toString()));
  const text = buf.toString();
  const first = text.slice(0, text.indexOf('HTTP/1.1', 5));
  assert.match(first, /^HTTP\/1\.1 200 /);
  assert.match(first, /Content-Length: [1-9]/);
  assert.ok(first.endsWith('\r\n\r\n'), 'HEAD response carries no body');
  c.close();
});

test('header block over 8 KiB: 431 with a JSON error, then close', async () => {
  const c = await connect(srv.port);
  await c.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`);
  const buf = await c.untilEnd();
  const [res] = parseResponses(buf);
  assert.equal(res.status, 431);
  assert.equal(JSON.parse(res.body).error.code, 'headers_too_large');
});

test('more than 100 headers: 431', async () => {
  const c = await connect(srv.port);
  let req = 'GET /healthz HTTP/1.1\r\nHost: x\r\n';
  for (let i = 0; i < 101; i++) req += `X-H${i}: v\r\n`;
  await c.write(req + '\r\n');
  const [res] = parseResponses(await c.untilEnd());
  assert.equal(res.status, 431);
});

test('exactly 100 headers are accepted', async () => {
  const c = await connect(srv.port);
  let req = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n';
  for (let i = 0; i < 98; i++) req += `X-H${i}: v\r\n`;
  await c.write(req + '\r\n');
  const [res] = parseResponses(await c.untilEnd());
  assert.equal(res.status, 200);
});

test('body over http-max-body-bytes: 413 before the body is sent', async () => {
  const c = await connect(srv.port);
  await c.write('POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n');
  const [res] = parseResponses(await c.untilEnd());
  assert.equal(res.status, 413);
  assert.equal(JSON.parse(res.body).error.code, 'payload_too_large');
});

test('malformed request: 400 JSON', async () => {
  const c = await connect(srv.port);
  await c.write('GARBAGE\x01\x02 / HTTP/1.1\r\n\r\n');
  const [res] = parseResponses(await c.untilEnd());
  assert.equal(res.status, 400);
  assert.equal(JSON.parse(res.body).error.code, 'bad_request');
});

test('keep-alive: several requests on one connection', async () => {
  const c = await connect(srv.port);
  for (let i = 1; i <= 3; i++) {
    await c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await c.until((d) => parseResponses(d).length === i);
  }
  assert.equal(c.ended, false);
  c.close();
});

test('pipelined requests are answered in order', async () => {
  const c = await connect(srv.port);
  await c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n' +
    'GET /readyz HTTP/1.1\r\nHost: x\r\n\r\nPOST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi' +
    'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  const res = parseResponses(await c.untilEnd());
  assert.deepEqual(res.map((r) => r.status), [200, 404, 200, 405, 200]);
  assert.equal(res[4].headers.connection, 'close');
});

test('slowloris: incomplete headers are cut off after the header timeout', async () => {
  const c = await connect(srv.port);
  const t0 = Date.now();
  await c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
  // Keep dripping bytes: they must not extend the deadline.
  const drip = setInterval(() => { c.socket.write('X'); }, 100);
  const buf = await c.untilEnd(5000);
  clearInterval(drip);
  const elapsed = Date.now() - t0;
  assert.ok(elapsed >= 600 && elapsed < 3000, `closed after ${elapsed} ms`);
  const [res] = parseResponses(buf);
  assert.equal(res.status, 408);
});

test('a silent connection is closed after the header timeout', async () => {
  const c = await connect(srv.port);
  const t0 = Date.now();
  await c.untilEnd(5000);
  assert.ok(Date.now() - t0 >= 600);
});

test('a client sending garbage does not disturb another client', async () => {
  const bad = await connect(srv.port);
  const good = await connect(srv.port);
  await good.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await bad.write(Buffer.from([0, 1, 2, 3, 255, 254, 13, 10, 13, 10]));
  await good.until((d) => parseResponses(d).length === 1);
  await good.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await good.until((d) => parseResponses(d).length === 2);
  assert.equal(parseResponses(await bad.untilEnd())[0].status, 400);
  good.close();
});

test('static files: content type, ETag and 304', async () => {
  const r = await fetch(`${srv.url}/`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/html/);
  const etag = r.headers.get('etag');
  assert.ok(etag);
  assert.match(await r.text(), /fixture page/);
  const r2 = await fetch(`${srv.url}/index.html`, { headers: { 'If-None-Match': etag } });
  assert.equal(r2.status, 304);
  assert.equal(r2.headers.get('content-length'), null, 'no Content-Length on 304');
  assert.equal(r2.headers.get('etag'), etag);
  assert.equal(await r2.text(), '');
  const css = await fetch(`${srv.url}/a.css`);
  assert.match(css.headers.get('content-type'), /^text\/css/);
  const js = await fetch(`${srv.url}/m.js`);
  assert.match(js.headers.get('content-type'), /javascript/);
});

test('static files: no path traversal', async () => {
  for (const p of ['/../README.md', '/..%2fREADME.md', '/%2e%2e/README.md', '/a/../../README.md',
    '/%2e%2e%2f%2e%2e%2fetc%2fpasswd', '/..\\README.md', '/index.html%00.css']) {
    const c = await connect(srv.port);
    await c.write(`GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const [res] = parseResponses(await c.untilEnd());
    assert.ok(res.status === 404 || res.status === 400, `${p} -> ${res.status}`);
    assert.doesNotMatch(res.body, /presenced|root:/);
  }
});
