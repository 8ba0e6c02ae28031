#!/usr/bin/env node
// socketio-presence.mjs - the Socket.IO peer for presenced's benchmark suite.
//
// A presence server written the way the Socket.IO documentation and the
// presence tutorials recommend ("rooms and broadcasting"): the official
// `socket.io` package, its default in-memory adapter, one Socket.IO room per
// presence room, `socket.to(room).emit` / `io.to(room).emit` for fan-out,
// `volatile` for cursors, plain Maps for membership and a per-socket TTL
// timer that heartbeats refresh. It is meant to be what a competent Node
// developer would ship, not a straw man: no per-event logging, packets are
// encoded once per broadcast by the adapter, compression is off.
//
// Honest limits of the comparison:
// - It is ONE Node.js process, so one JavaScript thread: it can use about one
//   core no matter how many the machine has (libuv's thread pool and the GC
//   helpers add a little). Scaling past that with Socket.IO takes the cluster
//   module plus sticky sessions plus a non-default adapter (Redis, cluster
//   adapter), which is a different architecture; it is not attempted here.
// - Node also answers Engine.IO pings on its own schedule (--ping-interval-ms,
//   default 25 s like Socket.IO) on top of the application heartbeat.
//
// Usage:
//   node bench/peers/socketio-presence.mjs --port 0 [--host 127.0.0.1]
//        [--ttl-ms 30000] [--grace-ms 5000]
//        [--ping-interval-ms 25000] [--ping-timeout-ms 20000]
// Prints exactly one stdout line "listening on PORT" once it accepts
// connections; exits 0 on SIGTERM/SIGINT. The event protocol is described in
// bench/peers/README.md.

import { createServer } from "node:http";
import { Server } from "socket.io";

// ---- command line -----------------------------------------------------------

function parseArgs(argv) {
  const opts = {
    port: 0,
    host: "127.0.0.1",
    ttlMs: 30000,
    graceMs: 5000,
    pingIntervalMs: 25000, // Socket.IO's defaults
    pingTimeoutMs: 20000,
    redis: "", // @socket.io/redis-adapter on this Redis URL (W7); "" = in memory
  };
  const names = {
    "--port": "port",
    "--host": "host",
    "--ttl-ms": "ttlMs",
    "--grace-ms": "graceMs",
    "--ping-interval-ms": "pingIntervalMs",
    "--ping-timeout-ms": "pingTimeoutMs",
    "--redis": "redis",
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value;
    const eq = arg.indexOf("=");
    if (eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const key = names[arg];
    if (!key) usage(`unknown option ${arg}`);
    if (value === undefined) {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      value = argv[++i];
    }
    if (key === "host" || key === "redis") {
      opts[key] = value;
    } else {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) usage(`${arg}: not a non-negative integer: ${value}`);
      opts[key] = n;
    }
  }
  if (opts.port > 65535) usage("--port: out of range");
  if (opts.ttlMs < 1) usage("--ttl-ms must be >= 1");
  return opts;
}

function usage(msg) {
  process.stderr.write(
    `socketio-presence: ${msg}\n` +
      "usage: socketio-presence.mjs --port N [--host H] [--ttl-ms N] [--grace-ms N]" +
      " [--ping-interval-ms N] [--ping-timeout-ms N]\n",
  );
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));

// ---- presence state ---------------------------------------------------------

// Most-available wins: online > busy > away > dnd (presenced's default
// status policy, so both servers publish the same transitions).
const RANK = { online: 4, busy: 3, away: 2, dnd: 1 };

// user id -> { sockets: Set<Socket>, status, rooms: Set<room> }
//   rooms: the presence rooms the user is a member of (including rooms whose
//   leave is pending in the reconnect grace).
const users = new Map();

// room -> Map<user id, { sockets: Set<Socket>, meta: object, leaveTimer }>
//   A user is one member however many sockets they have in the room.
const rooms = new Map();

function mergedStatus(user) {
  let best = null;
  for (const s of user.sockets) {
    if (best === null || RANK[s.data.status] > RANK[best]) best = s.data.status;
  }
  return best;
}

function publishStatus(userId, user, t, id) {
  const status = mergedStatus(user);
  if (status === null || status === user.status) return;
  user.status = status;
  // io.to([]) would broadcast to the whole namespace: only rooms the user is in.
  if (user.rooms.size > 0) {
    io.to([...user.rooms]).emit("presence", { user: userId, status, t, id });
  }
}

function forgetUserIfGone(userId, user) {
  if (user.sockets.size === 0 && user.rooms.size === 0) users.delete(userId);
}

// The user's membership of `room` ends: tell the rest of the room.
function removeMember(room, userId) {
  const members = rooms.get(room);
  if (!members || !members.delete(userId)) return;
  if (members.size === 0) rooms.delete(room);
  const user = users.get(userId);
  if (user) {
    user.rooms.delete(room);
    forgetUserIfGone(userId, user);
  }
  io.to(room).emit("member_left", { user: userId, room });
}

// ---- server -----------------------------------------------------------------

const httpServer = createServer();
const io = new Server(httpServer, {
  path: "/socket.io/",
  serveClient: false,
  perMessageDeflate: false,
  httpCompression: false,
  pingInterval: opts.pingIntervalMs,
  pingTimeout: opts.pingTimeoutMs,
});

// Authentication: the CONNECT packet's payload, {"user":"u1","device":"d1"}.
io.use((socket, next) => {
  const auth = socket.handshake.auth || {};
  if (typeof auth.user !== "string" || auth.user.length === 0) {
    return next(new Error("unauthorized"));
  }
  socket.data.user = auth.user;
  socket.data.device = typeof auth.device === "string" ? auth.device : socket.id;
  next();
});

io.on("connection", (socket) => {
  const userId = socket.data.user;
  socket.data.status = "online";
  socket.data.rooms = new Set(); // presence rooms this socket joined
  socket.data.ended = null; // why the server ended the session, if it did

  let user = users.get(userId);
  if (!user) {
    user = { sockets: new Set(), status: null, rooms: new Set() };
    users.set(userId, user);
  }
  user.sockets.add(socket);
  publishStatus(userId, user, Date.now(), null);

  // Session TTL: one timer per socket, pushed back by every heartbeat. When
  // it fires the session is over: the socket leaves its rooms at once (no
  // reconnect grace, like presenced) and is disconnected.
  const ttl = setTimeout(() => {
    socket.data.ended = "ttl";
    socket.emit("session_ended", { reason: "ttl" });
    socket.disconnect(true);
  }, opts.ttlMs);

  socket.on("heartbeat", () => {
    ttl.refresh();
  });

  socket.on("status", (msg) => {
    if (!msg || RANK[msg.status] === undefined) return;
    socket.data.status = msg.status;
    publishStatus(userId, user, msg.t, msg.id);
  });

  socket.on("join", (room, ack) => {
    if (typeof room !== "string" || room.length === 0) {
      if (typeof ack === "function") ack({ error: "invalid room" });
      return;
    }
    if (!socket.data.rooms.has(room)) {
      socket.join(room);
      socket.data.rooms.add(room);
      let members = rooms.get(room);
      if (!members) {
        members = new Map();
        rooms.set(room, members);
      }
      let member = members.get(userId);
      if (!member) {
        member = { sockets: new Set(), meta: {}, leaveTimer: null };
        members.set(userId, member);
        user.rooms.add(room);
        socket.to(room).emit("member_joined", { user: userId, room });
      } else if (member.leaveTimer) {
        // Back within the reconnect grace: nobody saw them leave.
        clearTimeout(member.leaveTimer);
        member.leaveTimer = null;
      }
      member.sockets.add(socket);
    }
    if (typeof ack === "function") ack([...rooms.get(room).keys()]);
  });

  socket.on("leave", (room) => {
    if (!socket.data.rooms.delete(room)) return;
    socket.leave(room);
    const member = rooms.get(room)?.get(userId);
    if (!member) return;
    member.sockets.delete(socket);
    if (member.sockets.size === 0) removeMember(room, userId);
  });

  socket.on("cursor", (msg) => {
    if (!msg || !socket.data.rooms.has(msg.room)) return;
    socket.volatile.to(msg.room).emit("cursor", {
      user: userId,
      room: msg.room,
      x: msg.x,
      y: msg.y,
      t: msg.t,
      id: msg.id,
    });
  });

  socket.on("meta", (msg) => {
    if (!msg || !socket.data.rooms.has(msg.room)) return;
    if (msg.meta === null || typeof msg.meta !== "object") return;
    const member = rooms.get(msg.room)?.get(userId);
    if (member) Object.assign(member.meta, msg.meta);
    io.to(msg.room).emit("member_meta", {
      user: userId,
      room: msg.room,
      meta: msg.meta,
      t: msg.t,
      id: msg.id,
    });
  });

  socket.on("disconnect", () => {
    clearTimeout(ttl);
    if (shuttingDown) return;
    user.sockets.delete(socket);
    const immediate = socket.data.ended === "ttl";
    for (const room of socket.data.rooms) {
      const member = rooms.get(room)?.get(userId);
      if (!member) continue;
      member.sockets.delete(socket);
      if (member.sockets.size > 0 || member.leaveTimer) continue;
      if (immediate) {
        removeMember(room, userId);
      } else {
        member.leaveTimer = setTimeout(() => {
          member.leaveTimer = null;
          if (member.sockets.size === 0) removeMember(room, userId);
        }, opts.graceMs);
      }
    }
    socket.data.rooms.clear();
    if (user.sockets.size > 0) {
      publishStatus(userId, user, Date.now(), null);
    }
    forgetUserIfGone(userId, user);
  });
});

// ---- lifecycle --------------------------------------------------------------

let shuttingDown = false;

function shutdown() {
  if (shuttingDown) return;
  shuttingDown = true;
  for (const members of rooms.values()) {
    for (const member of members.values()) clearTimeout(member.leaveTimer);
  }
  // io.close() disconnects every client and closes the HTTP server.
  const force = setTimeout(() => process.exit(0), 2000);
  force.unref();
  io.close(() => process.exit(0));
}

process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

httpServer.on("error", (err) => {
  process.stderr.write(`socketio-presence: ${err.message}\n`);
  process.exit(1);
});

// With --redis, the adapter a Node team runs to span processes: every
// broadcast is also PUBLISHed to Redis and re-emitted by the other
// processes (presence state itself stays per process).
if (opts.redis) {
  const { createClient } = await import("redis");
  const { createAdapter } = await import("@socket.io/redis-adapter");
  const pub = createClient({ url: opts.redis });
  const sub = pub.duplicate();
  await Promise.all([pub.connect(), sub.connect()]);
  io.adapter(createAdapter(pub, sub));
}

httpServer.listen(opts.port, opts.host, () => {
  process.stdout.write(`listening on ${httpServer.address().port}\n`);
});
