#!/bin/bash
# Smoke run of the libFuzzer targets (docs/fuzzing.md): builds them with
# `make -C BUILD fuzz`, runs each for SECONDS over its seed corpus (new inputs
# go to a temporary directory), prints one line per target and then
# "N passed, N failed". A target fails when it crashes (a violated check, a
# sanitizer report, a slow input) or executes fewer than MIN_RUNS inputs.
# Crashing inputs are kept in BUILD/test/fuzz/artifacts.
#
# Usage: test/fuzz/run.sh [--build DIR] [--seconds S] [--min-runs N] [--no-build]
set -u

src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/_build
seconds=20
min_runs=1000
do_build=1
label=

while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --min-runs) min_runs=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --label) label=$2; shift 2 ;;   # prefix of the summary line (make fuzz-smoke)
    -h | --help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build directory $build" >&2; exit 2; }
if [ $do_build = 1 ] && ! make --no-print-directory -C "$build" fuzz; then
    echo "run.sh: make -C $build fuzz failed" >&2
    echo "${label}0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/icbc-fuzz.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
artifacts=$build/test/fuzz/artifacts
mkdir -p "$artifacts"

pass=0
fail=0
for c in "$src"/test/fuzz/*_fuzz.c; do
    t=$(basename "$c" .c)
    bin=$build/test/fuzz/$t
    log=$tmp/$t.log
    opts=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1
          -artifact_prefix="$artifacts/$t-")
    [ -f "$src/test/fuzz/$t.dict" ] && opts+=(-dict="$src/test/fuzz/$t.dict")
    if [ ! -x "$bin" ]; then
        echo "$t: FAILED (not built: $bin)"
        fail=$((fail + 1))
        continue
    fi
    mkdir -p "$tmp/$t"
    # The first directory gets the new inputs; the seeds are only read.
    "$bin" "${opts[@]}" "$tmp/$t" "$src/test/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    runs=${runs:-0}
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    corp=$(ls "$tmp/$t" | wc -l)
    if [ $rc -ne 0 ]; then
        why=$(grep -m 1 -E 'property violated|^==[0-9]+== ?ERROR|runtime error' "$log")
        unit=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -n 1)
        echo "$t: FAILED (exit $rc: ${why:-see log}; input: ${unit:-none}; log: $artifacts/$t.log)"
        cp "$log" "$artifacts/$t.log"
        fail=$((fail + 1))
    elif [ "$runs" -lt "$min_runs" ]; then
        echo "$t: FAILED ($runs runs in ${seconds}s, fewer than $min_runs; log: $artifacts/$t.log)"
        cp "$log" "$artifacts/$t.log"
        fail=$((fail + 1))
    else
        echo "$t: ok ($runs runs in ${seconds}s, cov ${cov:-?}, $corp new inputs)"
        pass=$((pass + 1))
    fi
done

echo "${label}$pass passed, $fail failed"
[ $fail -eq 0 ]
