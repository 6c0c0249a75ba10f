#!/bin/bash
# MPI-level tests of an ICBC install, with ranks spread over two emulated
# nodes (network namespaces from icbc-testbed) so the netmod carries the
# inter-node traffic.
#
#   test/mpi/run.sh --prefix DIR [--name T] [--timeout S] [--keep] [--errors-only N]
#
# Prints PASS/FAIL per test and ends with "N passed, N failed". With
# --errors-only N, only the tests that expect an MPI error run, N times each
# (each must print the promised error every time).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
prefix="$top/_install"
name=mt
limit=180
keep=0
errors_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --name) name=$2; shift 2 ;;
        --timeout) limit=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --errors-only) errors_only=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
prefix=$(cd "$prefix" && pwd)
testbed=$(command -v icbc-testbed || echo "$prefix/bin/icbc-testbed")
[ -x "$testbed" ] || testbed="$top/contrib/testbed/icbc-testbed"
work="$top/_build/test-mpi"
mkdir -p "$work"

# shellcheck disable=SC1091
. "$top/test/mpi/runlib.sh"

cleanup() { [ $keep = 1 ] || "$testbed" down --name "$name" >/dev/null 2>&1; }
trap cleanup EXIT
"$testbed" up --name "$name" --clusters 1 --nodes 2 > "$work/testbed.log" 2>&1 \
    || { echo "FAIL testbed-up (see $work/testbed.log)"; echo "0 passed, 1 failed"; exit 1; }
# shellcheck disable=SC1090
. "/run/icbc-testbed/$name/env"
# No UCX device is pinned: the testbed's router file names the cluster's
# fabric network, and the processes open UCX on it, as in a user's run.
export HYDRA_LAUNCHER_AUTOFORK=0

for src in "$top"/test/mpi/*.c "$top"/examples/icbc_demo.c; do
    exe="$work/$(basename "$src" .c)"
    if ! "$prefix/bin/mpicc" -O2 -I"$top/test/mpi" -o "$exe" "$src" > "$work/$(basename "$src" .c).build.log" 2>&1; then
        report "build-$(basename "$src" .c)" 1 "(see $work/$(basename "$src" .c).build.log)"
    fi
done

expected_errors() {
    run p2p_sizes:bad-device 2 "error:icbc netmod: UCX device 'nosuchdev0' \\(MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=nosuchdev0\\) is not a network interface of host a[01]" MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=nosuchdev0
    run p2p_sizes:corrupt-card 2 'error:business card of rank [0-9]+ is corrupt' MPIR_CVAR_CH4_ICBC_FAULT_INJECT=bcard
    run peer_death 2 'error:(icbc|KILLED|BAD TERMINATION|signal 9)'
    # With peer errors on, the survivor's MPI call must fail with the error
    # that names the lost rank; -disable-auto-cleanup (a user's choice when
    # the application handles errors) keeps hydra from killing it first.
    local saved=("${mpiexec_args[@]}")
    mpiexec_args+=(-disable-auto-cleanup)
    run peer_death:peer-errors 2 'error:MPI_Send to the dead rank 1 failed: .*cannot communicate with rank 1' MPIR_CVAR_CH4_ICBC_PEER_ERRORS=1 -- --send
    mpiexec_args=("${saved[@]}")
    run stress:corrupt 2 'error:payload mismatch' -- --quick --count 200 --corrupt
}

if [ "$errors_only" -gt 0 ]; then
    for i in $(seq "$errors_only"); do expected_errors; done
    echo "$pass passed, $fail failed"
    [ $fail = 0 ]
    exit
fi

run icbc_demo 4 ok
run p2p_sizes 4 ok
run p2p_sizes:eager64k 4 ok MPIR_CVAR_CH4_ICBC_EAGER_LIMIT=65536
run p2p_sizes:all-rendezvous 2 ok MPIR_CVAR_CH4_ICBC_EAGER_LIMIT=0
run p2p_sizes:yield 6 ok MPIR_CVAR_CH4_ICBC_YIELD=1
run rma_coll 4 ok
run idle_wait:yield 2 ok MPIR_CVAR_CH4_ICBC_YIELD=1 -- --max-cpu 0.25
run idle_wait:busy-poll 2 ok MPIR_CVAR_CH4_ICBC_YIELD=0 -- --min-cpu 0.6
run rma_coll:3ranks 3 ok
run spawn_error 2 ok
run stress:quick 4 ok -- --quick
run stress:quick-rendezvous 3 ok MPIR_CVAR_CH4_ICBC_EAGER_LIMIT=0 -- --quick --seed 2
expected_errors

echo "$pass passed, $fail failed"
[ $fail = 0 ]
