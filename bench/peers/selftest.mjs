#!/usr/bin/env node
// selftest.mjs - checks bench/peers/socketio-presence.mjs end to end.
//
//   node bench/peers/selftest.mjs [--transcript]
//
// Starts the server with a short TTL, grace and ping interval, drives it with
// socket.io-client (join acks, member_joined, member_meta, cursors to others
// only, merged presence transitions, heartbeat TTL expiry, reconnect grace,
// auth rejection) and with a raw WebSocket (npm `ws`) speaking the wire
// format the C load generator uses. Exit 0 when every check passes, 1 if not.
// --transcript prints the raw session's frames (the README's transcript).

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { io as ioc } from "socket.io-client";
import WebSocket from "ws";

const here = dirname(fileURLToPath(import.meta.url));
const TTL_MS = 1000;
const GRACE_MS = 600;
const PING_INTERVAL_MS = 400;
const PING_TIMEOUT_MS = 400;
const showTranscript = process.argv.includes("--transcript");

let failures = 0;
let passes = 0;
function ok(cond, what) {
  if (cond) {
    passes++;
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}`);
  }
}
function eq(a, b, what) {
  const same = JSON.stringify(a) === JSON.stringify(b);
  ok(same, same ? what : `${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- server -----------------------------------------------------------------

function startServer() {
  const child = spawn(
    process.execPath,
    [
      join(here, "socketio-presence.mjs"),
      "--port", "0",
      "--ttl-ms", String(TTL_MS),
      "--grace-ms", String(GRACE_MS),
      "--ping-interval-ms", String(PING_INTERVAL_MS),
      "--ping-timeout-ms", String(PING_TIMEOUT_MS),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const lines = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start in 5 s")), 5000);
    child.on("exit", (code) => reject(new Error(`server exited early (${code})`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      lines.push(line);
      const m = /^listening on (\d+)$/.exec(line);
      if (m && lines.length === 1) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), lines });
      }
    });
  });
}

// ---- socket.io-client helpers -----------------------------------------------

// A client that records every event it receives, so a check can wait for
// one or assert that none came.
function client(port, auth, { heartbeatMs = 250 } = {}) {
  const sock = ioc(`http://127.0.0.1:${port}`, {
    path: "/socket.io/",
    transports: ["websocket"],
    auth,
    reconnection: false,
    forceNew: true,
  });
  sock.log = [];
  sock.onAny((event, ...args) => sock.log.push({ event, args }));
  if (heartbeatMs > 0) {
    sock.hb = setInterval(() => sock.connected && sock.emit("heartbeat"), heartbeatMs);
  }
  sock.on("disconnect", () => clearInterval(sock.hb));
  return sock;
}

function connected(sock) {
  return new Promise((resolve, reject) => {
    if (sock.connected) return resolve();
    sock.once("connect", resolve);
    sock.once("connect_error", reject);
  });
}

// Resolves with the args of the first `event` (after `from` in the log)
// matching `pred`, or rejects after `ms`.
function waitFor(sock, event, pred = () => true, ms = 2000, from = 0) {
  return new Promise((resolve, reject) => {
    const check = () => {
      for (let i = from; i < sock.log.length; i++) {
        const e = sock.log[i];
        if (e.event === event && pred(...e.args)) return e.args;
      }
      return null;
    };
    const found = check();
    if (found) return resolve(found);
    const started = Date.now();
    const poll = setInterval(() => {
      const f = check();
      if (f) {
        clearInterval(poll);
        resolve(f);
      } else if (Date.now() - started > ms) {
        clearInterval(poll);
        reject(new Error(`${event} not received in ${ms} ms`));
      }
    }, 5);
  });
}

async function got(sock, event, pred, ms, what) {
  try {
    const args = await waitFor(sock, event, pred, ms);
    ok(true, what);
    return args;
  } catch (e) {
    ok(false, `${what}: ${e.message}`);
    return null;
  }
}

const count = (sock, event, pred = () => true) =>
  sock.log.filter((e) => e.event === event && pred(...e.args)).length;

const join_ = (sock, room) => sock.timeout(2000).emitWithAck("join", room);

// ---- the checks ----------------------------------------------------------------

async function socketioChecks(port) {
  // Auth: no user -> connect_error.
  {
    const bad = ioc(`http://127.0.0.1:${port}`, {
      transports: ["websocket"], auth: { device: "x" }, reconnection: false, forceNew: true,
    });
    const err = await new Promise((resolve) => {
      bad.once("connect", () => resolve(null));
      bad.once("connect_error", (e) => resolve(e));
    });
    ok(err && err.message === "unauthorized", "connect without user is refused (connect_error unauthorized)");
    bad.close();
  }

  const a = client(port, { user: "u1", device: "d1" });
  const b = client(port, { user: "u2", device: "d1" });
  const c = client(port, { user: "u3", device: "d1" });
  await Promise.all([connected(a), connected(b), connected(c)]);
  ok(true, "three clients connected over websocket");

  eq(await join_(a, "r"), ["u1"], "join ack for the first member");
  eq((await join_(b, "r")).sort(), ["u1", "u2"], "join ack lists both members");
  await got(a, "member_joined", (m) => m.user === "u2" && m.room === "r", 1000, "member_joined u2 reaches u1");
  eq((await join_(c, "r")).sort(), ["u1", "u2", "u3"], "join ack lists three members");
  await got(a, "member_joined", (m) => m.user === "u3", 1000, "member_joined u3 reaches u1");
  await got(b, "member_joined", (m) => m.user === "u3", 1000, "member_joined u3 reaches u2");
  await sleep(50);
  eq(count(c, "member_joined", (m) => m.user === "u3"), 0, "the joiner does not get its own member_joined");

  // A second socket of u1: still one member, nobody told.
  const a2 = client(port, { user: "u1", device: "d2" });
  await connected(a2);
  eq((await join_(a2, "r")).sort(), ["u1", "u2", "u3"], "second socket of a user: one member in the ack");
  await sleep(100);
  eq(count(b, "member_joined", (m) => m.user === "u1"), 0, "second socket of a user: no member_joined");

  // meta: the whole room, sender included.
  a.emit("meta", { room: "r", meta: { typing: true }, t: 111, id: 1 });
  const want = { user: "u1", room: "r", meta: { typing: true }, t: 111, id: 1 };
  for (const [s, n] of [[a, "u1 (sender)"], [a2, "u1's other socket"], [b, "u2"], [c, "u3"]]) {
    const m = await got(s, "member_meta", (x) => x.id === 1, 1000, `member_meta reaches ${n}`);
    if (m) eq(m[0], want, `member_meta payload at ${n}`);
  }

  // cursor: others only.
  b.emit("cursor", { room: "r", x: 10, y: 20, t: 222, id: 2 });
  const cur = await got(a, "cursor", (x) => x.id === 2, 1000, "cursor reaches u1");
  if (cur) eq(cur[0], { user: "u2", room: "r", x: 10, y: 20, t: 222, id: 2 }, "cursor payload");
  await got(c, "cursor", (x) => x.id === 2, 1000, "cursor reaches u3");
  await sleep(100);
  eq(count(b, "cursor"), 0, "cursor does not come back to its sender");
  // A cursor for a room the sender is not in goes nowhere.
  c.emit("cursor", { room: "elsewhere", x: 1, y: 1, t: 1, id: 3 });

  // status: merged across u1's sockets, most-available wins
  // (online > busy > away > dnd); presence only on a transition.
  a.emit("status", { status: "away", t: 301, id: 301 }); // a2 still online
  await sleep(150);
  eq(count(b, "presence"), 0, "away on one socket while another is online: no transition");
  a2.emit("status", { status: "dnd", t: 302, id: 302 }); // away > dnd -> away
  const p1 = await got(b, "presence", (p) => p.id === 302, 1000, "presence transition reaches u2");
  if (p1) eq(p1[0], { user: "u1", status: "away", t: 302, id: 302 }, "merged status is away (away > dnd)");
  await got(c, "presence", (p) => p.id === 302, 1000, "presence transition reaches u3");
  await got(a, "presence", (p) => p.id === 302, 1000, "presence transition reaches u1's own sockets too");
  a.emit("status", { status: "busy", t: 303, id: 303 }); // busy > dnd -> busy
  const p2 = await got(b, "presence", (p) => p.id === 303, 1000, "second transition");
  if (p2) eq(p2[0].status, "busy", "merged status is busy (busy > dnd)");
  a.emit("status", { status: "busy", t: 304, id: 304 });
  await sleep(100);
  eq(count(b, "presence", (p) => p.id === 304), 0, "same merged status again: no presence");
  eq(count(c, "cursor", (x) => x.id === 3), 0, "cursor for a room the sender is not in is dropped");

  // leave: u1 keeps one socket in the room -> no member_left; then the last.
  a2.emit("leave", "r");
  await sleep(100);
  eq(count(b, "member_left"), 0, "leave of one of two sockets: no member_left");
  a.emit("leave", "r");
  await got(b, "member_left", (m) => m.user === "u1" && m.room === "r", 1000, "leave of the last socket: member_left");
  eq((await join_(a, "r")).sort(), ["u1", "u2", "u3"], "rejoin");
  await got(b, "member_joined", (m) => m.user === "u1", 1000, "member_joined after a real leave");

  // Grace: u3 drops and comes back within the grace -> nothing seen.
  const leftBefore = count(a, "member_left");
  c.close();
  await sleep(GRACE_MS / 3);
  const c2 = client(port, { user: "u3", device: "d1" });
  await connected(c2);
  eq((await join_(c2, "r")).sort(), ["u1", "u2", "u3"], "reconnect within grace: rejoin ack");
  await sleep(GRACE_MS + 200);
  eq(count(a, "member_left") - leftBefore, 0, "reconnect within grace: no member_left");
  eq(count(a, "member_joined", (m) => m.user === "u3"), 1, "reconnect within grace: no second member_joined");

  // Grace runs out: member_left about grace-ms after the drop.
  const t0 = Date.now();
  c2.close();
  const gone = await got(a, "member_left", (m) => m.user === "u3", GRACE_MS + 1000, "drop without reconnect: member_left");
  if (gone) {
    const dt = Date.now() - t0;
    ok(dt >= GRACE_MS - 20 && dt < GRACE_MS + 300, `member_left after the grace (${dt} ms, grace ${GRACE_MS} ms)`);
  }

  // TTL: a client that never heartbeats is ended after ttl-ms, and leaves at
  // once (no grace); heartbeating clients survive well past the TTL.
  const d = client(port, { user: "u4", device: "d1" }, { heartbeatMs: 0 });
  await connected(d);
  const t1 = Date.now();
  await join_(d, "r");
  const ended = await got(d, "session_ended", (e) => e.reason === "ttl", TTL_MS + 1000, "no heartbeat: session_ended ttl");
  const dropped = await new Promise((resolve) => {
    if (!d.connected) return resolve("already");
    d.once("disconnect", (reason) => resolve(reason));
  });
  ok(dropped === "io server disconnect" || dropped === "already", `no heartbeat: disconnected by the server (${dropped})`);
  const left = await got(a, "member_left", (m) => m.user === "u4", 500, "TTL expiry: member_left without waiting for the grace");
  if (ended && left) {
    const dt = Date.now() - t1;
    ok(dt >= TTL_MS - 20 && dt < TTL_MS + 400, `TTL expiry detected in ${dt} ms (ttl ${TTL_MS} ms)`);
  }
  ok(a.connected && b.connected && a2.connected, "heartbeating clients are still connected after the TTL");

  for (const s of [a, a2, b, d]) s.close();
}

// The wire format, spoken directly (what the C load generator does).
async function rawCheck(port) {
  const transcript = [];
  const url = `ws://127.0.0.1:${port}/socket.io/?EIO=4&transport=websocket`;
  const peer = client(port, { user: "w2", device: "d1" });
  await connected(peer);
  await join_(peer, "raw");

  const ws = new WebSocket(url, { perMessageDeflate: false });
  const inbox = [];
  let waiter = null;
  ws.on("message", (data) => {
    const s = data.toString();
    transcript.push(`S: ${s}`);
    if (s === "2") {
      // Engine.IO ping from the server: answer with a pong.
      ws.send("3");
      transcript.push("C: 3");
    }
    inbox.push(s);
    if (waiter) waiter();
  });
  const send = (s) => {
    transcript.push(`C: ${s}`);
    ws.send(s);
  };
  const next = (pred, ms = 2000) =>
    new Promise((resolve, reject) => {
      const finish = (fn, v) => {
        clearTimeout(timer);
        waiter = null;
        fn(v);
      };
      const look = () => {
        const i = inbox.findIndex(pred);
        if (i >= 0) finish(resolve, inbox.splice(i, 1)[0]);
      };
      const timer = setTimeout(() => finish(reject, new Error("timed out")), ms);
      waiter = look;
      look();
    });
  const expect = async (pred, what, ms) => {
    try {
      const s = await next(pred, ms);
      ok(true, what);
      return s;
    } catch {
      ok(false, `${what}: not received (inbox ${JSON.stringify(inbox)})`);
      return null;
    }
  };

  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  transcript.unshift(`C: GET /socket.io/?EIO=4&transport=websocket (WebSocket upgrade, no permessage-deflate)`);

  const open = await expect((s) => s.startsWith("0{"), "raw: Engine.IO open packet 0{...}");
  if (open) {
    const o = JSON.parse(open.slice(1));
    ok(typeof o.sid === "string" && o.pingInterval === PING_INTERVAL_MS && o.pingTimeout === PING_TIMEOUT_MS,
      "raw: open packet carries sid, pingInterval, pingTimeout");
  }
  send('40{"user":"w1","device":"d1"}');
  const conn = await expect((s) => s.startsWith("40{"), "raw: CONNECT answered 40{\"sid\":...}");
  if (conn) ok(typeof JSON.parse(conn.slice(2)).sid === "string", "raw: CONNECT answer has a sid");

  send('421["join","raw"]');
  const ack = await expect((s) => s.startsWith("431"), "raw: join ack 431[[...]]");
  if (ack) eq(JSON.parse(ack.slice(3))[0].sort(), ["w1", "w2"], "raw: join ack lists the members");
  await got(peer, "member_joined", (m) => m.user === "w1" && m.room === "raw", 1000, "raw: member_joined reaches the other member");

  send('42["heartbeat"]');
  send('42["status",{"status":"away","t":1700000000000,"id":7}]');
  const pres = await expect((s) => s.startsWith('42["presence"'), "raw: presence event 42[\"presence\",{...}]");
  if (pres) eq(JSON.parse(pres.slice(2)), ["presence", { user: "w1", status: "away", t: 1700000000000, id: 7 }], "raw: presence payload");

  peer.emit("cursor", { room: "raw", x: 5, y: 6, t: 1700000000001, id: 8 });
  const cur = await expect((s) => s.startsWith('42["cursor"'), "raw: cursor event from the other member");
  if (cur) eq(JSON.parse(cur.slice(2))[1], { user: "w2", room: "raw", x: 5, y: 6, t: 1700000000001, id: 8 }, "raw: cursor payload");

  send('42["meta",{"room":"raw","meta":{"typing":true},"t":1700000000002,"id":9}]');
  await expect((s) => s.startsWith('42["member_meta"'), "raw: member_meta back to the sender");

  // Engine.IO heartbeat: the server pings every pingInterval; the client must
  // answer 3, or the server closes the transport after pingTimeout.
  await expect((s) => s === "2", "raw: server ping 2 (answered with 3)", PING_INTERVAL_MS * 3);
  // Keep heartbeating the session across two more ping rounds.
  for (let i = 0; i < 3; i++) {
    await sleep(PING_INTERVAL_MS);
    send('42["heartbeat"]');
  }
  ok(ws.readyState === WebSocket.OPEN, "raw: still open after several ping/pong rounds");

  send('42["leave","raw"]');
  await got(peer, "member_left", (m) => m.user === "w1", 1000, "raw: leave -> member_left at the other member");

  // An unauthenticated CONNECT on a fresh socket: 44{"message":...}.
  const ws2 = new WebSocket(url, { perMessageDeflate: false });
  const refused = await new Promise((resolve) => {
    const seen = [];
    ws2.on("message", (d) => {
      const s = d.toString();
      seen.push(s);
      if (s.startsWith("0{")) ws2.send('40{"device":"d1"}');
      if (s.startsWith("44")) resolve(s);
    });
    setTimeout(() => resolve(null), 2000);
  });
  eq(refused, '44{"message":"unauthorized"}', "raw: CONNECT without user answered 44{\"message\":\"unauthorized\"}");
  ws2.close();

  send("41");
  ws.close();
  peer.close();
  if (showTranscript) {
    console.log("\n--- raw WebSocket transcript (C: client, S: server) ---");
    for (const line of transcript) console.log(line);
    console.log("---");
  }
}

// ---- main -----------------------------------------------------------------------

const deadline = setTimeout(() => {
  console.log("FAIL selftest took longer than 20 s");
  process.exit(1);
}, 20000);

let server;
try {
  server = await startServer();
  ok(true, `server started: "${server.lines[0]}"`);
  await socketioChecks(server.port);
  await rawCheck(server.port);

  // Clean exit on SIGTERM, and nothing else on stdout.
  const exited = new Promise((resolve) => server.child.on("exit", (code, sig) => resolve({ code, sig })));
  server.child.kill("SIGTERM");
  const { code, sig } = await Promise.race([exited, sleep(3000).then(() => ({ code: "timeout" }))]);
  ok(code === 0, `server exits 0 on SIGTERM (code ${code}, signal ${sig})`);
  eq(server.lines, [`listening on ${server.port}`], "server printed exactly one stdout line");
} catch (e) {
  ok(false, `unexpected error: ${e.stack || e}`);
  if (server) server.child.kill("SIGKILL");
}
clearTimeout(deadline);
console.log(`\n${passes} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
