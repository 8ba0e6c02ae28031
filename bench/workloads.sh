# bench/workloads.sh - every parameter of the benchmark suite, in one place.
# Sourced by bench/run.sh with MODE set to quick or full. Sizes are
# generator flags (presence-bench --help); *_SRV are server flags.
#
# quick: small sizes, one run each; checks errors and loss, never speed.
# full:  the workloads of issue 6 / performance.md section 5, REPS runs
#        each, presenced and its peer alternated (A B A B).

SECRET=${BENCH_JWT_SECRET:-presence-bench-hs256-secret-0123456789abcdef}
# Server flags every presenced run gets: JWT auth like production, no
# static files, room for 19,000 clients under the 20,000 fd limit
# (PD_BASE_OLD: what every revision takes, for bench/run.sh ab's side A).
# The per-address pending cap is off: the generator opens thousands of
# sockets from a few loopback addresses at once (the benchmarks set what
# they need; loopback is not exempt). /metrics needs a key under auth = jwt:
# the generator sends the JWT secret as the metrics key.
PD_BASE_OLD="--auth jwt --jwt-hs256-secret $SECRET --log-level warn --static-dir= --sdk-dir= --max-connections 19900"
PD_BASE="$PD_BASE_OLD --max-pending-per-address 0 --metrics-key $SECRET"

if [ "$MODE" = quick ]; then
  REPS=1
  PROCS=2
  W1="--conns 400 --room-size 20 --hold-s 1 --hb-ms 500"
  W2="--conns 600 --hold-s 1"
  W3="--conns 200 --rate 5000 --step-s 1"
  SINK_W3="$W3" # the same flood: report.py compares the two
  W3_WORKERS="1 2"
  W4_ROOMS="--rooms 1 --room-size 100 --step-s 1"
  W4_RATES_NATIVE=200,500
  W4_RATES_SIO=100
  W4_RATES_REDIS=200
  W4_WORKERS="2"
  W4_2X500=""
  W4_2X500_RATES=""
  W5="--room-size 50 --rate 20 --step-s 2"
  W5S="--room-size 50 --rate 300 --senders 10 --step-s 1"
  W5S_SIO_REPS=1
  W5_REDIS="--rooms 1 --room-size 50 --step-s 1 --rates 20"
  W2H="--conns 600 --hold-s 2 --hb-ms 1000"
  W2H_SINK="$W2H"
  W6_TTL=2000 W6_HB=500
  W6="--rooms 20 --churners 40 --victims 100 --rate 200 --warmup-s 0.5 --step-s 1 --probes 10 --probe-rate 100"
  W6_RATES_LOW="100"
  W8="--room-size 50 --rate 100 --victims 1 --step-s 1 --hold-s 1"
  W8_SIO="$W8"
  W8S="--conns 300 --room-size 50 --jitter-ms 200"
  PEERS_W1=0
else
  REPS=3
  PROCS=2
  SINK_W3="--conns 10000 --rate 400000 --step-s 3"
  W1="--conns 19000 --room-size 50 --hold-s 32 --hb-ms 15000"
  W2="--conns 10000 --hold-s 3"
  W3="--conns 10000 --rate 400000 --step-s 3"
  # presenced with one worker too: the generator takes about one of the two
  # cores, so two workers and the generator contend for them
  W3_WORKERS="1 2"
  W4_ROOMS="--rooms 1 --room-size 1000 --step-s 2"
  W4_RATES_NATIVE=250,500,1000,2000,4000
  W4_RATES_SIO=25,50,100
  W4_RATES_REDIS=250,500,1000,2000
  W4_WORKERS="1 2"
  W4_2X500="--rooms 2 --room-size 500 --step-s 2"
  W4_2X500_RATES=1000,2000,4000
  W5="--room-size 500 --rate 50 --step-s 10"
  # W5 stress: 50 fixed senders x 30 Hz = 1,500 cursors/s into 500 members,
  # measured after 2 s (the room turns to 33 ms ticks after its first full second)
  W5S="--room-size 500 --rate 1500 --senders 50 --step-s 5 --warmup-s 2"
  W5S_SIO_REPS=1 # the peer is saturated ~15x over (W4: ~50,000 deliveries/s)
  # W5's fan-out on Redis pub/sub (W4's generator): one channel, 500
  # subscribers, 50 publishes/s = 25,000 deliveries/s, one write each
  W5_REDIS="--rooms 1 --room-size 500 --step-s 10 --rates 50"
  # W2 hold: two presenced processes (each under the 20,000 fd limit),
  # 19,900 connections each, heartbeating every 15 s, held 60 s (issue 6
  # says 10 minutes: scaled to fit the 15-minute suite)
  W2H="--conns 39800 --hold-s 60 --hb-ms 15000"
  # the same hold against two null sinks (the floor: keeping the sockets and
  # reading the heartbeats, nothing more), shorter to fit the suite
  W2H_SINK="--conns 39800 --hold-s 30 --hb-ms 15000"
  W6_TTL=5000 W6_HB=1000
  # 20 probes in one more room send 200 cursors/s through the expiry burst
  W6="--rooms 1000 --churners 2000 --victims 10000 --rate 10000 --warmup-s 1 --step-s 5 --probes 20 --probe-rate 200"
  # one more presenced run of W6 at a rate this machine is not saturated by
  # (server and generator together ~1.2 cores): where the churn goal holds
  W6_RATES_LOW="3000"
  W8="--room-size 500 --rate 1000 --pad 800 --victims 1 --step-s 3 --hold-s 12"
  # the peer at a rate it can carry (W4: ~50,000 deliveries/s), or its
  # baseline is already overloaded
  W8_SIO="--room-size 500 --rate 60 --pad 800 --victims 1 --step-s 3 --hold-s 12"
  W8S="--conns 19000 --room-size 50 --jitter-ms 1000"
  PEERS_W1=1
fi

# W7 many nodes over Redis (bench/w7.mjs): users spread over the nodes, every
# topology in full mode; one small topology as the smoke run
if [ "$MODE" = quick ]; then
  W7="--users 200 --seconds 2 --rate 100 --burst 200 --topologies 2n-1r"
else
  W7="--users 4000 --seconds 10 --rate 200 --burst 4000 --topologies 2n-1r,3n-1r,2n-2s,2n-cluster,socket.io"
fi

# W9 restarts and deploys (bench/w9.mjs): 20,000 clients (19,000 on the
# single node: one process holds every socket) through a drain and restart
# of one node, and a rolling restart of three nodes on one Redis
if [ "$MODE" = quick ]; then
  W9="--clients 400 --watchers 10 --watch 50 --procs 2 --window-ms 1000 --grace-ms 10000"
else
  W9="--clients 20000 --watchers 200 --watch 200 --procs 4 --window-ms 5000 --grace-ms 5000"
fi

# W4 and W5 through the Pusher protocol (issue 18): presenced with a Pusher
# app whose client events are on, the generator's members on /app/KEY in
# presence-r<room>; transitions and cursors are client events (client-meta,
# client-cursor). Same sizes as the native runs; W5 stress is not run (its
# 30 Hz senders are over Pusher's 10 client events per second per socket).
# member-limit: W4 rooms have 1,000 members, over Pusher's default 100.
PUSHER_APP="presencebench:presence-bench-key:presence-bench-pusher-secret-0123456789"
PD_PUSHER="--pusher-app $PUSHER_APP:client-events=true:member-limit=10000"
W4_RATES_PUSHER=$W4_RATES_NATIVE

# presenced flags per workload (added to PD_BASE)
PD_W4="--room-interval-members 100000" # rooms of 1,000 stay in normal mode: every patch listed
PD_W6="--session-ttl-ms $W6_TTL --heartbeat-interval-ms 1000 --heartbeat-min-ms 200"
PD_W5S="--ephemeral-rate 40" # 30 Hz per sender passes the per-sender limit (default 15/s)
# ab (bench/run.sh ab REV): W1 and W4 with the full-mode sizes, A and B
# alternating; W4 at rates below the one-worker saturation point
AB_REPS=3
AB_W4_RATES=500,1000,2000
