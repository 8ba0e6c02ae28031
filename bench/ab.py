#!/usr/bin/env python3
"""ab.py - the A/B table of `bench/run.sh ab REV` from its results.jsonl.

W1: bytes of server RSS per idle connection; W4: deliveries per server
CPU-second at each rate. Each row gives A's and B's median over the runs,
every run's value, and B/A (for W1 below 1 is better, for W4 above 1).
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    w1 = defaultdict(list)
    w4 = defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        side = r["label"].split()[0]
        if r["workload"] == "w1":
            w1[side].append(r["server_rss_per_conn_b"])
        elif r["workload"] == "w4":
            w4[(r["rate"], side)].append(r["deliveries_per_cpu_s"])
    print("| workload | A median | B median | B/A | A runs | B runs |")
    print("|---|---|---|---|---|---|")

    def row(name, a, b, fmt):
        ma, mb = statistics.median(a), statistics.median(b)
        runs = lambda v: ", ".join(fmt.format(x) for x in v)
        print(f"| {name} | {fmt.format(ma)} | {fmt.format(mb)} | {mb / ma:.3f} | {runs(a)} | {runs(b)} |")

    if w1["a"] and w1["b"]:
        row("W1 RSS per idle connection (B)", w1["a"], w1["b"], "{:,.0f}")
    for rate in sorted({k[0] for k in w4}):
        a, b = w4.get((rate, "a")), w4.get((rate, "b"))
        if a and b:
            row(f"W4 deliveries per CPU-s at {rate:,}/s", a, b, "{:,.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
