#!/usr/bin/python3
"""bench/report.py MODE DIR - tables, plot data and checks from DIR/results.jsonl.

Groups the runs of one configuration (the label without its " rN" repeat
suffix), reports the median with min-max of every number, writes
DIR/summary.md (markdown tables) and DIR/*.dat (gnuplot input), prints the
summary, and in quick mode exits 1 if any run had an error or lost a message.
"""
import json
import re
import statistics
import sys
from collections import OrderedDict

mode, out = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]


def group(r):
    return re.sub(r"\s*r\d+$", "", r["label"]).strip()


def runs(w, **match):
    return [r for r in rows if r["workload"] == w and all(r.get(k) == v for k, v in match.items())]


def med(rs, key, fmt="{:,.0f}"):
    vals = [r[key] for r in rs if key in r]
    if not vals:
        return "-", None
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt.format(m), m
    return f"{fmt.format(m)} ({fmt.format(min(vals))}–{fmt.format(max(vals))})", m


def configs(w):
    seen = OrderedDict()
    for r in rows:
        if r["workload"] == w:
            seen.setdefault((r["target"], group(r)), None)
    return list(seen)


lines = []


def table(title, header, body, note=None):
    lines.append(f"### {title}\n")
    if note:
        lines.append(note + "\n")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for b in body:
        lines.append("| " + " | ".join(str(x) for x in b) + " |")
    lines.append("")


def name(t, g):
    n = {"native": "presenced", "pusher": "presenced (Pusher protocol)",
         "phoenix": "presenced (Phoenix protocol)", "sio": "Socket.IO peer",
         "redis": "Redis pub/sub", "sink": "null sink"}[t]
    return f"{n} {g}".strip()


F1 = "{:,.1f}"
F2 = "{:,.2f}"


def pct_of(v, floor):
    """v as a percentage of a floor measurement (medians), or "-"."""
    return f"{100.0 * v / floor:,.0f} %" if v is not None and floor else "-"


def times(v, floor):
    """v over a floor measurement (medians), or "-"."""
    return f"{v / floor:,.2f}×" if v is not None and floor else "-"


def shape_of(rs, *keys):
    return {tuple(r.get(k) for k in keys) for r in rs}


# null sink and W3. The null sink is the floor: the same flood against a
# server that only reads (what the generator can send on this machine, and
# the CPU of reading it); every server row also as a percentage of it, when
# both ran the same flood.
sink = runs("w3", target="sink")
sink_hps, sink_hpc = med(sink, "heartbeats_per_s")[1], med(sink, "heartbeats_per_cpu_s")[1]
body = []
for t, g in configs("w3"):
    rs = [r for r in runs("w3", target=t) if group(r) == g]
    hps, hpc = med(rs, "heartbeats_per_s"), med(rs, "heartbeats_per_cpu_s")
    same = t != "sink" and shape_of(rs, "conns", "offered_rate") == shape_of(sink, "conns", "offered_rate")
    body.append([name(t, g), hps[0], pct_of(hps[1], sink_hps) if same else "-", med(rs, "server_cpu_s", F2)[0],
                 hpc[0], pct_of(hpc[1], sink_hpc) if same else "-", med(rs, "gen_cpu_s", F2)[0], len(rs)])
table("W3 heartbeat flood (and the generator against a null sink)",
      ["server", "heartbeats/s", "% of the null sink", "server CPU s", "heartbeats per server CPU-s",
       "% of the null sink", "generator CPU s", "runs"], body,
      note="Null sink: the same flood against a server that answers the handshake and pings and discards "
           "the rest; its heartbeats/s is what the generator can send on this machine.")

# W1
body = []
for t, g in configs("w1"):
    rs = [r for r in runs("w1", target=t) if group(r) == g]
    body.append([name(t, g), med(rs, "conns")[0], med(rs, "joined")[0], med(rs, "server_rss_per_conn_b")[0],
                 med(rs, "slab_per_conn_b")[0], med(rs, "gen_rss_per_conn_b")[0], med(rs, "idle_cpu_pct", F2)[0]])
table("W1 idle connections", ["server", "connections", "in a room", "server RSS B/conn",
                              "kernel slab B/conn (both ends)", "generator RSS B/conn", "server CPU % while idle"], body)

# W2
body = []
for t, g in configs("w2"):
    if g.startswith("hold"):
        continue
    rs = [r for r in runs("w2", target=t) if group(r) == g]
    body.append([name(t, g), med(rs, "ready")[0], med(rs, "handshakes_per_s")[0], med(rs, "handshakes_per_cpu_s")[0],
                 med(rs, "handshake_p99_ms", F1)[0], med(rs, "connect_failed")[0], len(rs)])
table("W2 connection ramp", ["server", "connected", "handshakes/s", "handshakes per server CPU-s",
                             "connect→welcome p99 ms", "failed", "runs"], body)

# W2 hold, with the null sinks' hold as the floor: the CPU of holding (and
# heartbeating) the connections with no server work, per 20,000 connections.
def hold_per_20k(r):
    return r["idle_cpu_pct"] * 20000 / r["ready"] if r["ready"] else None


holds = [(t, g) for t, g in configs("w2") if g.startswith("hold")]
sink_holds = [r for t, g in holds if t == "sink" for r in runs("w2", target=t) if group(r) == g and r["ready"]]
sink_20k = med([{"per_20k": hold_per_20k(r)} for r in sink_holds], "per_20k")[1]
body = []
for t, g in holds:
    for r in [r for r in runs("w2", target=t) if group(r) == g]:
        p20 = hold_per_20k(r)
        same = t != "sink" and shape_of([r], "hb_ms") == shape_of(sink_holds, "hb_ms")
        body.append([name(t, g), r.get("servers", 1), f"{r['ready']:,}/{r['conns']:,}", f"{r['handshakes_per_s']:,.0f}",
                     f"{r['handshakes_per_cpu_s']:,.0f}", f"{r['hold_s']:.0f}", f"{r.get('hb_ms', 0) / 1000:g}",
                     f"{r.get('answered_after_hold', 0):,}", r["connect_failed"] + r["closed"] + r["errors"],
                     f"{r['idle_cpu_pct']:.2f}", "-" if p20 is None else f"{p20:.2f}",
                     times(p20, sink_20k) if same else "-",
                     f"{r['server_rss_per_conn_b']:,.0f}", f"{r['server_rss_mb']:,.1f}"])
if body:
    table("W2 hold (two server processes)", ["server", "processes", "connected", "handshakes/s",
                                            "handshakes per server CPU-s", "held s", "heartbeat every s",
                                            "answered a ping after the hold", "failed+closed+errors",
                                            "server CPU % of a core while held (both)",
                                            "per 20,000 connections", "÷ the null sinks' (per 20,000)",
                                            "server RSS B/conn", "server RSS MB (both)"], body,
          note="Null sinks: the same hold against two servers that answer the handshake and pings and "
               "discard the heartbeats: the CPU of keeping the sockets and reading the heartbeats alone.")

# W4 (without W5's fan-out on Redis: a floor for the W5 table, not a W4 series)
W5_SHAPE = "w5-shape"
body = []
best = {}
series = []
for t, g in [c for c in configs("w4") if c[1] != W5_SHAPE]:
    rates = sorted({r["rate"] for r in runs("w4", target=t) if group(r) == g})
    fname = f"w4-{len(series)}.dat"
    series.append((fname, name(t, g)))
    dat = open(f"{out}/{fname}", "w")
    dat.write(f"# {name(t, g)}: rate deliveries/s deliveries-per-cpu-s p99-ms\n")
    for rate in rates:
        rs = [r for r in runs("w4", target=t, rate=rate) if group(r) == g]
        dpc = med(rs, "deliveries_per_cpu_s")
        dps = med(rs, "deliveries_per_s")
        p99 = med(rs, "lat_p99_ms", F1)
        loss = sum(r["gaps"] + r["missing"] for r in rs)
        body.append([name(t, g), f"{rs[0]['rooms']}×{rs[0]['room_size']}", f"{rate:,.0f}", dps[0], dpc[0],
                     med(rs, "lat_p50_ms", F1)[0], p99[0], med(rs, "gen_cpu_s", F2)[0], loss, len(rs)])
        dat.write(f"{rate} {dps[1]} {dpc[1]} {p99[1]}\n")
        key = (t, g)
        if dpc[1] and dpc[1] > best.get(key, (0, 0))[0]:
            best[key] = (dpc[1], rate)
    dat.close()
# gnuplot: bench/plot/*.gp load these plot commands (column 3: per CPU-s, 4: p99)
for col, fn in ((3, "w4-cpu-series.gp"), (4, "w4-p99-series.gp")):
    cmds = ", ".join(f"'{f}' using 1:{col} with linespoints title '{n}'" for f, n in series)
    open(f"{out}/{fn}", "w").write(f"plot {cmds}\n")
table("W4 fan-out", ["server", "rooms×members", "transitions/s per room", "deliveries/s",
                     "deliveries per server CPU-s", "p50 ms", "p99 ms", "generator CPU s", "lost (all runs)", "runs"], body)
body = []
for (t, g), (v, rate) in best.items():
    body.append([name(t, g), f"{v:,.0f}", f"{rate:,.0f}"])
table("W4 best deliveries per server CPU-second", ["server", "deliveries per CPU-s", "at rate"], body)

# W4 through the Pusher protocol beside the native one (issue 18's goal:
# server CPU per delivery within 10 % of native). Same server flags and
# workers (2), same sizes and rates; runs paired by repeat (rN). A Pusher
# transition is a client event, which is not echoed to its sender: room_size
# - 1 deliveries against the native room_size, hence per delivery.
def ns_per_delivery(r):
    return 1e9 * r["server_cpu_s"] / r["deliveries"] if r.get("deliveries") else None


def rep_of(r):
    m = re.search(r"r(\d+)$", r["label"])
    return int(m.group(1)) if m else 0


def pusher_pairs(w, g, key, target="pusher"):
    """[(rate or None, {rep: native row}, {rep: target's row})] of workload w, label group g."""
    out_ = []
    keys = sorted({r.get(key) for r in runs(w, target=target) if group(r) == g}, key=lambda v: v or 0)
    for k in keys:
        nat = {rep_of(r): r for r in runs(w, target="native") if group(r) == g and r.get(key) == k}
        pus = {rep_of(r): r for r in runs(w, target=target) if group(r) == g and r.get(key) == k}
        if nat and pus:
            out_.append((k, nat, pus))
    return out_


def pusher_row(nat, pus):
    """Medians of native and Pusher CPU per delivery and the ratio of paired runs."""
    ratios = []
    for k in sorted(set(nat) & set(pus)):
        a, b = ns_per_delivery(nat[k]), ns_per_delivery(pus[k])
        if a and b:
            ratios.append({"ratio": b / a})
    for r in list(nat.values()) + list(pus.values()):
        r["ns_per_delivery"] = ns_per_delivery(r)
    return (med(list(nat.values()), "ns_per_delivery")[0], med(list(pus.values()), "ns_per_delivery")[0],
            med(ratios, "ratio", F2)[0] if ratios else "-")


body = []
for rate, nat, pus in pusher_pairs("w4", "workers=2", "rate"):
    n_ns, p_ns, ratio = pusher_row(nat, pus)
    nv, pv = list(nat.values()), list(pus.values())
    body.append([f"{pv[0]['rooms']}×{pv[0]['room_size']}", f"{rate:,.0f}", med(nv, "deliveries_per_s")[0],
                 med(pv, "deliveries_per_s")[0], n_ns, p_ns, ratio, med(nv, "lat_p99_ms", F1)[0],
                 med(pv, "lat_p99_ms", F1)[0], med(nv, "gen_cpu_s", F2)[0], med(pv, "gen_cpu_s", F2)[0],
                 len(pus)])
if body:
    table("W4 through the Pusher protocol: server CPU per delivery, Pusher vs native (workers=2)",
          ["rooms×members", "transitions/s per room", "deliveries/s native", "Pusher",
           "server CPU ns per delivery native", "Pusher", "Pusher ÷ native (paired runs)",
           "p99 ms native", "Pusher", "generator CPU s native", "Pusher", "runs"], body,
          note="Native: a transition is a metadata patch, batched into one room_delta per subscriber per "
               "50 ms window. Pusher: a client event client-meta on presence-r<room>, relayed to every "
               "other subscriber (no echo: room_size - 1 deliveries), in a hot room together per "
               "subscriber per 50 ms window as the patches are. Goal: ratio ≤ 1.10.")

# W4 scaling: workers=2 vs workers=1. The generator saturates before the
# server, so the maximum throughputs cannot be compared; what is compared
# is the busiest server thread's CPU per delivery at the same offered rate:
# a server saturates when its busiest thread does, so (busiest CPU per
# delivery, workers=1) / (the same, workers=2) is the capacity ratio with
# two free cores. Runs are paired by repeat (rN).
body = []
for prefix in ("", "2x500 "):
    g1, g2 = f"{prefix}workers=1", f"{prefix}workers=2"
    rates = sorted({r["rate"] for r in runs("w4", target="native") if group(r) in (g1, g2)})
    for rate in rates:
        one = {rep_of(r): r for r in runs("w4", target="native", rate=rate) if group(r) == g1}
        two = {rep_of(r): r for r in runs("w4", target="native", rate=rate) if group(r) == g2}
        pairs = []
        for k in sorted(set(one) & set(two)):
            a, b = one[k], two[k]
            if not (a.get("server_busiest_thread_cpu_s") and b.get("server_busiest_thread_cpu_s")):
                continue
            pairs.append({"ratio": (a["server_busiest_thread_cpu_s"] / a["deliveries"]) /
                                   (b["server_busiest_thread_cpu_s"] / b["deliveries"]),
                          "cpu_ratio": (a["server_cpu_s"] / a["deliveries"]) / (b["server_cpu_s"] / b["deliveries"]),
                          "b1": a["server_busiest_thread_cpu_s"], "b2": b["server_busiest_thread_cpu_s"],
                          "c1": a["server_cpu_s"], "c2": b["server_cpu_s"],
                          "d1": a["deliveries_per_s"], "d2": b["deliveries_per_s"]})
        if not pairs:
            continue
        body.append([f"{one[min(one)]['rooms']}×{one[min(one)]['room_size']}", f"{rate:,.0f}",
                     med(pairs, "d1")[0], med(pairs, "d2")[0], med(pairs, "c1", F2)[0], med(pairs, "c2", F2)[0],
                     med(pairs, "b1", F2)[0], med(pairs, "b2", F2)[0], med(pairs, "ratio", F2)[0],
                     med(pairs, "cpu_ratio", F2)[0], len(pairs)])
if body:
    table("W4 scaling, workers=2 vs workers=1 (busiest server thread)",
          ["rooms×members", "transitions/s per room", "deliveries/s w=1", "deliveries/s w=2",
           "server CPU s w=1", "w=2", "busiest thread CPU s w=1", "w=2",
           "capacity ratio (busiest-thread CPU per delivery, w=1 / w=2)",
           "total CPU per delivery, w=1 / w=2", "pairs"], body,
          note="Capacity ratio: a server saturates when its busiest thread does; the ratio of the busiest "
               "thread's CPU per delivery (workers=1 over workers=2) at the same offered rate is the "
               "throughput ratio two free cores would give. Not a measured saturation: the generator "
               "saturates first on this machine.")

# W5
body = []
for t, g in configs("w5"):
    rs = [r for r in runs("w5", target=t) if group(r) == g]
    for r in rs:
        r["delivered_pct"] = 100.0 * r["deliveries"] / r["expected"] if r["expected"] else 0
    body.append([name(t, g), f"{rs[0]['rate']:,.0f}", rs[0].get("senders") or f"all {rs[0]['room_size']} in turn",
                 med(rs, "lat_p50_ms", F2)[0], med(rs, "lat_p99_ms", F2)[0], med(rs, "lat_max_ms", F1)[0],
                 med(rs, "last_p50_ms", F2)[0], med(rs, "last_p99_ms", F2)[0], med(rs, "server_cpu_pct", F1)[0],
                 med(rs, "gen_cpu_s", F2)[0], med(rs, "delivered_pct", "{:.2f}")[0], sum(r["lost"] for r in rs),
                 med(rs, "server_writes_per_member_s", F1)[0], len(rs)])
# The floor: W5's fan-out on Redis pub/sub (W4's generator, label w5-shape),
# one channel, one write per subscriber per publish, no presence work.
shape = [r for r in runs("w4", target="redis") if group(r) == W5_SHAPE]
w5note = None
if shape:
    for r in shape:
        r["server_cpu_pct"] = 100.0 * r["server_cpu_s"] / r["seconds"]
        sent = r["published"] * r["rooms"] * r["room_size"]
        r["delivered_pct"] = 100.0 * r["deliveries"] / sent if sent else 0
    s0 = shape[0]
    body.append([f"Redis pub/sub, same fan-out ({s0['room_size']:,} subscribers, {s0['rate']:,.0f} publishes/s)",
                 f"{s0['rate']:,.0f}", "PUBLISH from the generator", med(shape, "lat_p50_ms", F2)[0],
                 med(shape, "lat_p99_ms", F2)[0], med(shape, "lat_max_ms", F1)[0], "-", "-",
                 med(shape, "server_cpu_pct", F1)[0], med(shape, "gen_cpu_s", F2)[0],
                 med(shape, "delivered_pct", "{:.2f}")[0], sum(r["gaps"] + r["missing"] for r in shape), "-",
                 len(shape)])
    pd = [r for r in runs("w5", target="native") if group(r) == ""]
    if pd and shape_of(pd, "room_size", "rate") == shape_of(shape, "room_size", "rate"):
        body.append(["presenced ÷ Redis pub/sub, same fan-out", "", "",
                     times(med(pd, "lat_p50_ms")[1], med(shape, "lat_p50_ms")[1]),
                     times(med(pd, "lat_p99_ms")[1], med(shape, "lat_p99_ms")[1]), "", "", "",
                     times(med(pd, "server_cpu_pct")[1], med(shape, "server_cpu_pct")[1]), "", "", "", "", ""])
    w5note = ("Redis pub/sub, same fan-out: the floor for W5, W4's generator publishing into one channel of "
              "as many subscribers at the same rate (one write per subscriber per publish, no presence work); "
              "its CPU is over the publishing and the drain after it.")
# W5 through the Pusher protocol: server CPU per delivery against the native
# run of the same shape (the plain W5, not its stress variant).
for _, nat, pus in pusher_pairs("w5", "", "senders"):
    n_ns, p_ns, ratio = pusher_row(nat, pus)
    body.append(["presenced (Pusher protocol) ÷ presenced: server CPU per delivery",
                 "", "", "", "", "", "", "", f"{ratio} ({p_ns} ns against {n_ns} ns)", "", "", "", "", ""])
# W5 through the Phoenix protocol (a cursor is a broadcast): the same ratio.
for _, nat, phx in pusher_pairs("w5", "", "senders", target="phoenix"):
    n_ns, p_ns, ratio = pusher_row(nat, phx)
    body.append(["presenced (Phoenix protocol) ÷ presenced: server CPU per delivery (goal: within 10 %)",
                 "", "", "", "", "", "", "", f"{ratio} ({p_ns} ns against {n_ns} ns)", "", "", "", "", ""])
table("W5 cursor room (and its stress variant)", ["server", "cursors/s", "senders", "p50 ms", "p99 ms", "max ms",
                         "last recipient p50 ms", "last recipient p99 ms", "server CPU % of a core",
                         "generator CPU s", "delivered %", "not delivered (all runs)",
                         "server writes per member per s", "runs"], body, note=w5note)

# W6
body = []
for t, g in configs("w6"):
    c = [r for r in runs("w6", target=t, step=0) if group(r) == g]
    e = [r for r in runs("w6", target=t, step=1) if group(r) == g]
    body.append([name(t, g), med(c, "ops_per_s")[0], med(c, "server_cpu_s", F2)[0], med(c, "gen_cpu_s", F2)[0],
                 med(c, "join_p50_ms", F1)[0], med(c, "join_p99_ms", F1)[0],
                 med(c, "leave_p99_ms", F1)[0], f"{med(e, 'detected')[0]}/{med(e, 'victims')[0]}",
                 med(e, "offline_p50_ms")[0], med(e, "offline_max_ms")[0], med(e, "detect_over_ttl_max_ms")[0],
                 med(e, "server_cpu_s", F2)[0], len(c)])
table("W6 churn and expiry", ["server", "join+leave/s", "server CPU s (churn)", "generator CPU s", "join→event p50 ms", "join p99 ms", "leave p99 ms",
                              "victims detected", "offline after last heartbeat p50 ms", "max ms",
                              "max − TTL ms", "expiry phase CPU s", "runs"], body)

body = []
for t, g in configs("w6"):
    e = [r for r in runs("w6", target=t, step=1) if group(r) == g and r.get("probes")]
    if not e:
        continue
    for r in e:
        r["added_p99"] = r["probe_burst_p99_ms"] - r["probe_base_p99_ms"]
    body.append([name(t, g), e[0]["probes"], f"{e[0]['probe_rate']:,.0f}", med(e, "probe_base_n")[0],
                 med(e, "probe_base_p50_ms", F2)[0], med(e, "probe_base_p99_ms", F2)[0],
                 med(e, "probe_burst_n")[0], med(e, "probe_burst_p50_ms", F2)[0],
                 med(e, "probe_burst_p99_ms", F2)[0], med(e, "probe_burst_max_ms", F1)[0],
                 med(e, "added_p99", F2)[0] if all(r["probe_base_n"] for r in e) else "-",
                 med(e, "gen_gap_base_max_ms", F1)[0], med(e, "gen_gap_burst_max_ms", F1)[0],
                 med(e, "server_cpu_s", F2)[0], len(e)])
if body:
    table("W6 expiry burst: another room's cursor latency", ["server", "probes", "cursors/s",
          "baseline samples", "baseline p50 ms", "baseline p99 ms", "burst samples", "burst p50 ms",
          "burst p99 ms", "burst max ms", "added p99 ms", "generator's longest loop stall ms, baseline",
          "burst", "expiry phase CPU s", "runs"], body,
          note="Baseline: 0.5 s after the victims fall silent until TTL − 1.5 s; burst: TTL − 1 s to TTL + 1.5 s. "
               "A generator stall (its own loop busy, e.g. with the victims' closes) delays the probes too.")

# W8
body = []
for t, g in configs("w8"):
    rs = {s: [r for r in runs("w8", target=t, step=s) if group(r) == g] for s in range(4)}
    if not rs[0]:
        continue
    body.append([name(t, g), f"{rs[0][0]['room_size']}", f"{rs[0][0]['rate']:,.0f}",
                 med(rs[0], "deliveries_per_s")[0], med(rs[0], "lat_p99_ms", F1)[0], med(rs[1], "lat_p99_ms", F1)[0],
                 med(rs[2], "lat_p99_ms", F1)[0], med(rs[0], "server_peak_rss_mb", F1)[0],
                 med(rs[1], "server_peak_rss_mb", F1)[0], med(rs[2], "server_peak_rss_mb", F1)[0],
                 med(rs[1], "tcp_peak_mb", F1)[0], sum(r["slow_closed"] for s in range(3) for r in rs[s])])
table("W8 slow consumer", ["server", "members", "transitions/s", "deliveries/s", "healthy p99 ms before",
                          "during the stall", "after",
                           "server peak RSS MB before", "during", "after",
                           "machine TCP buffers peak MB (stall)", "slow member disconnected"], body)
body = []
for t, g in configs("w8"):
    rs = [r for r in runs("w8", target=t, step=3) if group(r) == g]
    if rs:
        body.append([name(t, g), med(rs, "conns")[0], med(rs, "rejoined")[0], med(rs, "resumed")[0],
                     med(rs, "retries")[0], med(rs, "resync_s", F2)[0], med(rs, "resync_p50_ms")[0],
                     med(rs, "resync_p99_ms")[0], med(rs, "server_cpu_s", F2)[0], len(rs)])
table("W8 reconnect storm", ["server", "connections", "back in their room", "sessions resumed",
                             "reconnects retried", "time to full resync s", "per-client p50 ms",
                             "p99 ms", "server CPU s", "runs"], body)

# W7 (bench/w7.mjs writes its own rows: it runs its own servers)
try:
    w7 = [json.loads(l) for l in open(f"{out}/w7.jsonl") if l.strip()]
except OSError:
    w7 = []
body = []
for r in w7:
    x = r["extrapolated_1m"]
    body.append([r["topology"], f"{r['users']:,}", f"{r['redis_cmds_per_heartbeat']:.3f}",
                 f"{r['redis_cmds_per_transition']:.2f}", f"{r['redis_cmds_in_scripts_per_transition']:.1f}",
                 f"{r['same_p50_ms']} / {r['same_p99_ms']}", f"{r['cross_p50_ms']} / {r['cross_p99_ms']}",
                 f"{r['burst_ops_per_s']:,.0f}", f"{r['redis_cpu_ms_per_s_per_1k_users']:.2f}",
                 f"{r['redis_bytes_per_user']:,.0f}", f"{x['cmds_per_s']:,.0f}", f"{x['memory_gb']:.2f}"])
if body:
    table("W7 many nodes over Redis", ["topology", "users", "Redis commands per heartbeat",
          "per transition", "run inside its script", "same-node p50 / p99 ms", "cross-node p50 / p99 ms",
          "presence ops/s (burst)", "Redis CPU ms per s per 1,000 users", "Redis bytes per user",
          "1 M users: Redis commands/s", "1 M users: Redis GB"], body,
          note="Heartbeats: every user beats once a second; lease renewals subtracted (probes remain). "
               "Transitions: custom-status changes on node 1, watched on node 1 and on the last node. "
               "1 M users: 20 nodes, 12 transitions per user-hour, 15 s heartbeats.")

# W9 (bench/w9.mjs writes its own rows: it runs its own servers)
try:
    w9 = [json.loads(l) for l in open(f"{out}/w9.jsonl") if l.strip()]
except OSError:
    w9 = []
body = []
for r in w9:
    def opt(k, f="{:,.0f}"):
        return "–" if r.get(k) is None else f.format(r[k])
    body.append([r["scenario"], r["nodes"], f"{r['clients']:,}", r["flaps"], r.get("unknown_seen", 0),
                 f"{r['resumed']:,} / {r['new_sessions']:,}", f"{r['peak_per_s']:,.0f} / {r['mean_per_s']:,.0f}",
                 opt("peak_over_mean", "{:.2f}"),
                 opt("full_resync_ms", "{:,.0f}"), opt("redis_cmds_per_s"), opt("redis_cmds_peak_per_s")])
if body:
    table("W9 restarts and deploys", ["scenario", "nodes", "clients", "flaps seen by watchers", "unknown seen",
          "sessions resumed / new", "reconnects per s: peak / mean", "peak / mean", "full re-sync ms",
          "Redis commands/s: mean", "peak"], body,
          note="single: SIGTERM (a drain over the window), the clean stop, and a start on the same port and store. "
               "rolling: three nodes on one Redis, each drained and restarted in turn (peak / mean: the worst step's). "
               "A flap is a watched user shown offline (every client comes back). Goals: 0 flaps, peak <= 2x mean.")

try:
    lines.insert(0, "Machine and run:\n\n```\n" + open(f"{out}/machine.txt").read() + "```\n")
except OSError:
    pass
text = "\n".join(lines)
open(f"{out}/summary.md", "w").write(text)
print(text)

# Checks: errors and loss, never speed.
bad = []
for r in rows:
    what = f"{r['workload']} {r['target']} {r['label']} step {r['step']}"
    for k in ("errors", "connect_failed", "closed"):
        if r.get(k, 0) > 0:
            bad.append(f"{what}: {k}={r[k]}")
    # the null sinks are floors: a W2 or W3 row of theirs counts only if
    # every connection was held and answered (the checks below)
    if r["target"] not in ("native", "sink", "pusher", "phoenix"):
        continue
    if r["workload"] in ("w4", "w5") and r.get("deliveries", 1) == 0:
        bad.append(f"{what}: no deliveries")
    # a Pusher client event is never merged: a skipped id is a lost event
    if r["target"] == "pusher" and r.get("gaps", 0) > 0:
        bad.append(f"{what}: gaps={r['gaps']}")
    # gaps are not loss in presenced: consecutive patches of one member that
    # meet in one batch window are merged (latest wins); "missing" is loss
    # the W5 stress variant overloads the room on purpose: a socket over half
    # its output limit skips ephemeral data (by design), so it is not loss
    stress = r["workload"] == "w5" and r.get("senders", 0) > 0
    for k in ("dups", "missing", "lost"):
        if r.get(k, 0) > 0 and not (r["workload"] == "w8" and r["step"] > 0) and not (stress and k == "lost"):
            bad.append(f"{what}: {k}={r[k]}")
    if r["workload"] == "w1" and r["joined"] < r["conns"]:
        bad.append(f"{what}: only {r['joined']} of {r['conns']} joined")
    if r["workload"] == "w2" and r["ready"] < r["conns"]:
        bad.append(f"{what}: only {r['ready']} of {r['conns']} connected")
    if r["workload"] == "w2" and "answered_after_hold" in r and r["answered_after_hold"] < r["ready"]:
        bad.append(f"{what}: only {r['answered_after_hold']} of {r['ready']} answered after the hold")
    if r["workload"] == "w3" and r["barrier_ok"] < r["conns"]:
        bad.append(f"{what}: only {r['barrier_ok']} of {r['conns']} answered the barrier")
    if r["workload"] == "w6" and r["step"] == 1 and r["detected"] < r["victims"]:
        bad.append(f"{what}: detected {r['detected']} of {r['victims']} expiries")
    if r["workload"] == "w8" and r["step"] == 3 and r["rejoined"] < r["conns"]:
        bad.append(f"{what}: {r['rejoined']} of {r['conns']} rejoined")
for b in bad:
    print("CHECK FAILED:", b, file=sys.stderr)
if mode == "quick" and bad:
    sys.exit(1)
