// sse.mjs - reads a Server-Sent Events stream with Node's fetch and parses
// it into {event, id, data} records (data parsed as JSON), so tests can wait
// for the events they expect.
import assert from 'node:assert/strict';
import { MULT } from './server.mjs';

export async function openSse(url, headers = {}) {
  const ctrl = new AbortController();
  const r = await fetch(url, { headers, signal: ctrl.signal });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const reader = r.body.getReader();
  const events = [];
  let text = '';
  return {
    events,
    // Reads until pred(events) holds or 5 s pass; returns events.
    async until(pred) {
      const deadline = Date.now() + 5000;
      while (!pred(events) && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
        const blocks = text.split('\n\n');
        text = blocks.pop();
        for (const b of blocks) {
          const ev = /^event: (.*)$/m.exec(b);
          const id = /^id: (.*)$/m.exec(b);
          const data = /^data: (.*)$/m.exec(b);
          if (data) events.push({ event: ev && ev[1], id: id && id[1], data: JSON.parse(data[1]) });
        }
      }
      return events;
    },
    close() { ctrl.abort(); },
  };
}

// An SSE reader that keeps reading in the background: resolves {status,
// events ({event, id, raw, data}), blocks (the raw event texts), ended,
// close(), until(pred, ms)}; until() has a real deadline even when the
// stream is silent. A non-200 answer resolves at once with its body.
export async function streamSse(url) {
  const ctrl = new AbortController();
  const r = await fetch(url, { signal: ctrl.signal });
  const s = { status: r.status, events: [], blocks: [], ended: false, close: () => ctrl.abort() };
  if (r.status !== 200) { s.body = await r.text(); return s; }
  const waiters = [];
  (async () => {
    let text = '';
    try {
      for await (const chunk of r.body) {
        text += Buffer.from(chunk).toString();
        let i;
        while ((i = text.indexOf('\n\n')) >= 0) {
          const b = text.slice(0, i);
          text = text.slice(i + 2);
          const data = b.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
          if (!data.length) continue;
          s.blocks.push(b);
          const ev = /^event: (.*)$/m.exec(b);
          const id = /^id: (.*)$/m.exec(b);
          s.events.push({ event: ev && ev[1], id: id && id[1], raw: data.join('\n'), data: JSON.parse(data.join('\n')) });
          for (const w of waiters.splice(0)) w();
        }
      }
    } catch { /* aborted */ }
    s.ended = true;
    for (const w of waiters.splice(0)) w();
  })();
  s.until = async (pred, ms = 5000) => {
    const deadline = Date.now() + ms * MULT;
    while (!pred(s.events)) {
      const left = deadline - Date.now();
      if (left <= 0 || s.ended) throw new Error(`sse: no matching event; got ${JSON.stringify(s.events.map((e) => e.data)).slice(0, 800)}`);
      await new Promise((res) => { waiters.push(res); setTimeout(res, Math.min(left, 50)); });
    }
    return s.events;
  };
  return s;
}
