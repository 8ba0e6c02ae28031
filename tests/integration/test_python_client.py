"""Drive the real presenced binary with Debian's python3-websockets client.

Run with Debian's interpreter (/usr/bin/python3): it sees python3-websockets.
The server is started on a free port (--port 0) and read back from its log.
"""
import asyncio
import json
import os
import re
import signal
import subprocess
import tempfile
import unittest
import urllib.request

import websockets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PRESENCED_BIN", os.path.join(ROOT, "build/asan/presenced"))


class Server:
    def __init__(self, *args):
        self.tmp = tempfile.TemporaryDirectory(prefix="presenced-store-")
        self.proc = subprocess.Popen(
            [BIN, "--port", "0", "--bind", "127.0.0.1",
             "--store", os.path.join(self.tmp.name, "presenced.db"), *args],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = ""
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server did not start:\n" + self.log)
            self.log += line
            m = re.search(r"listening on http://[^ ]*:(\d+) ", line)
            if m:
                self.port = int(m.group(1))
                break

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=15)
        self.log += err
        self.tmp.cleanup()
        return self.proc.returncode


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--workers", "2")
        cls.url = f"ws://127.0.0.1:{cls.srv.port}"

    @classmethod
    def tearDownClass(cls):
        code = cls.srv.stop()
        assert code == 0, cls.srv.log
        assert "AddressSanitizer" not in cls.srv.log, cls.srv.log

    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 20))

    def test_welcome_and_ping(self):
        async def go():
            async with websockets.connect(self.url + "/v1/ws", subprotocols=["presenced.v1"]) as ws:
                self.assertEqual(ws.subprotocol, "presenced.v1")
                welcome = json.loads(await ws.recv())
                self.assertEqual(welcome["type"], "welcome")
                await ws.send(json.dumps({"type": "ping", "ref": "py"}))
                pong = json.loads(await ws.recv())
                self.assertEqual((pong["type"], pong["ref"]), ("pong", "py"))
                # The client's own ping/pong (RFC 6455 control frames).
                waiter = await ws.ping(b"hello")
                await asyncio.wait_for(waiter, 5)
        self.run_async(go())

    def test_oversized_message_closes_1009(self):
        async def go():
            async with websockets.connect(self.url + "/v1/ws", max_size=None) as ws:
                await ws.recv()
                await ws.send("x" * 70000)
                with self.assertRaises(websockets.ConnectionClosed) as cm:
                    await ws.recv()
                self.assertEqual(cm.exception.code, 1009)
        self.run_async(go())

    def test_echo_fragmented_unicode(self):
        async def go():
            async with websockets.connect(self.url + "/test/echo") as ws:
                text = "héllo wörld ✓ 😀" * 100
                await ws.send(iter([text[:7], text[7:300], text[300:]]))  # fragmented message
                self.assertEqual(await ws.recv(), text)
                await ws.send(b"\x00\x01\x02")
                self.assertEqual(await ws.recv(), b"\x00\x01\x02")
        self.run_async(go())

    def test_clean_close(self):
        async def go():
            ws = await websockets.connect(self.url + "/v1/ws")
            await ws.recv()
            await ws.close(code=4000, reason="bye")
            self.assertEqual(ws.close_code, 4000)
        self.run_async(go())

    def test_http_healthz_with_urllib(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.srv.port}/healthz", timeout=5) as r:
            self.assertEqual(r.status, 200)
            self.assertEqual(json.loads(r.read())["status"], "ok")


if __name__ == "__main__":
    unittest.main()
