#!/usr/bin/env bash
# End-to-end benchmark of `freshet tail` against pg_recvlogical: both drain
# the same WAL from slots made at the same point (200,000 small
# transactions, then one 1,000,000-row transaction), in pgoutput protocol
# versions 1 and 2, one after the other in one run. Results: docs/benchmarks.md.
#
# Usage: scripts/bench-tail.sh [freshet bench-tail flags, e.g. --reps 5 --cpuprofile-dir /tmp/prof,
# or --compare OLD_BINARY to time an older build on the same WAL in the same run]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-postgres.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/freshet" ./cmd/freshet
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(go version)" >&2
"$bin/freshet" bench-tail --freshet "$bin/freshet" "$@"
