// raw.mjs - a raw TCP client for the tests that must send bytes no
// well-behaved HTTP client would: oversized heads, slow drips, pipelines.
import net from 'node:net';

export function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => resolve(wrap(s)));
    s.once('error', reject);
  });
}

function wrap(s) {
  let data = Buffer.alloc(0);
  let ended = false;
  const waiters = [];
  const wake = () => { for (const w of waiters.splice(0)) w(); };
  s.on('data', (d) => { data = Buffer.concat([data, d]); wake(); });
  s.on('end', () => { ended = true; wake(); });
  s.on('close', () => { ended = true; wake(); });
  s.on('error', () => { ended = true; wake(); });
  return {
    socket: s,
    write(b) { return new Promise((r) => s.write(b, r)); },
    get data() { return data; },
    get ended() { return ended; },
    // Resolves when pred(data) holds or the socket ended; rejects on timeout.
    async until(pred, ms = 5000) {
      const deadline = Date.now() + ms;
      while (!pred(data) && !ended) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timeout; got: ${data.toString('latin1').slice(0, 500)}`);
        await new Promise((r) => { waiters.push(r); setTimeout(r, Math.min(left, 100)); });
      }
      return data;
    },
    async untilEnd(ms = 5000) { await this.until(() => false, ms).catch((e) => { if (!ended) throw e; }); return data; },
    close() { s.destroy(); },
  };
}

// Splits a byte stream of HTTP/1.1 responses with Content-Length bodies.
export function parseResponses(buf) {
  const out = [];
  let off = 0;
  const text = buf.toString('latin1');
  while (off < text.length) {
    const end = text.indexOf('\r\n\r\n', off);
    if (end < 0) break;
    const head = text.slice(off, end);
    const [statusLine, ...lines] = head.split('\r\n');
    const headers = {};
    for (const l of lines) { const i = l.indexOf(':'); headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim(); }
    const len = Number(headers['content-length'] || 0);
    const body = text.slice(end + 4, end + 4 + len);
    if (body.length < len) break;
    out.push({ status: Number(statusLine.split(' ')[1]), headers, body });
    off = end + 4 + len;
  }
  return out;
}
