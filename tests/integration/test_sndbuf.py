"""The slow-reader limit is the real one (issue 15, item 7).

A client that stops reading is cut once what the server holds for it,
its own queue and the kernel's send buffer together, passes
client-output-hard-limit-bytes; before, the kernel's autotuned buffer
(up to tcp_wmem's max, 4 MiB) came on top, so a stalled reader was cut
only after megabytes. The client's own receive buffer is kept tiny, so
nearly everything the server produces stays on the server's side.
"""
import json
import os
import re
import socket
import time
import unittest
import urllib.request

from test_backpressure import ws_handshake, ws_send, ws_wait_for
from test_python_client import Server

HARD = 131072
REF = "r" * 60  # a long ref makes each pong about 110 bytes


def limit_closes(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(int(v) for v in re.findall(
        r'^presenced_output_limit_closes_total\{[^}]*\} (\d+)$', text, re.M))


class SendBufferTest(unittest.TestCase):
    def cut_after(self, *args):
        """Bytes of pongs the server produced for a reader that never reads,
        until the output limit cut it (or None if it never did)."""
        srv = Server("--workers", "1", "--client-output-hard-limit-bytes", str(HARD),
                     "--client-output-soft-limit-bytes", "0", *args)
        try:
            slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", srv.port))
            ws_handshake(slow, "/v1/ws")
            ws_wait_for(slow, "welcome")
            pong = len(json.dumps({"type": "pong", "time": int(time.time() * 1000),
                                   "ref": REF}, separators=(",", ":"))) + 2
            sent = 0
            while sent * pong < 16 * 1024 * 1024:
                try:
                    for _ in range(100):
                        ws_send(slow, {"type": "ping", "ref": REF})
                except OSError:
                    break  # cut and closed already
                sent += 100
                if limit_closes(srv.port) > 0:
                    return sent * pong
            return None if limit_closes(srv.port) == 0 else sent * pong
        finally:
            slow.close()
            self.assertEqual(srv.stop(), 0, srv.log)
            self.assertNotIn("AddressSanitizer", srv.log)

    def test_stalled_reader_is_cut_at_the_configured_limit(self):
        produced = self.cut_after()
        self.assertIsNotNone(produced, "the stalled reader was never cut")
        # The limit, plus the kernel's share that is not yet counted while
        # writes still go through (at most twice client-socket-sndbuf-bytes,
        # 128 KiB), plus the client's tiny receive buffer and one batch.
        self.assertLess(produced, HARD + 2 * 65536 + 32768,
                        f"cut only after {produced} bytes of output")

    def test_sndbuf_zero_leaves_autotuning(self):
        # Documented: without the bound the kernel's buffer grows first and
        # is counted once full, so the cut comes then (megabytes later).
        produced = self.cut_after("--client-socket-sndbuf-bytes", "0")
        self.assertIsNotNone(produced, "the stalled reader was never cut")


if __name__ == "__main__":
    unittest.main()
