#!/usr/bin/python3
"""notify-listen.py - stands in for systemd's notification socket.

    notify-listen.py SOCKET LOG SECONDS

Binds SOCKET (AF_UNIX, SOCK_DGRAM, what NOTIFY_SOCKET names) and appends
every line of every datagram it receives to LOG, as "MONOTONIC_S LINE",
for SECONDS or until a STOPPING=1 arrives. tests/pkg/run.sh runs the
packaged binary with NOTIFY_SOCKET pointing here.
"""
import socket
import sys
import time

path, log, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
sock.settimeout(0.2)
end = time.monotonic() + seconds
with open(log, "a", buffering=1) as out:
    while time.monotonic() < end:
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        for line in lines:
            out.write("%.3f %s\n" % (time.monotonic(), line))
        if "STOPPING=1" in lines:
            break
