"""Under backpressure a room subscriber loses ephemeral messages first and
never lifecycle deltas.

A raw client with a tiny receive buffer joins a room and stops reading;
the server (a test build with a tiny kernel send buffer, so its own output
queue fills quickly) keeps queueing for it while another member sends
cursors and metadata patches. When the slow client reads again, its room
deltas are complete and in sequence, while cursors were dropped.
Run with Debian's /usr/bin/python3 (python3-websockets is the peer).
"""
import asyncio
import base64
import json
import os
import socket
import struct
import time
import unittest

import websockets

from test_python_client import Server


def ws_handshake(sock, path):
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head


def ws_send(sock, obj):
    data = json.dumps(obj).encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    assert len(data) < 126
    sock.sendall(bytes([0x81, 0x80 | len(data)]) + mask + masked)


def ws_wait_for(sock, mtype, timeout=10):
    """Reads frames one by one (no read-ahead past them) until one of mtype."""
    sock.settimeout(timeout)
    while True:
        hdr = b""
        while len(hdr) < 2:
            hdr += sock.recv(2 - len(hdr))
        n = hdr[1] & 0x7F
        ext = {126: 2, 127: 8}.get(n, 0)
        raw = b""
        while len(raw) < ext:
            raw += sock.recv(ext - len(raw))
        if ext:
            n = int.from_bytes(raw, "big")
        body = b""
        while len(body) < n:
            body += sock.recv(n - len(body))
        if hdr[0] & 0x0F == 1 and json.loads(body).get("type") == mtype:
            return json.loads(body)


def ws_read_all(sock, deadline, done):
    """Reads frames until done(msgs) holds, the peer closes or the deadline
    passes; returns the text messages. A quiet socket is no end: a reader
    with a tiny receive window gets data only when the sender's zero-window
    probe (exponential backoff, seconds apart) finds the window open."""
    buf, msgs = b"", []
    sock.settimeout(0.5)
    while time.time() < deadline and not done(msgs):
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, off = struct.unpack("!H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, off = struct.unpack("!Q", buf[2:10])[0], 10
            if len(buf) < off + n:
                break
            if buf[0] & 0x0F == 1:
                msgs.append(json.loads(buf[off:off + n]))
            buf = buf[off + n:]
    return msgs


class BackpressureTest(unittest.TestCase):
    def test_ephemeral_dropped_first_deltas_never(self):
        srv = Server("--workers", "2", "--client-socket-sndbuf-bytes", "4096",
                     "--client-output-soft-limit-bytes", "16384",
                     "--client-output-soft-limit-ms", "60000",
                     "--client-output-hard-limit-bytes", "4194304", "--room-batch-ms", "20")
        try:
            room = f"bp-{os.getpid()}"
            slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", srv.port))
            ws_handshake(slow, "/v1/ws?user=slowpoke")
            ws_wait_for(slow, "welcome")
            ws_send(slow, {"type": "join", "room": room, "meta": {}})
            ws_wait_for(slow, "room_joined")  # from now on the slow client does not read

            async def publisher():
                async with websockets.connect(f"ws://127.0.0.1:{srv.port}/v1/ws?user=fast",
                                              max_queue=None) as ws:
                    await ws.send(json.dumps({"type": "join", "room": room, "meta": {"n": 0}}))
                    end, i = time.time() + 2.0, 0
                    while time.time() < end:
                        i += 1
                        await ws.send(json.dumps({"type": "ephemeral", "room": room, "kind": "cursor",
                                                  "data": {"x": i, "pad": "p" * 600}}))
                        await ws.send(json.dumps({"type": "patch", "room": room,
                                                  "meta": {"n": i, "pad": "q" * 900}}))
                        await asyncio.sleep(0.01)
                    return i

            sent = asyncio.run(asyncio.wait_for(publisher(), 30))
            def last_patch_seen(ms):  # the last patch is in a delta: nothing more to come
                return any(p.get("meta", {}).get("n") == sent for m in ms
                           if m.get("type") == "room_delta" for p in m.get("patches", []))
            msgs = ws_read_all(slow, time.time() + 20, last_patch_seen)
            deltas = [m for m in msgs if m.get("type") == "room_delta" and m.get("room") == room]
            cursors = [m for m in msgs if m.get("type") == "ephemeral"]
            self.assertGreater(sent, 50)
            self.assertGreater(len(deltas), 10, f"got {[m.get('type') for m in msgs][:12]} of {len(msgs)}")
            seqs = [d["seq"] for d in deltas]
            self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))),
                             "lifecycle deltas complete and in order")
            # About 30 cursors were emitted in 2 s (15/s); a congested reader
            # must have lost most of them.
            self.assertLess(len(cursors), 15, f"{len(cursors)} cursors reached a congested reader")
            slow.close()
        finally:
            code = srv.stop()
            self.assertEqual(code, 0, srv.log)


if __name__ == "__main__":
    unittest.main()
