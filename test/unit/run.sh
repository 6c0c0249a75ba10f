#!/bin/bash
# The unit tests (make check: GoogleTest of libicbc, the router's tests, the
# WAN emulator's), once in the normal build and once under ASan+UBSan
# (BUILD/asan, configured here on first use with --disable-mpich
# --enable-sanitizers). Prints a line per build, "SKIP: TEST: REASON" for
# each skipped GoogleTest case, and ends with "N passed, N failed, N skipped".
#
# Usage: test/unit/run.sh [--build DIR] [--jobs N] [--only normal|asan]
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/_build
jobs=${ICBC_JOBS:-2}
only=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h | --help) sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build directory $build" >&2; exit 2; }
logs=$build/logs
mkdir -p "$logs"
# the sanitizer build is configured and built from scratch in a new clone:
# through ccache when it is there, as MPICH's build is (contrib/mpich)
if [ -d /usr/lib/ccache ]; then export PATH=/usr/lib/ccache:$PATH; fi

p=0 f=0 s=0
for kind in normal asan; do
    [ -n "$only" ] && [ "$only" != "$kind" ] && continue
    dir=$build
    label=normal
    if [ $kind = asan ]; then
        dir=$build/asan
        label=asan+ubsan
        if [ ! -f "$dir/Makefile" ]; then
            mkdir -p "$dir"
            if ! (cd "$dir" && "$src/configure" --disable-mpich --enable-sanitizers) \
                > "$logs/configure-asan.log" 2>&1; then
                tail -n 20 "$logs/configure-asan.log"
                echo "FAIL: unit tests ($label): configure failed (log: $logs/configure-asan.log)"
                f=$((f + 1))
                continue
            fi
        fi
    fi
    make -C "$dir" -j"$jobs" check > "$logs/unit-$label.log" 2>&1
    # make check rewrites each test program's log (TESTS in the Makefile.mk files)
    mapfile -t tlogs < <(ls "$dir"/test/unit/*.log "$dir"/test/router/*.log \
        "$dir"/contrib/wanemu/*.log 2>/dev/null | grep -v '/test-suite.log$')
    tp=0 tf=0 ts=0
    if [ ${#tlogs[@]} -gt 0 ]; then
        tp=$(grep -hE '^\[  PASSED  \] [0-9]+ test' "${tlogs[@]}" | sed -E 's/.* ([0-9]+) test.*/\1/' | awk '{s+=$1} END {print s+0}')
        tf=$(grep -hE '^\[  FAILED  \] [0-9]+ test' "${tlogs[@]}" | sed -E 's/.* ([0-9]+) test.*/\1/' | awk '{s+=$1} END {print s+0}')
        # A skipped case: gtest prints "file:line: Skipped", the reason, then
        # "[  SKIPPED ] Suite.Name (N ms)".
        while IFS= read -r line; do
            echo "SKIP: $line"
            ts=$((ts + 1))
        done < <(awk '/: Skipped$/ {getline why; reason=why; next}
                      /^\[  SKIPPED \] [A-Za-z_0-9]+\.[A-Za-z_0-9]+ \(/ {print $4 " (" FILENAME "): " reason; reason=""}' "${tlogs[@]}")
    fi
    if ! grep -q '^# FAIL: *0' "$logs/unit-$label.log" || ! grep -q '^# ERROR: *0' "$logs/unit-$label.log"; then
        tail -n 40 "$logs/unit-$label.log"
        [ "$tf" -gt 0 ] || tf=1
        grep -hE '^\[  FAILED  \] [A-Za-z_0-9]+\.' "${tlogs[@]}" 2>/dev/null | sed 's/^/FAILED: /' | sort -u | head -n 20
    fi
    echo "unit tests ($label): $tp passed, $tf failed, $ts skipped (log: $logs/unit-$label.log)"
    p=$((p + tp)); f=$((f + tf)); s=$((s + ts))
done
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
