#!/usr/bin/env bash
# tests/pg/cluster.sh - a throwaway PostgreSQL 15 cluster on loopback for
# the tests (stack.md 6.2, option B): initdb and pg_ctl as the postgres
# user, trust authentication, 127.0.0.1 only, no durability settings.
#
#   cluster.sh up     fresh cluster in $PGRUN on $PGPORT, database $PGDATABASE
#   cluster.sh stop   stop it (fast), keep the data: what an outage looks like
#   cluster.sh start  start it again on the same port
#   cluster.sh down   stop it and remove $PGRUN
#
# PGRUN must be traversable by the postgres user (not under /root, not in a
# mktemp -d directory). Run as root (it drops to postgres) or as postgres.
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGRUN=${PGRUN:?PGRUN must name the run directory}
PGPORT=${PGPORT:?PGPORT must name the port}
PGDATABASE=${PGDATABASE:-presence_test}
DATA=$PGRUN/data

as_pg() {
  if [ "$(id -un)" = postgres ]; then sh -c "$1"; else su postgres -s /bin/sh -c "$1"; fi
}

is_running() {
  [ -f "$DATA/postmaster.pid" ] && as_pg "'$PGBIN/pg_ctl' -D '$DATA' status" >/dev/null 2>&1
}

start() {
  is_running && return 0
  rm -f "$DATA/postmaster.pid" # stale after a crash or a reboot
  as_pg "'$PGBIN/pg_ctl' -D '$DATA' -l '$PGRUN/pg.log' -w -t 30 start -o \"-c listen_addresses=127.0.0.1 -p $PGPORT -c unix_socket_directories='$PGRUN' -c fsync=off -c synchronous_commit=off -c full_page_writes=off\"" >/dev/null ||
    { echo "postgres did not start on port $PGPORT:" >&2; tail -20 "$PGRUN/pg.log" >&2; return 1; }
}

stop() {
  [ -f "$DATA/postmaster.pid" ] || return 0
  as_pg "'$PGBIN/pg_ctl' -D '$DATA' -m fast -w -t 30 stop" >/dev/null 2>&1 ||
    as_pg "'$PGBIN/pg_ctl' -D '$DATA' -m immediate -w -t 10 stop" >/dev/null 2>&1 || true
}

up() {
  if [ ! -x "$PGBIN/initdb" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-client >/dev/null
  fi
  stop # a cluster a previous run left behind
  rm -rf "$PGRUN"
  mkdir -p "$PGRUN"
  chmod a+rx "$(dirname "$PGRUN")"
  chown postgres:postgres "$PGRUN"
  as_pg "'$PGBIN/initdb' -D '$DATA' -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8" >"$PGRUN/initdb.log" 2>&1 ||
    { cat "$PGRUN/initdb.log" >&2; return 1; }
  start
  psql -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -qc "CREATE DATABASE $PGDATABASE" >/dev/null
}

case ${1:-} in
up) up ;;
start) start ;;
stop) stop ;;
down) stop; rm -rf "$PGRUN" ;;
*) echo "usage: $0 up|start|stop|down" >&2; exit 2 ;;
esac
