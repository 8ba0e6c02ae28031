#!/usr/bin/python3
"""Reference echo server for ab-lite calibration: Debian 12's python3-websockets
(10.4, the "legacy" asyncio implementation).

Usage: ref_python_echo.py PORT   (listens on 127.0.0.1:PORT, every path)

Every text/binary message is sent back unchanged. max_size is 1 MiB so that
category 1 (64 KiB) and 7.1.6 (256 KiB) fit; no keepalive pings, so the
server never sends a frame the cases do not expect.
"""
import asyncio
import signal
import sys

import websockets


async def echo(ws, path=None):
    try:
        async for message in ws:
            await ws.send(message)
    except websockets.ConnectionClosed:
        pass


async def main(port):
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
    async with websockets.serve(echo, "127.0.0.1", port, max_size=2 ** 20,
                                ping_interval=None, compression=None):
        print("ref_python_echo: websockets %s listening on 127.0.0.1:%d"
              % (websockets.__version__, port), flush=True)
        await stop


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_python_echo.py PORT")
    asyncio.run(main(int(sys.argv[1])))
