// A fake WebSocket for client tests (not a test file): records what the
// client sends, lets the test deliver server messages and closes.
export function fakeSockets() {
  const sockets = [];
  class FakeWS {
    constructor(url, protocols) {
      this.url = url; this.protocols = protocols; this.readyState = 1; this.sent = []; this.closed = null;
      sockets.push(this);
      queueMicrotask(() => this.onopen && this.onopen());
    }
    send(s) { this.sent.push(JSON.parse(s)); }
    close(code = 1005) { if (this.closed) return; this.closed = code; this.readyState = 3; queueMicrotask(() => this.onclose && this.onclose({ code })); }
    recv(m) { this.onmessage({ data: JSON.stringify(m) }); }
    drop(code = 1006) { this.readyState = 3; this.onclose({ code }); }
    last(type) { return this.sent.filter((m) => m.type === type).at(-1); }
  }
  return { FakeWS, sockets };
}
export const tick = () => new Promise((r) => setImmediate(r));
