// index.d.ts against the code, without a TypeScript compiler: every runtime
// export of index.js and react.js is declared and every declared value
// exists; the members of the Client and Room interfaces match the objects
// that createClient() and client.join() return; the declaration file's
// brackets balance and package.json points at it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fakeSockets } from './_fakews.mjs';
import * as sdk from '../index.js';
import * as react from '../react.js';

const here = new URL('..', import.meta.url);
const dts = fs.readFileSync(new URL('index.d.ts', here), 'utf8');
const code = dts.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');

function declaredValues() {
  const out = new Set();
  for (const m of code.matchAll(/^export\s+(?:declare\s+)?(?:function|const|let|class)\s+([A-Za-z_$][\w$]*)/gm)) out.add(m[1]);
  return out;
}
function body(name) {
  const start = code.search(new RegExp(`export\\s+interface\\s+${name}\\b[^{]*\\{`));
  assert.ok(start >= 0, `interface ${name} is declared`);
  let i = code.indexOf('{', start), depth = 0, j = i;
  for (; j < code.length; j++) { if (code[j] === '{') depth++; else if (code[j] === '}' && --depth === 0) break; }
  return code.slice(i + 1, j);
}
function members(name) {
  // Top-level members only: text inside nested {} () [] is skipped.
  const out = new Set();
  let depth = 0, line = '';
  for (const ch of body(name)) {
    if ('{(['.includes(ch)) depth++;
    if (depth === 0 && (ch === ';' || ch === '\n')) {
      const m = /^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[:(<]/.exec(line);
      if (m) out.add(m[1]);
      line = '';
    } else line += ch;
    if ('})]'.includes(ch)) depth--;
  }
  return out;
}

test('index.d.ts: brackets balance', () => {
  for (const [o, c] of [['{', '}'], ['(', ')'], ['[', ']']]) {
    assert.equal(code.split(o).length, code.split(c).length, `${o}${c} balance`);
  }
});

test('index.d.ts declares every runtime export of index.js and react.js, and nothing more', () => {
  const declared = declaredValues();
  const runtime = new Set([...Object.keys(sdk), ...Object.keys(react)]);
  for (const name of runtime) assert.ok(declared.has(name), `export ${name} is declared in index.d.ts`);
  for (const name of declared) assert.ok(runtime.has(name), `declared ${name} exists at run time`);
  for (const name of Object.keys(sdk)) {
    const kind = typeof sdk[name];
    const m = new RegExp(`^export\\s+(function|const|class)\\s+${name}\\b`, 'm').exec(code);
    if (kind === 'function' && /^[A-Z]/.test(name)) assert.equal(m[1], 'class', name);
    else if (kind === 'function') assert.equal(m[1], 'function', name);
    else assert.equal(m[1], 'const', name);
  }
  const pkg = JSON.parse(fs.readFileSync(new URL('package.json', here), 'utf8'));
  assert.equal(pkg.types, './index.d.ts');
  for (const e of Object.values(pkg.exports)) {
    assert.equal(e.types, './index.d.ts');
    assert.ok(fs.existsSync(new URL(e.default, here)), e.default);
  }
});

test('the Client and Room interfaces match the objects at run time', () => {
  const { FakeWS } = fakeSockets();
  const client = sdk.createClient({ url: 'http://h:1', user: 'u', WebSocket: FakeWS, window: null, document: null, navigator: null });
  const room = client.join('r');
  for (const [name, obj] of [['Client', client], ['Room', room]]) {
    const declared = members(name);
    const actual = new Set(Object.keys(obj).filter((k) => !k.startsWith('_')));
    for (const k of actual) assert.ok(declared.has(k), `${name}.${k} is declared in index.d.ts`);
    for (const k of declared) assert.ok(actual.has(k), `${name}.${k} (declared) exists at run time`);
  }
  for (const k of ['setPrivacy', 'privacy', 'onPrivacy']) assert.ok(members('Client').has(k));
  assert.match(body('Presence'), /version\?: number/, 'version is optional (others carry none)');
  assert.match(body('Privacy'), /online: Visibility[\s\S]*lastSeen: Visibility[\s\S]*invisible: boolean/);
  client.close();
});
