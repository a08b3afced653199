#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time, one at a time
# (`go test -fuzz` takes one target of one package per run). Targets are
# found in the source (func FuzzXxx(f *testing.F) in a _test.go file), so a
# new one is fuzzed in CI without editing this script.
#
# The seed corpus under each package's testdata/fuzz/FuzzXxx is run first;
# a crasher the fuzzer finds is written there (keep it: it becomes a
# regression input of `go test` from then on) and fails the run. The
# fuzzer's own generated corpus stays in the Go build cache ($GOCACHE/fuzz),
# so a CI that keeps its cache keeps that too.
#
# FUZZTIME (default 10s) is each target's time; FUZZMINIMIZE (default 5s)
# bounds the minimizing of a failing input; FUZZ='pkg/FuzzName ...'
# restricts the run to those targets (named as the lines printed name them).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZE=${FUZZMINIMIZE:-5s}

targets=()
while IFS= read -r file; do
	dir=$(dirname "$file")
	while IFS= read -r name; do
		targets+=("$dir/$name")
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file")
done < <(git ls-files --cached --others --exclude-standard '*_test.go' 2>/dev/null || find . -name '*_test.go' -printf '%P\n')

if [ -n "${FUZZ:-}" ]; then
	keep=()
	for t in "${targets[@]}"; do
		for want in $FUZZ; do
			[ "$t" = "$want" ] && keep+=("$t")
		done
	done
	targets=("${keep[@]}")
fi

echo "fuzz: ${#targets[@]} targets, $FUZZTIME each"
start=$SECONDS
failed=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# deadline_race reports whether a failed run is Go's fuzzing coordinator
# racing its own -fuzztime deadline (golang/go#75804, unfixed in Go 1.26:
# "context deadline exceeded" as the only failure, no input written)
# rather than a failing input, which always writes one.
deadline_race() {
	grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"
}

for t in "${targets[@]}"; do
	dir=${t%/*}
	name=${t##*/}
	t0=$SECONDS
	ok=false
	for attempt in 1 2 3; do
		if $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZE" "./$dir" >"$log" 2>&1; then
			ok=true
			break
		fi
		deadline_race || break
		echo "fuzz: $t hit the fuzzing coordinator's deadline race (golang/go#75804: no failing input), run $attempt of 3; running it again"
	done
	if $ok; then
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
		echo "fuzz: ok   $t ($((SECONDS - t0)) s, ${execs:-0} execs)"
	else
		echo "fuzz: FAIL $t ($((SECONDS - t0)) s)"
		cat "$log"
		failed+=("$t")
	fi
done
echo "fuzz: ${#targets[@]} targets in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]}"
	echo "fuzz: a failing input the fuzzer found is written under the package's testdata/fuzz/<target>/ (the output above names it): fix the cause and commit the input with the fix, so go test runs it from then on"
	exit 1
fi
