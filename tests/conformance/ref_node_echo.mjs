// Reference echo server for ab-lite calibration: the npm package `ws`
// (resolved from tests/node_modules, pinned in tests/package.json).
//
// Usage: node tests/conformance/ref_node_echo.mjs PORT   (127.0.0.1:PORT)
//
// Every text/binary message is sent back unchanged, with its type. Default
// server options as in ws's own Autobahn runs (no permessage-deflate).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'package.json'));
const { WebSocketServer } = require('ws');
const wsVersion = require('ws/package.json').version;

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: ref_node_echo.mjs PORT');
  process.exit(2);
}

const wss = new WebSocketServer({ host: '127.0.0.1', port, maxPayload: 1 << 20 });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', () => {}); // protocol errors are the point of the exercise
});
wss.on('listening', () => {
  console.log(`ref_node_echo: ws ${wsVersion} listening on 127.0.0.1:${port}`);
});
const stop = () => wss.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
