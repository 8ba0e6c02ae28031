// HTTP/1.1 held to RFC 9112 (issue 15, items 5, 6 and 10), over raw
// sockets: Host is required once, the absolute form is served, Expect:
// 100-continue is answered before the body, a 431 says where a large token
// goes, and the demo page's /favicon.ico exists.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopClean } from './lib/server.mjs';
import { connect, parseResponses } from './lib/raw.mjs';

let srv;
before(async () => { srv = await startServer(['--workers', '1']); }); // static-dir = www
after(async () => { await stopClean(srv, assert); });

async function exchange(request) {
  const c = await connect(srv.port);
  await c.write(request);
  const res = parseResponses(await c.untilEnd());
  c.close();
  return res;
}

test('an HTTP/1.1 request without Host, or with two, is 400', async () => {
  for (const head of [
    'GET /healthz HTTP/1.1\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n',
    'GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n',
  ]) {
    const [res] = await exchange(head);
    assert.equal(res.status, 400, head);
    const err = JSON.parse(res.body).error;
    assert.equal(err.code, 'bad_request');
    assert.match(err.message, /Host/);
  }
  // HTTP/1.0 may leave it out.
  const [ok] = await exchange('GET /healthz HTTP/1.0\r\n\r\n');
  assert.equal(ok.status, 200);
});

test('an absolute-form target is served by its path', async () => {
  const [res] = await exchange(`GET http://127.0.0.1:${srv.port}/healthz HTTP/1.1\r\n` +
    `Host: 127.0.0.1:${srv.port}\r\nConnection: close\r\n\r\n`);
  assert.equal(res.status, 200);
  assert.equal(JSON.parse(res.body).status, 'ok');
  const [pres] = await exchange('GET HTTP://example.com/v1/presence?user=nobody HTTP/1.1\r\n' +
    'Host: example.com\r\nConnection: close\r\n\r\n');
  assert.equal(pres.status, 200, pres.body);
  const [root] = await exchange('GET http://example.com HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n');
  assert.equal(root.status, 200); // "/" of the demo page
  assert.match(root.headers['content-type'], /text\/html/);
});

test('Expect: 100-continue is answered before the body is sent', async () => {
  const c = await connect(srv.port);
  await c.write('POST /v1/heartbeat HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n' +
    'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n');
  await c.until((d) => d.includes('\r\n\r\n'));
  assert.equal(c.data.toString('latin1'), 'HTTP/1.1 100 Continue\r\n\r\n');
  await c.write('{}');
  await c.until((d) => parseResponses(d).length === 2);
  const [cont, res] = parseResponses(c.data);
  assert.equal(cont.status, 100);
  assert.equal(res.status, 400); // {} is not a heartbeat; what matters is that it was read
  assert.equal(c.ended, false); // and the connection goes on
  c.close();
});

test('an expectation other than 100-continue is 417', async () => {
  const [res] = await exchange('POST /v1/heartbeat HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n' +
    'Content-Length: 2\r\n\r\n{}');
  assert.equal(res.status, 417);
  assert.equal(JSON.parse(res.body).error.code, 'expectation_failed');
});

test('a token too large for the header block gets 431 naming the auth message', async () => {
  const tok = 'e'.repeat(8200);
  for (const head of [
    `GET /v1/ws?token=${tok} HTTP/1.1\r\nHost: x\r\n\r\n`,
    `GET /v1/presence?user=a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tok}\r\n\r\n`,
  ]) {
    const [res] = await exchange(head);
    assert.equal(res.status, 431);
    const err = JSON.parse(res.body).error;
    assert.equal(err.code, 'headers_too_large');
    assert.match(err.message, /8192 bytes/);
    assert.match(err.message, /"type":"auth"/);
  }
});

test('/favicon.ico is served: the demo page logs no 404', async () => {
  const r = await fetch(`${srv.url}/favicon.ico`);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'image/x-icon');
  const body = Buffer.from(await r.arrayBuffer());
  assert.deepEqual([...body.subarray(0, 4)], [0, 0, 1, 0]); // an ICO header
  const etag = r.headers.get('etag');
  assert.ok(etag);
  const again = await fetch(`${srv.url}/favicon.ico`, { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
});
