// sse.mjs - reads a Server-Sent Events stream with Node's fetch and parses
// it into {event, id, data} records (data parsed as JSON), so tests can wait
// for the events they expect.
import assert from 'node:assert/strict';

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
