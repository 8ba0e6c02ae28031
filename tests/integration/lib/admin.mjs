// admin.mjs - the admin API (/v1/admin/...) from tests: one request helper
// that every test file shares, so they agree on headers and bodies.
import assert from 'node:assert/strict';

// method p on srv, with `Authorization: Bearer <key>` (key null: no header;
// auth: that header verbatim instead) and body sent as JSON (a string is
// sent as it is). Resolves {status, text, json (undefined when the body is
// not JSON), headers}.
export async function adminRequest(srv, method, p, { body, key, auth, signal } = {}) {
  const headers = {};
  if (auth !== undefined) headers.Authorization = auth;
  else if (key !== null && key !== undefined) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${srv.url}${p}`, { method, headers, signal,
    body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)) });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, text, json, headers: r.headers };
}

// adminRequest with key that must answer 200; resolves the JSON body.
export async function adminOk(srv, key, method, p, body) {
  const r = await adminRequest(srv, method, p, { body, key });
  assert.equal(r.status, 200, `${method} ${p} ${JSON.stringify(body)?.slice(0, 100)} -> ${r.status} ${r.text}`);
  return r.json;
}
