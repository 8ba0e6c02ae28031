#!/usr/bin/python3
"""ab-lite: a WebSocket (RFC 6455) conformance runner for echo servers.

It reproduces the behaviour checks of Autobahn|Testsuite categories 1-7 and 10
(247 cases, numbered as Autobahn numbers them) as a *client* that connects to
an echo server (every text/binary message is sent back unchanged). It is
written from RFC 6455 and the published case descriptions; no code of the
test suite is used.

Each case gives two verdicts, as Autobahn does:
  behavior       did the events we received (messages, pongs) match what the
                 case expects?  OK / NON-STRICT / INFORMATIONAL / FAILED ...
  behaviorClose  did the connection end the way the case expects?  OK /
                 FAILED / WRONG CODE / UNCLEAN / FAILED BY CLIENT ...
A case passes when both are OK, NON-STRICT or INFORMATIONAL.

The close model mirrors the suite's client:
  * "closedByMe": we sent the first close frame.
  * "wasClean":   a close frame went each way and the server then closed TCP
                  (within the drop timeout) - the server closes TCP first
                  (RFC 6455 section 7.1.1).
  * "droppedByMe": we had to cut the TCP connection (kill timer, protocol
                  violation by the server, close-handshake or drop timeout).
  * "fail the connection" cases accept a close frame with the expected code,
    or a plain TCP drop by the server.

Usage:
  ablite.py --url ws://127.0.0.1:PORT/path [--cases 1.*,6.4.*] [--json out.json]
            [--expect expected.json] [--timeout-mult N] [--jobs 8] [--agent NAME]

Only the Python standard library is used; run it with /usr/bin/python3.
"""

import argparse
import base64
import codecs
import concurrent.futures
import fnmatch
import hashlib
import heapq
import json
import os
import select
import socket
import struct
import sys
import time
import urllib.parse

# ----------------------------------------------------------------------------
# Verdicts

OK = "OK"
NON_STRICT = "NON-STRICT"
INFORMATIONAL = "INFORMATIONAL"
UNIMPLEMENTED = "UNIMPLEMENTED"
FAILED = "FAILED"
WRONG_CODE = "WRONG CODE"
UNCLEAN = "UNCLEAN"
FAILED_BY_CLIENT = "FAILED BY CLIENT"
PASSING = (OK, NON_STRICT, INFORMATIONAL)

# Close codes (RFC 6455 section 7.4.1)
NORMAL = 1000
PROTOCOL_ERROR = 1002
INVALID_PAYLOAD = 1007

# Codes in 1000-2999 that a peer may send (IANA registry as the suite's client
# knows it); anything else below 3000, and anything from 5000 up, makes the
# client fail the connection.
ALLOWED_LOW_CODES = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011,
                     1012, 1013, 1014}

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# ----------------------------------------------------------------------------
# Timing knobs (seconds). Scaled by --timeout-mult where marked.

# The suite writes each "sync" frame and each chop in its own reactor turn
# (callLater(10 us)). Reference servers' published verdicts depend on this
# spacing: frame-wise writes must arrive nearly back-to-back (python-websockets
# gives NON-STRICT in 3.3), octet-wise chops slowly enough for an echo to go
# out between two frames (python-websockets gives OK in 3.4, 4.1.5, 4.2.5).
SYNC_DELAY = float(os.environ.get("ABLITE_SYNC_DELAY", "0.00005"))   # after a frame-wise write
CHOP_DELAY = float(os.environ.get("ABLITE_CHOP_DELAY", "0.003"))     # after each chop
CLOSE_HS_TIMEOUT = 1.0      # * mult: server must answer our close frame
DROP_TIMEOUT = 1.0          # * mult: server must close TCP after the close handshake
HANDSHAKE_TIMEOUT = 5.0     # * mult: opening handshake
CASE_HARD_LIMIT = 30.0      # * mult: absolute bound for one case
WRITE_LIMIT = 10.0          # * mult: bound for writing one chunk of frames

MULT = 1.0


def mask_bytes(key, data):
    """XOR data with the 4-byte masking key (RFC 6455 section 5.3)."""
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def build_frame(opcode, payload=b"", fin=True, rsv=0, mask=True, declared_len=None):
    """Serialize one frame. Every field can be set to an invalid value on
    purpose; declared_len overrides the length written in the header."""
    n = len(payload) if declared_len is None else declared_len
    b0 = (0x80 if fin else 0) | ((rsv & 7) << 4) | (opcode & 0x0F)
    mbit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if mask:
        key = os.urandom(4)
        return head + key + mask_bytes(key, payload)
    return head + payload


def repeat_to(payload, length):
    """The suite's payload_len: repeat payload until it has `length` octets."""
    if not payload:
        raise ValueError("empty payload cannot be repeated")
    reps = length // len(payload) + 1
    return (payload * reps)[:length]


class Session:
    """One WebSocket connection driven by one case (single thread)."""

    def __init__(self, url_parts, origin=None):
        self.host, self.port, self.path = url_parts
        self.origin = origin
        self.sock = None
        self.state = "CONNECTING"
        self.received = []          # events: ("message", bytes, binary) / ("ping", b) / ("pong", b) / ("timeout", tag)
        self.expected = {}          # verdict -> list of events
        self.matcher = None         # optional custom: received -> verdict or None
        self.expected_close = {"closedByMe": True, "closeCode": [NORMAL], "requireClean": True}
        self.suppress_close = False
        self.closed_by_me = False
        self.failed_by_me = False
        self.dropped_by_me = False
        self.was_clean = False
        self.not_clean_reason = None
        self.remote_close_code = None
        self.remote_close_reason = None
        self.notes = []
        self.rx = bytearray()
        self.rx_new = False         # bytes arrived that process_rx has not seen yet
        self.eof = False
        self.out = bytearray()      # coalesced non-sync writes
        self.timers = []
        self.timer_seq = 0
        self.msg_opcode = None      # opcode of the message being reassembled
        self.msg_parts = []
        self.msg_decoder = None
        self.close_hs_timer = None
        self.drop_timer = None
        self.write_broken = False
        self.t_open = None

    # -- opening handshake -------------------------------------------------

    def connect(self):
        limit = HANDSHAKE_TIMEOUT * MULT
        self.sock = socket.create_connection((self.host, self.port), timeout=limit)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16))
        hostport = self.host if self.port == 80 else "%s:%d" % (self.host, self.port)
        req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nUser-Agent: ab-lite/1.0\r\n"
               % (self.path, hostport, key.decode()))
        if self.origin:
            req += "Origin: %s\r\n" % self.origin
        req += "\r\n"
        self.sock.sendall(req.encode())
        deadline = time.monotonic() + limit
        buf = b""
        while b"\r\n\r\n" not in buf:
            if time.monotonic() > deadline or len(buf) > 65536:
                raise RuntimeError("opening handshake: no complete response")
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("opening handshake: connection closed (got %r)" % buf[:200])
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise RuntimeError("opening handshake: status %r" % lines[0])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1(key + WS_GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise RuntimeError("opening handshake: bad Sec-WebSocket-Accept")
        if headers.get("sec-websocket-extensions"):
            raise RuntimeError("opening handshake: server accepted an extension we did not offer")
        self.sock.setblocking(False)
        self.rx += rest
        self.state = "OPEN"
        self.t_open = time.monotonic()

    # -- timers --------------------------------------------------------------

    def later(self, delay, fn):
        self.timer_seq += 1
        t = [time.monotonic() + delay, self.timer_seq, fn, True]
        heapq.heappush(self.timers, t)
        return t

    @staticmethod
    def cancel(timer):
        if timer is not None:
            timer[3] = False

    def kill_after(self, delay):
        """Like the suite: when the case has not ended by then, fail the
        connection by dropping TCP (we count as the dropper)."""
        def kill():
            if self.state != "CLOSED":
                self.notes.append("killed after %.1fs" % (delay * MULT))
                self.fail("kill timer", note=False)
        self.later(delay * MULT, kill)

    def close_after(self, delay):
        def close():
            if self.state != "CLOSED":
                self.send_close(NORMAL)
        self.later(delay * MULT, close)

    def continue_later(self, delay, fn):
        """Unscaled: the pause itself is what the case measures (6.4.x, 5.19)."""
        def run():
            if self.state != "CLOSED":
                fn()
        self.later(delay, run)

    # -- writing -------------------------------------------------------------

    def _write_now(self, data):
        """Write everything (reads are buffered, not processed, meanwhile so a
        server that echoes while we write cannot deadlock us)."""
        if self.state == "CLOSED" or self.write_broken:
            return
        view = memoryview(bytes(data))
        deadline = time.monotonic() + WRITE_LIMIT * MULT
        while view:
            if time.monotonic() > deadline:
                self.notes.append("write stalled")
                self.write_broken = True
                return
            try:
                r, w, _ = select.select([self.sock] if not self.eof else [], [self.sock], [], 0.5)
            except (OSError, ValueError):
                self.write_broken = True
                return
            if r:
                self._recv_some()
            if w:
                try:
                    n = self.sock.send(view)
                    view = view[n:]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    self.write_broken = True
                    return

    def flush(self):
        if self.out:
            data, self.out = bytes(self.out), bytearray()
            self._write_now(data)

    def send_raw(self, data, sync=False, chopsize=None):
        if self.state == "CLOSED":
            return
        if chopsize:
            self.flush()
            for i in range(0, len(data), chopsize):
                if self.write_broken or self.state == "CLOSED":
                    break
                self._write_now(data[i:i + chopsize])
                time.sleep(CHOP_DELAY)
        elif sync:
            self.flush()
            self._write_now(data)
            time.sleep(SYNC_DELAY)
        else:
            self.out += data

    def send_frame(self, opcode, payload=b"", fin=True, rsv=0, mask=True,
                   payload_len=None, chopsize=None, sync=False, declared_len=None):
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if payload_len is not None:
            payload = repeat_to(payload, payload_len)
        self.send_raw(build_frame(opcode, payload, fin, rsv, mask, declared_len), sync, chopsize)

    def send_message(self, payload, binary=False, frag_size=None):
        """A whole message, optionally split into frames of frag_size octets."""
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        op = 2 if binary else 1
        if not frag_size or len(payload) <= frag_size:
            self.send_frame(op, payload)
            return
        parts = [payload[i:i + frag_size] for i in range(0, len(payload), frag_size)]
        for i, part in enumerate(parts):
            self.send_frame(op if i == 0 else 0, part, fin=(i == len(parts) - 1))

    def send_close(self, code=None, reason=b"", raw=None):
        """Start the closing handshake (the suite's sendCloseFrame, not a reply).
        Ignored unless the connection is OPEN."""
        if self.state != "OPEN":
            return
        if raw is not None:
            payload = raw
        elif code is None:
            payload = b""
        else:
            if isinstance(reason, str):
                reason = reason.encode("utf-8")
            payload = struct.pack("!H", code) + reason
        self.send_frame(8, payload)
        self.state = "CLOSING"
        self.closed_by_me = True
        self.close_hs_timer = self.later(CLOSE_HS_TIMEOUT * MULT, self._close_hs_timeout)

    def _close_hs_timeout(self):
        if self.state != "CLOSED":
            self.was_clean = False
            self.not_clean_reason = "server did not answer our close frame in time"
            self.drop()

    def _drop_timeout(self):
        if self.state != "CLOSED":
            self.was_clean = False
            self.not_clean_reason = "server did not close TCP after the closing handshake"
            self.drop()

    # -- connection teardown ---------------------------------------------------

    def drop(self):
        """We cut the TCP connection (abortive close: RST)."""
        if self.state == "CLOSED":
            return
        self.dropped_by_me = True
        self.state = "CLOSED"
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def fail(self, why, note=True):
        """Fail the connection by dropping TCP (the suite's failByDrop)."""
        if self.state == "CLOSED":
            return
        if note:
            self.notes.append("client failed: " + why)
        self.failed_by_me = True
        self.was_clean = False
        self.not_clean_reason = why
        self.drop()

    def connection_lost(self):
        if self.state != "CLOSED":
            self.state = "CLOSED"
            try:
                self.sock.close()
            except OSError:
                pass

    # -- reading -------------------------------------------------------------

    def _recv_some(self):
        try:
            chunk = self.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.eof = True
            return
        if not chunk:
            self.eof = True
        else:
            self.rx += chunk
            self.rx_new = True

    def record(self, event):
        self.received.append(event)
        self.finish_when_done()

    def finish_when_done(self):
        # Start the closing handshake once what we received matches every
        # expected outcome (the suite's rule; with two outcomes it never does).
        if not self.expected:
            return
        for outcome in self.expected.values():
            if self.received != outcome:
                return
        if self.expected_close["closedByMe"] and not self.suppress_close:
            self.send_close(self.expected_close["closeCode"][0])

    def process_rx(self):
        """Parse and act on every complete frame in the receive buffer."""
        self.rx_new = False
        while self.state != "CLOSED":
            buf = self.rx
            if len(buf) < 2:
                return
            b0, b1 = buf[0], buf[1]
            fin = bool(b0 & 0x80)
            rsv = (b0 >> 4) & 7
            opcode = b0 & 0x0F
            masked = bool(b1 & 0x80)
            n = b1 & 0x7F
            pos = 2
            if n == 126:
                if len(buf) < 4:
                    return
                n = struct.unpack_from("!H", buf, 2)[0]
                pos = 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n = struct.unpack_from("!Q", buf, 2)[0]
                pos = 10
                if n >> 63:
                    self.fail("64-bit length with the top bit set")
                    return
            if rsv:
                self.fail("server frame has RSV bits %d" % rsv)
                return
            if masked:
                self.fail("server frame is masked")
                return
            if opcode >= 8:
                if opcode not in (8, 9, 10):
                    self.fail("server used reserved control opcode %d" % opcode)
                    return
                if not fin:
                    self.fail("server sent a fragmented control frame")
                    return
                if n > 125:
                    self.fail("server control frame longer than 125 octets")
                    return
            else:
                if opcode not in (0, 1, 2):
                    self.fail("server used reserved data opcode %d" % opcode)
                    return
                if opcode == 0 and self.msg_opcode is None:
                    self.fail("server sent a continuation with nothing to continue")
                    return
                if opcode != 0 and self.msg_opcode is not None:
                    self.fail("server started a message inside another")
                    return
            if len(buf) < pos + n:
                return
            payload = bytes(buf[pos:pos + n])
            del buf[:pos + n]
            if opcode >= 8:
                self.control_frame(opcode, payload)
            else:
                self.data_frame(opcode, fin, payload)

    def data_frame(self, opcode, fin, payload):
        if opcode != 0:
            self.msg_opcode = opcode
            self.msg_parts = []
            self.msg_decoder = codecs.getincrementaldecoder("utf-8")("strict") if opcode == 1 else None
        self.msg_parts.append(payload)
        if self.msg_decoder is not None:
            try:
                self.msg_decoder.decode(payload, fin)
            except UnicodeDecodeError:
                self.fail("server sent a text message that is not valid UTF-8")
                return
        if fin:
            msg = b"".join(self.msg_parts)
            binary = self.msg_opcode == 2
            self.msg_opcode = None
            self.msg_parts = []
            self.msg_decoder = None
            self.record(("message", msg, binary))

    def control_frame(self, opcode, payload):
        if opcode == 9:
            self.received.append(("ping", payload))
            if self.state == "OPEN":
                self.send_frame(10, payload)
            self.finish_when_done()
        elif opcode == 10:
            self.record(("pong", payload))
        else:
            self.close_frame(payload)

    def close_frame(self, payload):
        code = None
        reason = b""
        if len(payload) == 1:
            self.fail("server close frame has a 1-octet payload")
            return
        if len(payload) >= 2:
            code = struct.unpack("!H", payload[:2])[0]
            reason = payload[2:]
        self.remote_close_code = code
        self.remote_close_reason = reason
        if code is not None and (code < 1000 or (code < 3000 and code not in ALLOWED_LOW_CODES)
                                 or code >= 5000):
            self.fail("server sent invalid close code %d" % code)
            return
        try:
            reason.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("server close reason is not valid UTF-8")
            return
        if self.state == "CLOSING":
            # the server's answer to our close frame
            self.cancel(self.close_hs_timer)
            self.was_clean = True
            self.drop_timer = self.later(DROP_TIMEOUT * MULT, self._drop_timeout)
        elif self.state == "OPEN":
            # the server starts the closing handshake: reply, then expect the
            # server to close TCP
            self.was_clean = True
            self.send_frame(8, struct.pack("!H", NORMAL))
            self.flush()
            self.state = "CLOSING"
            self.drop_timer = self.later(DROP_TIMEOUT * MULT, self._drop_timeout)

    # -- event loop ----------------------------------------------------------

    def run(self):
        hard = time.monotonic() + CASE_HARD_LIMIT * MULT
        while self.state != "CLOSED":
            self.flush()
            self.process_rx()
            self.flush()
            if self.state == "CLOSED":
                break
            if self.eof:
                self.connection_lost()
                break
            now = time.monotonic()
            if now > hard:
                self.notes.append("hard case limit reached")
                self.fail("hard limit", note=False)
                break
            while self.timers and (not self.timers[0][3] or self.timers[0][0] <= now):
                t = heapq.heappop(self.timers)
                if t[3]:
                    t[2]()
                    self.flush()
                    if self.state == "CLOSED":
                        break
            if self.state == "CLOSED":
                break
            if self.rx_new or self.eof:
                continue        # a write inside a timer read data: handle it first
            wait = hard - time.monotonic()
            if self.timers:
                wait = min(wait, self.timers[0][0] - time.monotonic())
            wait = max(0.0, min(wait, 1.0))
            try:
                r, _, _ = select.select([self.sock], [], [], wait)
            except (OSError, ValueError):
                self.connection_lost()
                break
            if r:
                self._recv_some()
        # make sure the socket is gone
        try:
            self.sock.close()
        except OSError:
            pass


# ----------------------------------------------------------------------------
# Case registry

class CaseDef:
    def __init__(self, cid, desc, fn, allow=None, post=None, serial=False):
        self.cid = cid
        # serial: timing-sensitive (the verdict depends on whether the server
        # can echo one frame before the next arrives); run alone, after the
        # concurrent batch, so that server load from other cases cannot tip it
        self.serial = serial
        self.desc = desc
        self.fn = fn
        # verdicts other than OK that this case may give, with the reason
        # (printed in the table): {"NON-STRICT": "...", "INFORMATIONAL": "..."}
        self.allow = allow or {}
        self.post = post

    def key(self):
        return tuple(int(x) for x in self.cid.split("."))


CASES = []


def add(cid, desc, fn, allow=None, post=None, serial=False):
    CASES.append(CaseDef(cid, desc, fn, allow, post, serial))


def expect_ok(s, events):
    s.expected = {OK: events}
    s.expected_close = {"closedByMe": True, "closeCode": [NORMAL], "requireClean": True}


def expect_fail(s, code=PROTOCOL_ERROR, ok_events=None, ns_events=None):
    """The server must fail the connection (close frame with `code`, or drop)."""
    s.expected = {OK: ok_events if ok_events is not None else []}
    if ns_events is not None:
        s.expected[NON_STRICT] = ns_events
    s.expected_close = {"closedByMe": False, "closeCode": [code], "requireClean": False}


def wrong_code_fails(result):
    """Category 7 rule: a wrong close code also fails the behaviour."""
    if result["behaviorClose"] == WRONG_CODE:
        result["behavior"] = FAILED


# Reasons written next to the cases that allow them.
R_ECHO_FIRST = ("NON-STRICT: the server failed the connection before echoing the valid "
                "message sent ahead of the bad frame (allowed: the error may be acted on "
                "at once; echoing first is preferred)")
R_UTF8_LATE = ("NON-STRICT: invalid UTF-8 was rejected only at the end of the message/frame, "
               "not at the first invalid octet (fail-fast is a SHOULD, RFC 6455 section 8.1)")
R_LAST_PONG = ("NON-STRICT: not every ping got its pong but the last one did; RFC 6455 "
               "section 5.5.3 allows answering only the most recent ping (ab-lite "
               "deviation: Autobahn requires all 10)")
R_CLOSE_RACE = ("INFORMATIONAL: whether the message is echoed before the close is "
                "processed is implementation-defined")
R_CODE_UNDEF = "INFORMATIONAL: close codes >= 5000 are not defined by RFC 6455"


# --- Category 1: framing -------------------------------------------------------

def _cat1():
    sizes = [0, 125, 126, 127, 128, 65535, 65536]
    for sub, opcode, fill, binary in ((1, 1, b"*", False), (2, 2, b"\xfe", True)):
        kind = "binary" if binary else "text"
        for i, n in enumerate(sizes, 1):
            def fn(s, n=n, opcode=opcode, fill=fill, binary=binary):
                payload = fill * n
                expect_ok(s, [("message", payload, binary)])
                s.send_frame(opcode, payload)
                s.kill_after(10 if n > 128 else 1)
            add("1.%d.%d" % (sub, i), "%s message, payload %d octets" % (kind, n), fn)

        def fn8(s, opcode=opcode, fill=fill, binary=binary):
            payload = fill * 65536
            expect_ok(s, [("message", payload, binary)])
            s.send_frame(opcode, payload, chopsize=997)
            s.kill_after(10)
        add("1.%d.8" % sub, "%s message, 65536 octets, sent in 997-octet chops" % kind, fn8)


# --- Category 2: pings and pongs ------------------------------------------------

def _cat2():
    def ping_case(cid, desc, payload, chopsize=None, close_after=1):
        def fn(s):
            expect_ok(s, [("pong", payload)])
            s.send_frame(9, payload, chopsize=chopsize)
            s.close_after(close_after)
        add(cid, desc, fn)

    ping_case("2.1", "ping without payload", b"")
    ping_case("2.2", "ping with small text payload", b"Hello, world!")
    ping_case("2.3", "ping with small binary payload", b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff")
    ping_case("2.4", "ping with 125-octet binary payload", b"\xfe" * 125)

    def c25(s):
        expect_fail(s)
        s.send_frame(9, b"\xfe" * 126)
        s.kill_after(1)
    add("2.5", "ping with 126-octet payload: fail 1002", c25)

    ping_case("2.6", "ping with 125-octet payload in 1-octet chops", b"\xfe" * 125,
              chopsize=1, close_after=2)

    def c27(s):
        expect_ok(s, [])
        s.send_frame(10)
        s.send_close(NORMAL)
        s.close_after(1)
    add("2.7", "unsolicited pong without payload, then close", c27)

    def c28(s):
        expect_ok(s, [])
        s.send_frame(10, b"unsolicited pong payload")
        s.send_close(NORMAL)
        s.close_after(1)
    add("2.8", "unsolicited pong with payload, then close", c28)

    def c29(s):
        expect_ok(s, [("pong", b"ping payload")])
        s.send_frame(10, b"unsolicited pong payload")
        s.send_frame(9, b"ping payload")
        s.close_after(1)
    add("2.9", "unsolicited pong, then ping: pong expected", c29)

    def ten_pings(chopsize):
        def fn(s):
            pongs = [("pong", ("payload-%d" % i).encode()) for i in range(10)]
            expect_ok(s, pongs)

            def match(received):
                if received == pongs:
                    return OK
                # ordered subsequence of the pongs that ends with the last one
                if received and received[-1] == pongs[-1]:
                    it = iter(pongs)
                    if all(any(ev == p for p in it) for ev in received):
                        return NON_STRICT
                return None
            s.matcher = match
            for i in range(10):
                s.send_frame(9, ("payload-%d" % i).encode(), chopsize=chopsize)
            s.close_after(3)
        return fn
    add("2.10", "10 pings in flight: pongs for all (at least the last)", ten_pings(None),
        allow={NON_STRICT: R_LAST_PONG})
    add("2.11", "10 pings in 1-octet chops: pongs for all (at least the last)", ten_pings(1),
        allow={NON_STRICT: R_LAST_PONG})


# --- Category 3: reserved bits ----------------------------------------------------

def _cat3():
    def c31(s):
        expect_fail(s)
        s.send_frame(1, b"Hello, world!", rsv=1)
        s.kill_after(1)
    add("3.1", "text with RSV=1: fail", c31)

    def three(rsv, sync=False, chopsize=None):
        def fn(s):
            payload = b"Hello, world!"
            expect_fail(s, ok_events=[("message", payload, False)], ns_events=[])
            s.send_frame(1, payload, sync=sync, chopsize=chopsize)
            s.send_frame(1, payload, rsv=rsv, sync=sync, chopsize=chopsize)
            s.send_frame(9, sync=sync, chopsize=chopsize)
            s.kill_after(1)
        return fn
    add("3.2", "text, text with RSV=2, ping: echo then fail", three(2), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)
    add("3.3", "as 3.2 with RSV=3, frame-wise chops", three(3, sync=True), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)
    add("3.4", "as 3.2 with RSV=4, octet-wise chops", three(4, chopsize=1), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)

    def c35(s):
        expect_fail(s)
        s.send_frame(2, b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff", rsv=5)
        s.kill_after(1)
    add("3.5", "binary with RSV=5: fail", c35)

    def c36(s):
        # The suite's description says "Ping with RSV = 6"; on the wire it sends
        # a binary frame with RSV 6. We send what the suite sends.
        expect_fail(s)
        s.send_frame(2, b"Hello, world!", rsv=6)
        s.kill_after(1)
    add("3.6", "frame with RSV=6 (suite sends binary): fail", c36)

    def c37(s):
        expect_fail(s)
        s.send_frame(8, rsv=7)
        s.kill_after(1)
    add("3.7", "close with RSV=7: fail", c37)


# --- Category 4: opcodes --------------------------------------------------------

def _cat4():
    for sub, base in ((1, 3), (2, 11)):
        kind = "non-control" if sub == 1 else "control"

        def alone(op, payload):
            def fn(s):
                expect_fail(s)
                s.send_frame(op, payload)
                s.kill_after(1)
            return fn
        add("4.%d.1" % sub, "reserved %s opcode %d: fail" % (kind, base), alone(base, b""))
        add("4.%d.2" % sub, "reserved %s opcode %d with payload: fail" % (kind, base + 1),
            alone(base + 1, b"reserved opcode payload"))

        def after_text(op, with_payload, chopsize=None):
            def fn(s):
                payload = b"Hello, world!"
                expect_fail(s, ok_events=[("message", payload, False)], ns_events=[])
                s.send_frame(1, payload, chopsize=chopsize)
                s.send_frame(op, payload if with_payload else b"", chopsize=chopsize)
                s.send_frame(9, chopsize=chopsize)
                s.kill_after(1)
            return fn
        add("4.%d.3" % sub, "text, reserved opcode %d, ping: echo then fail" % (base + 2),
            after_text(base + 2, False), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)
        add("4.%d.4" % sub, "text, reserved opcode %d with payload, ping: echo then fail" % (base + 3),
            after_text(base + 3, True), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)
        add("4.%d.5" % sub, "as 4.%d.4 with opcode %d, octet-wise chops" % (sub, base + 4),
            after_text(base + 4, True, chopsize=1), allow={NON_STRICT: R_ECHO_FIRST}, serial=True)


# --- Category 5: fragmentation ------------------------------------------------------

def _cat5():
    def frag_control(op):
        def fn(s):
            expect_fail(s)
            s.send_frame(op, b"fragment1", fin=False)
            s.send_frame(0, b"fragment2", fin=True)
            s.kill_after(1)
        return fn
    add("5.1", "ping in 2 fragments: fail", frag_control(9))
    add("5.2", "pong in 2 fragments: fail", frag_control(10))

    def two_frags(sync=False, chopsize=None):
        def fn(s):
            expect_ok(s, [("message", b"fragment1fragment2", False)])
            s.send_frame(1, b"fragment1", fin=False, sync=sync, chopsize=chopsize)
            s.send_frame(0, b"fragment2", fin=True, sync=sync, chopsize=chopsize)
            s.close_after(1)
        return fn
    add("5.3", "text in 2 fragments", two_frags())
    add("5.4", "text in 2 fragments, frame-wise chops", two_frags(sync=True))
    add("5.5", "text in 2 fragments, octet-wise chops", two_frags(chopsize=1))

    def ping_between(sync=False, chopsize=None):
        def fn(s):
            expect_ok(s, [("pong", b"ping payload"), ("message", b"fragment1fragment2", False)])
            s.send_frame(1, b"fragment1", fin=False, sync=sync, chopsize=chopsize)
            s.send_frame(9, b"ping payload", sync=sync, chopsize=chopsize)
            s.send_frame(0, b"fragment2", fin=True, sync=sync, chopsize=chopsize)
            s.close_after(1)
        return fn
    add("5.6", "text in 2 fragments, ping in between", ping_between())
    add("5.7", "as 5.6, frame-wise chops", ping_between(sync=True))
    add("5.8", "as 5.6, octet-wise chops", ping_between(chopsize=1))

    def nothing_to_continue(fin, sync=False, chopsize=None):
        def fn(s):
            expect_fail(s)
            s.send_frame(0, b"non-continuation payload", fin=fin, sync=sync, chopsize=chopsize)
            s.send_frame(1, b"Hello, world!", sync=sync, chopsize=chopsize)
            s.kill_after(1)
        return fn
    n = 9
    for fin in (True, False):
        for label, kw in (("one chop", {}), ("frame-wise chops", {"sync": True}),
                          ("octet-wise chops", {"chopsize": 1})):
            add("5.%d" % n, "continuation (FIN=%d) with nothing to continue, then text, %s: fail"
                % (fin, label), nothing_to_continue(fin, **kw))
            n += 1

    def c515(s):
        expect_fail(s, ok_events=[("message", b"fragment1fragment2", False)], ns_events=[])
        s.send_frame(1, b"fragment1", fin=False)
        s.send_frame(0, b"fragment2", fin=True)
        s.send_frame(0, b"fragment3", fin=False)
        s.send_frame(1, b"fragment4", fin=True)
        s.kill_after(1)
    add("5.15", "text in 2 fragments, then continuation with nothing to continue, then text: "
        "echo then fail", c515, allow={NON_STRICT: R_ECHO_FIRST}, serial=True)

    def repeated(first_fin):
        def fn(s):
            expect_fail(s)
            for _ in range(2):
                s.send_frame(0, b"fragment1", fin=first_fin)
                s.send_frame(1, b"fragment2", fin=False)
                s.send_frame(0, b"fragment3", fin=True)
            s.kill_after(1)
        return fn
    add("5.16", "2x (continuation FIN=0 with nothing to continue, text in 2 fragments): fail",
        repeated(False))
    add("5.17", "2x (continuation FIN=1 with nothing to continue, text in 2 fragments): fail",
        repeated(True))

    def c518(s):
        expect_fail(s)
        s.send_frame(1, b"fragment1", fin=False)
        s.send_frame(1, b"fragment2", fin=True)
        s.kill_after(1)
    add("5.18", "text in 2 fragments, both with opcode text: fail", c518)

    def pings_mid_message(sync):
        def fn(s):
            frags = [b"fragment%d" % i for i in range(1, 6)]
            pings = [b"pongme 1!", b"pongme 2!"]
            expect_ok(s, [("pong", pings[0]), ("pong", pings[1]), ("message", b"".join(frags), False)])
            s.send_frame(1, frags[0], fin=False, sync=sync)
            s.send_frame(0, frags[1], fin=False, sync=sync)
            s.send_frame(9, pings[0], sync=sync)

            def part2():
                s.send_frame(0, frags[2], fin=False, sync=sync)
                s.send_frame(0, frags[3], fin=False, sync=sync)
                s.send_frame(9, pings[1], sync=sync)
                s.send_frame(0, frags[4], fin=True, sync=sync)
                s.close_after(1)
            s.continue_later(1, part2)
        return fn
    add("5.19", "text in 5 fragments, pings after the 2nd and 4th, 1 s pause", pings_mid_message(False))
    add("5.20", "as 5.19, frame-wise chops", pings_mid_message(True))


# --- Category 6: UTF-8 handling -------------------------------------------------------

HELLO_UTF8 = "Hello-\u00b5@\u00df\u00f6\u00e4\u00fc\u00e0\u00e1-UTF-8!!".encode("utf-8")
KOSME = bytes.fromhex("cebae1bdb9cf83cebcceb5")   # Greek "kosme", 5 code points


def utf8_groups():
    """Test vectors after Markus Kuhn's UTF-8 decoder stress test, grouped and
    ordered as Autobahn numbers them (6.5 ... 6.23). Each entry: (valid, bytes)."""
    h = bytes.fromhex
    g = []
    g.append([(True, b"hello$world"), (True, b"hello" + h("c2a2") + b"world"),
              (True, b"hello" + h("e282ac") + b"world"), (True, b"hello" + h("f0a4ada2") + b"world"),
              (True, KOSME)])
    g.append([(None, KOSME[:i]) for i in range(1, len(KOSME) + 1)])   # prefixes: valid iff complete
    g.append([(True, h("00")), (True, h("c280")), (True, h("e0a080")), (True, h("f0908080"))])
    g.append([(False, h("f888808080")), (False, h("fc8480808080"))])
    g.append([(True, h("7f")), (True, h("dfbf")), (True, h("efbfbf")), (True, h("f48fbfbf"))])
    g.append([(False, h("f7bfbfbf")), (False, h("fbbfbfbfbf")), (False, h("fdbfbfbfbfbf"))])
    g.append([(True, h("ed9fbf")), (True, h("ee8080")), (True, h("efbfbd")), (True, h("f48fbfbf")),
              (False, h("f4908080"))])
    g.append([(False, h("80")), (False, h("bf")), (False, h("80bf")), (False, h("80bf80")),
              (False, h("80bf80bf")), (False, h("80bf80bf80")), (False, h("80bf80bf80bf")),
              (False, bytes(range(0x80, 0xbf)))])
    lonely = []
    for lo, hi in ((0xc0, 0xdf), (0xe0, 0xef), (0xf0, 0xf7), (0xf8, 0xfb), (0xfc, 0xfd)):
        lonely.append((False, b"".join(bytes([c, 0x20]) for c in range(lo, hi))))
    g.append(lonely)
    missing = [h(x) for x in ("c0", "e080", "f08080", "f8808080", "fc80808080",
                              "df", "efbf", "f7bfbf", "fbbfbfbf", "fdbfbfbfbf")]
    g.append([(False, x) for x in missing])
    g.append([(False, b"".join(missing))])
    g.append([(False, h("fe")), (False, h("ff")), (False, h("fefeffff"))])
    g.append([(False, h(x)) for x in ("c0af", "e080af", "f08080af", "f8808080af", "fc80808080af")])
    g.append([(False, h(x)) for x in ("c1bf", "e09fbf", "f08fbfbf", "f887bfbfbf", "fc83bfbfbfbf")])
    g.append([(False, h(x)) for x in ("c080", "e08080", "f0808080", "f880808080", "fc8080808080")])
    g.append([(False, h(x)) for x in ("eda080", "edadbf", "edae80", "edafbf", "edb080", "edbe80", "edbfbf")])
    highs = ("eda080", "edadbf", "edae80", "edafbf")
    g.append([(False, h(a + b)) for a in highs for b in ("edb080", "edbfbf")])
    nonchars = [(True, h("efbfbe")), (True, h("efbfbf"))]
    for lead in (0xf0, 0xf1, 0xf2, 0xf3, 0xf4):
        for second in (0x8f, 0x9f, 0xaf, 0xbf):
            if lead == 0xf4 and second != 0x8f:
                continue                                # above U+10FFFF
            for last in (0xbe, 0xbf):
                seq = bytes([lead, second, 0xbf, last])
                if lead == 0xf0 and second == 0x8f:
                    continue                            # overlong
                nonchars.append((True, seq))
    g.append(nonchars)
    g.append([(True, h(x)) for x in ("efbfb9", "efbfba", "efbfbb", "efbfbc", "efbfbd", "efbfbe", "efbfbf")])
    out = []
    for group in g:
        fixed = []
        for valid, seq in group:
            try:
                seq.decode("utf-8")
                really = True
            except UnicodeDecodeError:
                really = False
            if valid is None:
                valid = really
            assert valid == really, "vector %s mislabelled" % seq.hex()
            fixed.append((valid, seq))
        out.append(fixed)
    return out


def _cat6():
    def echo_frames(frames, message):
        def fn(s):
            expect_ok(s, [("message", message, False)])
            for op, fin, payload in frames:
                s.send_frame(op, payload, fin=fin)
            s.close_after(1)
        return fn
    add("6.1.1", "text message of length 0", echo_frames([(1, True, b"")], b""))
    add("6.1.2", "text in 3 empty fragments", echo_frames([(1, False, b""), (0, False, b""), (0, True, b"")], b""))
    add("6.1.3", "text in 3 fragments, first and last empty",
        echo_frames([(1, False, b""), (0, False, b"middle frame payload"), (0, True, b"")],
                    b"middle frame payload"))

    def message_frag(payload, frag):
        def fn(s):
            expect_ok(s, [("message", payload, False)])
            s.send_message(payload, frag_size=frag)
            s.close_after(1)
        return fn
    add("6.2.1", "valid UTF-8 text in one fragment", message_frag(HELLO_UTF8, None))
    split = len("Hello-\u00b5@\u00df\u00f6\u00e4".encode("utf-8"))
    add("6.2.2", "valid UTF-8 text in 2 fragments split on a code point boundary",
        echo_frames([(1, False, HELLO_UTF8[:split]), (0, True, HELLO_UTF8[split:])], HELLO_UTF8))
    add("6.2.3", "valid UTF-8 text in 1-octet fragments", message_frag(HELLO_UTF8, 1))
    add("6.2.4", "valid UTF-8 text in 1-octet fragments (splits code points)", message_frag(KOSME, 1))

    bad = KOSME + bytes.fromhex("eda080") + b"edited"

    def invalid_msg(payload, frag):
        def fn(s):
            expect_fail(s, code=INVALID_PAYLOAD)
            s.send_message(payload, frag_size=frag)
            s.kill_after(1)
        return fn
    add("6.3.1", "invalid UTF-8 text, unfragmented: fail 1007", invalid_msg(bad, None))
    add("6.3.2", "invalid UTF-8 text in 1-octet fragments: fail 1007", invalid_msg(bad, 1))

    # 6.4: fail fast. The message is valid up to one octet; we pause 1 s after
    # the valid part and 1 s after the octet that makes it invalid. OK = the
    # server fails within the second pause; NON-STRICT = only at the end.
    p2 = bytes.fromhex("f4908080")   # 0x110000 in the UTF-8 scheme: beyond Unicode
    full = KOSME + p2 + b"edited"

    def fail_fast(parts, as_frames):
        def fn(s):
            s.expected = {OK: [("timeout", "A")], NON_STRICT: [("timeout", "A"), ("timeout", "B")]}
            s.expected_close = {"closedByMe": False, "closeCode": [INVALID_PAYLOAD], "requireClean": False}
            if as_frames:
                sends = [build_frame(1, parts[0], fin=False), build_frame(0, parts[1], fin=False),
                         build_frame(0, parts[2], fin=True)]
            else:
                frame = build_frame(1, b"".join(parts))
                head = len(frame) - len(full)
                cut1 = head + len(parts[0])
                cut2 = cut1 + len(parts[1])
                sends = [frame[:cut1], frame[cut1:cut2], frame[cut2:]]
            s.send_raw(sends[0], sync=True)

            def part2():
                if s.state == "OPEN":
                    s.received.append(("timeout", "A"))
                    s.send_raw(sends[1], sync=True)
                    s.continue_later(1, part3)

            def part3():
                if s.state == "OPEN":
                    s.received.append(("timeout", "B"))
                    s.send_raw(sends[2], sync=True)
                    s.kill_after(1)
            s.continue_later(1, part2)
        return fn
    add("6.4.1", "invalid UTF-8 in the 2nd of 3 frames: fail fast",
        fail_fast([KOSME, p2, b"edited"], True), allow={NON_STRICT: R_UTF8_LATE})
    add("6.4.2", "as 6.4.1, the 2nd frame is just the invalidating octet",
        fail_fast([full[:12], full[12:13], full[13:]], True), allow={NON_STRICT: R_UTF8_LATE})
    add("6.4.3", "as 6.4.1, one frame sent in 3 chops",
        fail_fast([KOSME, p2, b"edited"], False), allow={NON_STRICT: R_UTF8_LATE})
    add("6.4.4", "as 6.4.2, one frame sent in 3 chops",
        fail_fast([full[:12], full[12:13], full[13:]], False), allow={NON_STRICT: R_UTF8_LATE})

    for gi, group in enumerate(utf8_groups(), 5):
        for j, (valid, seq) in enumerate(group, 1):
            def fn(s, valid=valid, seq=seq):
                if valid:
                    expect_ok(s, [("message", seq, False)])
                else:
                    expect_fail(s, code=INVALID_PAYLOAD)
                s.send_message(seq)
                s.kill_after(0.5)
            add("6.%d.%d" % (gi, j), "%s UTF-8 text 0x%s" % ("valid" if valid else "invalid",
                                                           seq.hex()[:40]), fn)


# --- Category 7: closing ----------------------------------------------------------

def _cat7():
    def closing(fn_body, codes=(NORMAL,), clean=True):
        def fn(s):
            s.suppress_close = True
            s.expected = {OK: []}
            s.expected_close = {"closedByMe": True, "closeCode": list(codes), "requireClean": clean}
            fn_body(s)
            s.kill_after(1)
        return fn

    def c711(s):
        expect_ok(s, [("message", b"Hello World!", False)])
        s.send_frame(1, b"Hello World!")
        s.kill_after(1)
    add("7.1.1", "message, then close after the echo", c711, post=wrong_code_fails)

    def body712(s):
        s.send_close(NORMAL)
        s.send_frame(8)
    add("7.1.2", "two close frames", closing(body712), post=wrong_code_fails)

    def body713(s):
        s.send_close(NORMAL)
        s.send_frame(9)
    add("7.1.3", "ping after close: no pong", closing(body713), post=wrong_code_fails)

    def body714(s):
        s.send_close(NORMAL)
        s.send_frame(1, b"Hello World!")
    add("7.1.4", "text after close: ignored", closing(body714), post=wrong_code_fails)

    def body715(s):
        s.send_frame(1, b"fragment1", fin=False)
        s.send_close(NORMAL)
        s.send_frame(0, b"fragment2", fin=True)
    add("7.1.5", "fragment, close, last fragment", closing(body715), post=wrong_code_fails)

    def c716(s):
        s.suppress_close = True
        s.expected = {OK: [("message", b"Hello World!", False)], NON_STRICT: []}
        s.expected_close = {"closedByMe": True, "closeCode": [NORMAL], "requireClean": True}
        s.send_frame(1, b"BAsd7&jh23", payload_len=256 * 1024)
        s.send_frame(1, b"Hello World!")
        s.send_close(NORMAL)
        s.send_frame(9)
        s.kill_after(1)

    def post716(result, s=None):
        big = any(e[0] == "message" and len(e[1]) == 256 * 1024 for e in result["_received"])
        hello = ("message", b"Hello World!", False) in result["_received"]
        result["note"] = "256 KiB echoed: %s, 'Hello World!' echoed: %s" % (
            "yes" if big else "no", "yes" if hello else "no")
        result["behavior"] = INFORMATIONAL
        result["behaviorClose"] = INFORMATIONAL
    add("7.1.6", "256 KiB message, small message, close, ping", c716,
        allow={INFORMATIONAL: R_CLOSE_RACE}, post=post716)

    add("7.3.1", "close with empty payload", closing(lambda s: s.send_close(None)),
        post=wrong_code_fails)
    add("7.3.2", "close with 1-octet payload: 1002 or drop",
        closing(lambda s: s.send_close(raw=b"a"), codes=(PROTOCOL_ERROR,), clean=False),
        post=wrong_code_fails)
    add("7.3.3", "close with code 1000", closing(lambda s: s.send_close(NORMAL)), post=wrong_code_fails)
    add("7.3.4", "close with code and reason",
        closing(lambda s: s.send_close(NORMAL, "Hello World!")), post=wrong_code_fails)
    add("7.3.5", "close with 123-octet reason",
        closing(lambda s: s.send_close(NORMAL, "*" * 123)), post=wrong_code_fails)
    add("7.3.6", "close with 124-octet reason (payload 126): 1002 or drop",
        closing(lambda s: s.send_close(NORMAL, "*" * 124), codes=(PROTOCOL_ERROR,), clean=False),
        post=wrong_code_fails)
    badreason = KOSME + bytes.fromhex("eda080") + b"edited"
    add("7.5.1", "close reason not valid UTF-8: 1002/1007 or drop",
        closing(lambda s: s.send_close(NORMAL, badreason), codes=(PROTOCOL_ERROR, INVALID_PAYLOAD),
                clean=False), post=wrong_code_fails)
    for i, code in enumerate([1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011,
                              3000, 3999, 4000, 4999], 1):
        add("7.7.%d" % i, "close with valid code %d: echo it (or 1000)" % code,
            closing(lambda s, c=code: s.send_close(c), codes=(NORMAL, code)), post=wrong_code_fails)
    for i, code in enumerate([0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999], 1):
        add("7.9.%d" % i, "close with invalid code %d: 1002 or drop" % code,
            closing(lambda s, c=code: s.send_close(c), codes=(PROTOCOL_ERROR,), clean=False),
            post=wrong_code_fails)

    def informational(result, s=None):
        result["note"] = "server answered with %s" % (
            result["remoteCloseCode"] if result["remoteCloseCode"] is not None else "no code")
        result["behavior"] = INFORMATIONAL
        result["behaviorClose"] = INFORMATIONAL
    for i, code in enumerate([5000, 65535], 1):
        add("7.13.%d" % i, "close with code %d (undefined)" % code,
            closing(lambda s, c=code: s.send_close(c), codes=(NORMAL, code, PROTOCOL_ERROR), clean=False),
            allow={INFORMATIONAL: R_CODE_UNDEF}, post=informational)


# --- Category 10: miscellaneous ------------------------------------------------------

def _cat10():
    def fn(s):
        payload = b"*" * 65536
        expect_ok(s, [("message", payload, False)])
        s.send_message(payload, frag_size=1300)    # 50 frames of 1300 + one of 536
        s.kill_after(10)
    add("10.1.1", "65536-octet text auto-fragmented into 1300-octet frames", fn)


for _f in (_cat1, _cat2, _cat3, _cat4, _cat5, _cat6, _cat7, _cat10):
    _f()
CASES.sort(key=CaseDef.key)
assert len(CASES) == 247, len(CASES)

# ----------------------------------------------------------------------------
# Running and judging


def judge(s, case):
    behavior = None
    if s.matcher is not None:
        behavior = s.matcher(s.received)
    if behavior is None:
        for verdict, outcome in s.expected.items():
            if s.received == outcome:
                behavior = verdict
                break
    if behavior is None:
        behavior = FAILED
    ec = s.expected_close
    if ec["closedByMe"] != s.closed_by_me:
        close = FAILED
    elif ec["requireClean"] and not s.was_clean:
        close = UNCLEAN
    elif s.remote_close_code is not None and s.remote_close_code not in ec["closeCode"]:
        close = WRONG_CODE
    elif s.dropped_by_me:
        close = FAILED_BY_CLIENT
    else:
        close = OK
    return behavior, close


def describe_events(events, limit=6):
    out = []
    for e in events[:limit]:
        if e[0] == "message":
            out.append("%s(%d)" % ("bin" if e[2] else "text", len(e[1])))
        elif e[0] == "timeout":
            out.append("wait-" + e[1])
        else:
            out.append("%s(%d)" % (e[0], len(e[1])))
    if len(events) > limit:
        out.append("...+%d" % (len(events) - limit))
    return "[" + ", ".join(out) + "]"


def run_case(case, url_parts, origin):
    t0 = time.monotonic()
    s = Session(url_parts, origin)
    result = {"case": case.cid}
    try:
        s.connect()
    except Exception as exc:  # handshake failure: the case cannot run
        try:
            if s.sock:
                s.sock.close()
        except OSError:
            pass
        result.update(behavior=FAILED, behaviorClose=FAILED, remoteCloseCode=None,
                      duration=int(round((time.monotonic() - t0) * 1000)),
                      note="connect/handshake: %s" % exc, _received=[])
        return result
    try:
        case.fn(s)
        s.run()
    except Exception as exc:
        s.notes.append("runner error: %r" % exc)
        try:
            s.drop()
        except Exception:
            pass
    behavior, close = judge(s, case)
    result.update(behavior=behavior, behaviorClose=close, remoteCloseCode=s.remote_close_code,
                  duration=int(round((time.monotonic() - (s.t_open or t0)) * 1000)),
                  _received=s.received)
    if case.post:
        case.post(result)
    note = result.get("note")
    passed = result["behavior"] in PASSING and result["behaviorClose"] in PASSING
    if not note:
        if passed and result["behavior"] in (NON_STRICT, INFORMATIONAL) and result["behavior"] in case.allow:
            note = case.allow[result["behavior"]]
        elif not passed:
            bits = ["got %s" % describe_events(s.received)]
            want = s.expected.get(OK)
            if want is not None:
                bits.append("want %s" % describe_events(want))
            bits.append("closedByMe=%s wasClean=%s droppedByMe=%s" % (
                s.closed_by_me, s.was_clean, s.dropped_by_me))
            if s.not_clean_reason and not any(s.not_clean_reason in n for n in s.notes):
                bits.append(s.not_clean_reason)
            bits.extend(s.notes)
            note = "; ".join(bits)
    result["note"] = note or ""
    return result


def parse_url(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "ws":
        raise SystemExit("only ws:// URLs are supported")
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    return (u.hostname or "127.0.0.1", u.port or 80, path)


def select_cases(patterns):
    if not patterns:
        return list(CASES)
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    return [c for c in CASES if any(fnmatch.fnmatchcase(c.cid, p) for p in pats)]


def load_expected(path):
    with open(path) as fh:
        data = json.load(fh)
    agents = {k: v for k, v in data.items() if not k.startswith("_")}
    if len(agents) != 1:
        raise SystemExit("%s: expected exactly one agent key, found %s" % (path, list(agents)))
    (agent, cases), = agents.items()
    return agent, {k: v for k, v in cases.items() if not k.startswith("_")}


CATEGORY_NAMES = {1: "Framing", 2: "Pings/Pongs", 3: "Reserved Bits", 4: "Opcodes",
                  5: "Fragmentation", 6: "UTF-8 Handling", 7: "Close Handling", 10: "Miscellaneous"}


def main(argv=None):
    global MULT
    ap = argparse.ArgumentParser(description="ab-lite WebSocket conformance runner (Autobahn 1-7, 10)")
    ap.add_argument("--url", help="ws://host:port/path of an echo endpoint")
    ap.add_argument("--cases", default="", help="comma-separated case patterns, e.g. 1.*,6.4.*")
    ap.add_argument("--json", help="write Autobahn-style results {agent: {case: {...}}}")
    ap.add_argument("--expect", help="JSON of expected verdicts; exit non-zero on any difference")
    ap.add_argument("--timeout-mult", type=float, default=1.0,
                    help="scale the kill/close/drop timeouts (slow servers, sanitizers)")
    ap.add_argument("--jobs", type=int, default=8, help="cases run concurrently (default 8)")
    ap.add_argument("--agent", default=None, help="agent name in the JSON output")
    ap.add_argument("--origin", default=None, help="send this Origin header")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)

    if args.list:
        for c in select_cases(args.cases):
            print("%-8s %s" % (c.cid, c.desc))
        print("%d cases" % len(select_cases(args.cases)))
        return 0
    if not args.url:
        ap.error("--url is required")
    MULT = max(0.1, args.timeout_mult)
    url_parts = parse_url(args.url)
    cases = select_cases(args.cases)
    if not cases:
        raise SystemExit("no case matches %r" % args.cases)
    expected_agent, expected = (None, None)
    if args.expect:
        expected_agent, expected = load_expected(args.expect)
    agent = args.agent or expected_agent or "%s:%d" % (url_parts[0], url_parts[1])

    t0 = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = [pool.submit(run_case, c, url_parts, args.origin) for c in cases if not c.serial]
        for fut in concurrent.futures.as_completed(futs):
            r = fut.result()
            results[r["case"]] = r
    for c in cases:
        if c.serial:
            results[c.cid] = run_case(c, url_parts, args.origin)
    elapsed = time.monotonic() - t0

    n_ok = 0
    by_cat = {}
    for c in cases:
        by_cat.setdefault(c.key()[0], []).append(c)
    for cat in sorted(by_cat):
        print("== %d %s" % (cat, CATEGORY_NAMES.get(cat, "")))
        print("  %-8s %-14s %-16s %5s %7s  %s" % ("case", "behavior", "behaviorClose", "code", "ms", "note"))
        cat_ok = 0
        for c in by_cat[cat]:
            r = results[c.cid]
            passed = r["behavior"] in PASSING and r["behaviorClose"] in PASSING
            cat_ok += passed
            code = "-" if r["remoteCloseCode"] is None else str(r["remoteCloseCode"])
            print("  %-8s %-14s %-16s %5s %7d  %s" % (c.cid, r["behavior"], r["behaviorClose"], code,
                                                     r["duration"], r["note"]))
        n_ok += cat_ok
        print("  -- category %d: %d / %d OK" % (cat, cat_ok, len(by_cat[cat])))
    print()
    print("%d / %d tests OK (%.1f s, agent %s)" % (n_ok, len(cases), elapsed, agent))

    if args.json:
        out = {agent: {}}
        for c in cases:
            r = results[c.cid]
            out[agent][c.cid] = {"behavior": r["behavior"], "behaviorClose": r["behaviorClose"],
                                 "remoteCloseCode": r["remoteCloseCode"], "duration": r["duration"]}
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, sort_keys=False)
            fh.write("\n")

    if expected is not None:
        diffs = []
        for c in cases:
            r = results[c.cid]
            want = expected.get(c.cid)
            if want is None:
                diffs.append("%s: not in %s" % (c.cid, args.expect))
                continue
            for field in ("behavior", "behaviorClose", "remoteCloseCode"):
                # a list means: the first value is the published one, the
                # others are accepted too (timing-dependent; see README.md)
                ok_values = want[field] if isinstance(want.get(field), list) else [want.get(field)]
                if field in want and r[field] not in ok_values:
                    diffs.append("%s: %s is %s, expected %s (%s)" % (
                        c.cid, field, r[field], want[field], r["note"]))
        bad_cases = {d.split(":", 1)[0] for d in diffs}
        print("calibration against %s (%s):" % (args.expect, expected_agent))
        for d in diffs:
            print("  DIFF " + d)
        print("  %d cases as expected, %d differ" % (len(cases) - len(bad_cases), len(bad_cases)))
        print("%d passed, %d failed" % (len(cases) - len(bad_cases), len(bad_cases)))
        return 1 if diffs else 0

    print("%d passed, %d failed" % (n_ok, len(cases) - n_ok))
    return 0 if n_ok == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
