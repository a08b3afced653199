#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, postgres) are on this
# machine, installing Debian's postgresql package when it can.
set -euo pipefail

have_server() {
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then return 0; fi
  if command -v pg_config >/dev/null 2>&1; then
    local bin; bin=$(pg_config --bindir 2>/dev/null || true)
    if [ -x "$bin/initdb" ] && [ -x "$bin/postgres" ]; then return 0; fi
  fi
  for bin in /usr/lib/postgresql/*/bin; do
    if [ -x "$bin/initdb" ] && [ -x "$bin/postgres" ]; then return 0; fi
  done
  return 1
}

if have_server; then exit 0; fi

echo "PostgreSQL server binaries not found; installing Debian's postgresql package." >&2
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql postgresql-contrib >/dev/null
  # The package starts a cluster of its own; Freshet's tests start theirs.
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for c in /etc/postgresql/*/main; do
      [ -d "$c" ] || continue
      v=$(basename "$(dirname "$c")")
      pg_ctlcluster "$v" main stop >/dev/null 2>&1 || true
    done
  fi
  have_server && exit 0
fi
echo "Could not install PostgreSQL. Run: sudo apt-get install -y postgresql" >&2
exit 1
