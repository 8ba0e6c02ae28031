// client.mjs - a small test client for the native protocol on /v1/ws,
// built on Node's `ws`: collects every message and waits for the ones a
// test expects, with a deadline.
import WebSocket from 'ws';
import { once } from 'node:events';

export class Client {
  static async open(srv, { user, device, resume, path = '/v1/ws' } = {}) {
    const q = new URLSearchParams();
    if (user) q.set('user', user);
    if (device) q.set('device', device);
    if (resume) q.set('resume', resume);
    const c = new Client(new WebSocket(`${srv.wsUrl}${path}?${q}`));
    await once(c.ws, 'open');
    c.welcome = await c.next((m) => m.type === 'welcome' || m.type === 'error');
    return c;
  }

  constructor(ws) {
    this.ws = ws;
    this.msgs = [];
    this.seen = [];
    this.waiters = [];
    this.closed = new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      this.msgs.push(m);
      this.seen.push(m);
      for (const w of this.waiters.splice(0)) w();
    });
  }

  send(obj) { this.ws.send(JSON.stringify(obj)); }

  // Resolves with (and removes) the first queued message matching pred.
  async next(pred = () => true, ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = this.msgs.findIndex(pred);
      if (i >= 0) return this.msgs.splice(i, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching message; queued: ${JSON.stringify(this.msgs).slice(0, 800)}`);
      await new Promise((r) => { this.waiters.push(r); setTimeout(r, Math.min(left, 50)); });
    }
  }

  // The next presence message about user.
  presenceOf(user, ms) {
    return this.next((m) => m.type === 'presence' && m.presence.user === user, ms).then((m) => m.presence);
  }

  // Presence messages about user queued now (removed from the queue).
  drainPresence(user) {
    const out = this.msgs.filter((m) => m.type === 'presence' && m.presence.user === user);
    this.msgs = this.msgs.filter((m) => !(m.type === 'presence' && m.presence.user === user));
    return out.map((m) => m.presence);
  }

  close(code = 1000) { this.ws.close(code); return this.closed; }
  kill() { this.ws._socket.destroy(); return this.closed; }
}
