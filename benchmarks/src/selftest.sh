#!/bin/bash
# Self-test of the benchmark programs on one host (no testbed): each one builds with the
# given MPI, runs on small sizes and prints a well-formed CSV; --corrupt (one received byte
# flipped before the payload check) must make it fail; bad options must be refused.
#
# Usage: benchmarks/src/selftest.sh [PREFIX]   (default /usr: Debian's MPICH)
# Prints PASS/FAIL per check and 'N passed, N failed'; exit status 1 on any failure.

set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${1:-/usr}
MPICC=$PREFIX/bin/mpicc.mpich; [[ -x $MPICC ]] || MPICC=$PREFIX/bin/mpicc
MPIEXEC=$PREFIX/bin/mpiexec.mpich; [[ -x $MPIEXEC ]] || MPIEXEC=$PREFIX/bin/mpiexec
[[ -x $MPICC && -x $MPIEXEC ]] || { echo "selftest: no mpicc/mpiexec in $PREFIX/bin" >&2; exit 2; }
WORK=$(mktemp -d /tmp/icbc-bench-selftest.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# Same-host ranks: keep UCX on its shared-memory transports, bounded in time.
export UCX_TLS=${UCX_TLS:-sm,self}
T=60
pass=0 fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
ko() { echo "FAIL: $*"; fail=$((fail + 1)); }

# csv_ok FILE HEADER ROWS: header line then ROWS rows of numbers with as many fields
csv_ok() {
    local f=$1 header=$2 rows=$3 n
    [[ $(head -1 "$f") == "$header" ]] || return 1
    n=$(tail -n +2 "$f" | grep -cE '^[0-9]+(,[0-9]+(\.[0-9]+)?)+$')
    [[ $n == "$rows" && $(wc -l < "$f") == $((rows + 1)) ]]
}

declare -A HDR=([latency]=size,latency_us [bw]=size,bandwidth_mbps
                [mbw_mr]=size,bandwidth_mbps,messages_per_s [alltoall]=size,alltoall_us)
declare -A NP=([latency]=2 [bw]=2 [mbw_mr]=4 [alltoall]=3)
declare -A EXTRA=([latency]='' [bw]='--window 8' [mbw_mr]='--window 8' [alltoall]='')

for b in latency bw mbw_mr alltoall; do
    exe=$WORK/icbc_$b
    if "$MPICC" -O2 -Wall -Wextra -Werror -I"$HERE" -o "$exe" "$HERE/icbc_$b.c" 2> "$WORK/cc.log"; then
        ok "$b: builds with $MPICC without warnings"
    else
        ko "$b: build: $(head -5 "$WORK/cc.log")"; continue
    fi
    # 0, 1, 2, ..., 64K: 18 rows
    # shellcheck disable=SC2086
    if timeout 120 "$MPIEXEC" -n "${NP[$b]}" "$exe" --min 0 --max 64K --iters 20 ${EXTRA[$b]} \
            > "$WORK/$b.csv" 2> "$WORK/$b.err" && csv_ok "$WORK/$b.csv" "${HDR[$b]}" 18; then
        ok "$b: 18 sizes (0..64K), well-formed CSV"
    else
        ko "$b: run or CSV: $(tail -3 "$WORK/$b.err" | tr '\n' ' ') $(head -3 "$WORK/$b.csv" | tr '\n' ' ')"
    fi
    if grep -q "^icbc_$b: .*device: " "$WORK/$b.err" && grep -q "payload bytes sent by all ranks: [1-9]" "$WORK/$b.err"; then
        ok "$b: names the MPI device and counts the payload sent"
    else
        ko "$b: banner or byte count missing: $(head -3 "$WORK/$b.err" | tr '\n' ' ')"
    fi
    # shellcheck disable=SC2086
    if timeout $T "$MPIEXEC" -n "${NP[$b]}" "$exe" --min 4K --max 4K --iters 5 --corrupt ${EXTRA[$b]} \
            > "$WORK/c.csv" 2> "$WORK/c.err"; then
        ko "$b: --corrupt run exited 0 (payload check missed a flipped byte)"
    elif grep -q "payload check FAILED: size 4096" "$WORK/c.err" && [[ $(wc -l < "$WORK/c.csv") == 1 ]]; then
        ok "$b: a flipped byte fails the payload check, no row printed"
    else
        ko "$b: --corrupt failed without the payload message: $(tail -3 "$WORK/c.err" | tr '\n' ' ')"
    fi
    if timeout $T "$MPIEXEC" -n "${NP[$b]}" "$exe" --max 1X > /dev/null 2> "$WORK/o.err"; then
        ko "$b: a malformed --max was accepted"
    elif grep -q "needs a valid value" "$WORK/o.err"; then
        ok "$b: a malformed --max is refused"
    else
        ko "$b: a malformed --max failed without a message: $(tail -2 "$WORK/o.err" | tr '\n' ' ')"
    fi
done

# latency: --stat best <= median <= ... sanity, and the statistic is announced
if timeout $T "$MPIEXEC" -n 2 "$WORK/icbc_latency" --max 8 --stat median > /dev/null 2> "$WORK/s.err" \
        && grep -q "statistic: median" "$WORK/s.err"; then
    ok "latency: --stat median is used and announced"
else
    ko "latency: --stat median: $(tail -2 "$WORK/s.err" | tr '\n' ' ')"
fi
# latency: --pair picks the two ranks (the timing one prints); a pair of one rank is refused
if timeout $T "$MPIEXEC" -n 3 "$WORK/icbc_latency" --max 8 --pair 2,1 > "$WORK/p.csv" 2> "$WORK/p.err" \
        && csv_ok "$WORK/p.csv" size,latency_us 4; then
    ok "latency: --pair 2,1 measures ranks 2 and 1"
else
    ko "latency: --pair 2,1: $(tail -2 "$WORK/p.err" | tr '\n' ' ')"
fi
if timeout $T "$MPIEXEC" -n 2 "$WORK/icbc_latency" --pair 1,1 > /dev/null 2> "$WORK/q.err"; then
    ko "latency: --pair 1,1 was accepted"
elif grep -q "needs a valid value" "$WORK/q.err"; then
    ok "latency: --pair 1,1 is refused"
else
    ko "latency: --pair 1,1 failed without a message: $(tail -2 "$WORK/q.err" | tr '\n' ' ')"
fi
if timeout $T "$MPIEXEC" -n 3 "$WORK/icbc_mbw_mr" --max 8 > /dev/null 2> "$WORK/n.err"; then
    ko "mbw_mr: an odd number of ranks was accepted"
elif grep -q "even number of ranks" "$WORK/n.err"; then
    ok "mbw_mr: an odd number of ranks is refused"
else
    ko "mbw_mr: odd ranks failed without a message"
fi

echo "$pass passed, $fail failed"
(( fail == 0 ))
