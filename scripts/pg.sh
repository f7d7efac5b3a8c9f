#!/usr/bin/env bash
# A private PostgreSQL for this checkout: data under .data/pg, listening on
# 127.0.0.1:$PGPORT (default 54329) only, trust auth for local use.
#
#   scripts/pg.sh start   initialise if needed, start, create the databases
#   scripts/pg.sh stop    stop it
#   scripts/pg.sh status  say whether it runs
#
# It uses the installed PostgreSQL server binaries. When they are missing and
# we are root, it installs Debian's postgresql package; otherwise it says
# what to install. The server refuses to run as root, so as root the cluster
# runs as the postgres user.
set -euo pipefail

cmd=${1:-start}
root=$(cd "$(dirname "$0")/.." && pwd)
port=${PGPORT:-54329}
datalink=$root/.data/pg
databases=(domainclass domainclass_test)

say() { printf 'pg: %s\n' "$*" >&2; }

find_bindir() {
  local d
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then echo "$PG_BINDIR"; return 0; fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir)
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"; return 0
  fi
  return 1
}

install_postgres() {
  if [ "$(id -u)" -ne 0 ]; then
    say "PostgreSQL server binaries (initdb, pg_ctl) were not found."
    say "Install them, for example on Debian/Ubuntu:  sudo apt-get install -y postgresql"
    say "or set PG_BINDIR to the directory that holds initdb and pg_ctl."
    exit 1
  fi
  say "PostgreSQL is not installed; installing Debian's postgresql package (a minute or two)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
}

# as_owner runs a command as the cluster's owner: ourselves, or postgres
# when we are root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# data_dir returns the real data directory. As root the postgres user must be
# able to reach it; when the checkout is not reachable (a home directory with
# mode 700), the data lives under /var/tmp and .data/pg links to it.
data_dir() {
  mkdir -p "$root/.data"
  if [ -L "$datalink" ]; then readlink -f "$datalink"; return; fi
  if [ -d "$datalink" ]; then echo "$datalink"; return; fi
  if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$root/.data"; then
    local alt
    alt=/var/tmp/domainclass-pg-$(printf '%s' "$root" | sha1sum | cut -c1-12)
    mkdir -p "$alt"
    ln -s "$alt" "$datalink"
    echo "$alt"
    return
  fi
  mkdir -p "$datalink"
  echo "$datalink"
}

psql_cmd() {
  local psql=psql
  [ -x "$bindir/psql" ] && psql=$bindir/psql
  "$psql" -X -q -h 127.0.0.1 -p "$port" -U postgres "$@"
}

start() {
  bindir=$(find_bindir) || { install_postgres; bindir=$(find_bindir) || { say "initdb still not found after installing"; exit 1; }; }
  data=$(data_dir)
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || { say "the postgres user does not exist; install Debian's postgresql package"; exit 1; }
    chown postgres: "$data"
    chmod 700 "$data"
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    say "initialising a cluster in $data"
    as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
  fi
  if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    say "already running on 127.0.0.1:$port"
  else
    say "starting PostgreSQL on 127.0.0.1:$port"
    as_owner "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories= -c max_connections=300" \
      start >/dev/null || { say "PostgreSQL did not start; its log:"; tail -n 30 "$data/server.log" >&2; exit 1; }
  fi
  for db in "${databases[@]}"; do
    if [ "$(psql_cmd -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
      psql_cmd -d postgres -c "CREATE DATABASE $db" >/dev/null
      say "created database $db"
    fi
  done
  say "ready: postgres://postgres@127.0.0.1:$port/domainclass"
}

stop() {
  bindir=$(find_bindir) || { say "PostgreSQL is not installed; nothing to stop"; return 0; }
  if [ ! -e "$datalink" ]; then say "no cluster in .data/pg"; return 0; fi
  data=$(data_dir)
  if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    say "stopped"
  else
    say "not running"
  fi
}

status() {
  bindir=$(find_bindir) || { say "PostgreSQL is not installed"; exit 1; }
  data=$(data_dir)
  as_owner "$bindir/pg_ctl" -D "$data" status
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) say "usage: scripts/pg.sh start|stop|status"; exit 2 ;;
esac
