#!/bin/bash
# Measure how often an MPI job that has finished its work hangs in teardown
# (MPI_Finalize) when its ranks are spread over namespace nodes.
#
# usage: finalize-hang-rate.sh --mpi PREFIX [--runs N] [--np "2 4 8"] [--nodes 2]
#                              [--limit S] [--env K=V ...] [--testbed NAME]
#
# Each run is "mpiexec -n NP nodecheck 65536" (test/mpich/nodecheck.c) with
# MPIEXEC_TIMEOUT=S (default 15).  A run that printed nodecheck's line (all
# communication done) but then ran into the time limit counts as a teardown
# hang.  Prints one line per NP and exits 0; the environment of the runs is
# exactly the --env settings plus the testbed's hydra settings.
set -u
msg() { echo "finalize-hang-rate: $*"; }
die() { echo "finalize-hang-rate: error: $*" >&2; exit 2; }

top=$(cd "$(dirname "$0")/../.." && pwd)
prefix= runs=20 nps="2 4 8" nodes=2 limit=15 tbname=
envs=()
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) prefix=${2:?}; shift 2 ;;
        --runs) runs=${2:?}; shift 2 ;;
        --np) nps=${2:?}; shift 2 ;;
        --nodes) nodes=${2:?}; shift 2 ;;
        --limit) limit=${2:?}; shift 2 ;;
        --env) envs+=("${2:?}"); shift 2 ;;
        --testbed) tbname=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1'" ;;
    esac
done
[ -x "$prefix/bin/mpiexec" ] || die "--mpi PREFIX with bin/mpiexec is required"

testbed=
for c in "${ICBC_TESTBED_CMD:-}" "$(command -v icbc-testbed 2>/dev/null)" \
    "$prefix/bin/icbc-testbed" "$top/contrib/testbed/icbc-testbed"; do
    [ -n "$c" ] && [ -x "$c" ] && { testbed=$c; break; }
done
[ -n "$testbed" ] || die "icbc-testbed not found"
own=0
if [ -z "$tbname" ]; then
    tbname=hr$(($$ % 1000000))
    own=1
fi
work=$(mktemp -d /tmp/finalize-hang-rate.XXXXXX)
cleanup() {
    if [ $own = 1 ]; then "$testbed" down --name "$tbname" >/dev/null 2>&1; fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ $own = 1 ]; then
    "$testbed" up --name "$tbname" --clusters 1 --nodes "$nodes" >"$work/testbed.log" 2>&1 \
        || die "icbc-testbed up failed: $(tail -3 "$work/testbed.log")"
fi
# shellcheck disable=SC1090
. "/run/icbc-testbed/$tbname/env" || die "no env for testbed $tbname"
"$prefix/bin/mpicc" -o "$work/nodecheck" "$top/test/mpich/nodecheck.c" || die "cannot compile nodecheck"
for kv in "${envs[@]+"${envs[@]}"}"; do export "${kv%%=*}=${kv#*=}"; done

msg "$prefix, $nodes nodes, $runs runs per np, limit ${limit}s, env: ${envs[*]-}"
for np in $nps; do
    clean=0 hang=0 other=0
    for _ in $(seq "$runs"); do
        o=$(cd "$work" && MPIEXEC_TIMEOUT=$limit timeout -k 5 $((limit + 30)) \
            "$prefix/bin/mpiexec" -n "$np" ./nodecheck 65536 2>&1)
        rc=$?
        if [ $rc = 0 ] && echo "$o" | grep -q '^nodecheck:.*: ok$'; then
            clean=$((clean + 1))
        elif echo "$o" | grep -q '^nodecheck:.*: ok$' && echo "$o" | grep -q 'TIMED OUT'; then
            hang=$((hang + 1))
        else
            other=$((other + 1))
            echo "$o" | tail -3 | sed 's/^/    /'
        fi
    done
    echo "np=$np: $runs runs, $clean clean, $hang hung in teardown, $other other failures"
done
