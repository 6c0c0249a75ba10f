#!/bin/bash
# MPI-level tests across two emulated clusters joined by the WAN emulator,
# under every policy, with embedded routers and with icbc-router daemons
# (also two jobs at once through the same daemons), plus the failure paths:
# a router killed mid-transfer, a router stopped (silent, connections open),
# a process with the wrong key.
#
#   test/mpi/run-clusters.sh --prefix DIR [--name T] [--timeout S] [--keep] [--quick]
#                            [--mpich-dirs "pt2pt coll ..."] [--mpich-list ci|full|FILE]
#                            [--mpich-policies "aggregate static ..."] [--mpich-delay TIME]
#                            [--mpich-timeout S]
#                            [--stress-full "aggregate static ..."]
#
# With --stress-full, the stress test also runs in its full profile (10,000
# messages of 0 B - 16 MiB, random datatypes, MPI_ANY_SOURCE, 1 GiB, every
# payload checksummed) once per listed policy, through icbc-router daemons
# bounded by --max-memory 16Mi and --max-rss 24Mi, started afresh for each
# policy; the routers'
# peak buffered bytes and peak RSS (VmHWM, and VmRSS right after start) go to
# the report and to _build/test-clusters/stress-full.txt.
#
# With --mpich-dirs, MPICH's own test/mpi directories also run with their
# ranks alternating between two one-node clusters (every message between
# ranks crosses the routers), through test/mpich/run-testsuite.sh; the CI
# subset of each directory (--mpich-list ci, default: test/mpich/ci-subset-2clusters)
# or its whole testlist (--mpich-list full) or the lines "DIR/prog np ..." of
# a file (--mpich-list FILE), once per policy of --mpich-policies (default:
# the router file's policy, aggregate), each test with a time limit of
# --mpich-timeout seconds (default 120, MPICH's).
# The suite's WAN has a one-way delay of --mpich-delay (default 100us): several
# tests are long chains of round trips (comm/ctxalloc duplicates a
# communicator 200,000 times, pt2pt/sendflood makes 100,000 round trips), so
# at 1 ms per direction they need 400 s and 200 s of pure propagation delay,
# more than their time limits, whatever the MPI.
#
# Ranks alternate between the clusters (a0 b0 a1 b1), so every pair i, i^1 of
# the tests crosses the WAN. Prints PASS/FAIL per test and ends with
# "N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
prefix="$top/_install"
name=mc
limit=240
keep=0
quick=0
mpich_dirs=
mpich_list=ci
mpich_policies=
mpich_delay=100us
mpich_timeout=120
stress_full=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --name) name=$2; shift 2 ;;
        --timeout) limit=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --quick) quick=1; shift ;;
        --mpich-dirs) mpich_dirs=$2; shift 2 ;;
        --mpich-list) mpich_list=$2; shift 2 ;;
        --mpich-policies) mpich_policies=$2; shift 2 ;;
        --mpich-delay) mpich_delay=$2; shift 2 ;;
        --mpich-timeout) mpich_timeout=$2; shift 2 ;;
        --stress-full) stress_full=$2; shift 2 ;;
        -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-clusters.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
prefix=$(cd "$prefix" && pwd)
testbed="$prefix/bin/icbc-testbed"
[ -x "$testbed" ] || testbed="$top/contrib/testbed/icbc-testbed"
work="$top/_build/test-clusters"
mkdir -p "$work"
state=/run/icbc-testbed/$name

# shellcheck disable=SC1091
. "$top/test/mpi/runlib.sh"

stop_daemons() {
    for n in a0 b0; do
        [ -f "$work/router-$n.pid" ] && kill "$(cat "$work/router-$n.pid")" 2>/dev/null
        rm -f "$work/router-$n.pid"
    done
    sleep 1
}
cleanup() { stop_daemons; [ $keep = 1 ] || "$testbed" down --name "$name" >/dev/null 2>&1; }
trap cleanup EXIT
"$testbed" down --name "$name" >/dev/null 2>&1
"$testbed" up --name "$name" --clusters 2 --nodes 2 --routers 1 --nic-rate 1gbit \
    --wan-rate 2gbit --delay 1ms > "$work/testbed.log" 2>&1 \
    || { echo "FAIL testbed-up (see $work/testbed.log)"; echo "0 passed, 1 failed"; exit 1; }
# shellcheck disable=SC1090
. "$state/env"
# No UCX device is pinned: processes and routers derive the fabric device
# from the router file, as in a user's run.
export HYDRA_LAUNCHER_AUTOFORK=0
printf 'a0\nb0\na1\nb1\n' > "$work/hosts"
mpiexec_args=(-f "$work/hosts")

for src in "$top"/test/mpi/*.c; do
    exe="$work/$(basename "$src" .c)"
    "$prefix/bin/mpicc" -O2 -I"$top/test/mpi" -o "$exe" "$src" > "$exe.build.log" 2>&1 \
        || report "build-$(basename "$src" .c)" 1 "(see $exe.build.log)"
done

router_memory=$((16 << 20))  # the daemons' --max-memory (payload bytes held)
router_rss=$((24 << 20))     # the daemons' --max-rss (resident size of the process)
start_daemons() {
    for n in a0 b0; do
        "$testbed" exec --name "$name" "$n" -- "$prefix/bin/icbc-router" \
            --routerfile "$state/routers.conf" --host "$n" --daemon \
            --pidfile "$work/router-$n.pid" --logfile "$work/router-$n.log" \
            --max-memory "$router_memory" --max-rss "$router_rss" \
            || { report "router-start-$n" 1 "(see $work/router-$n.log)"; return 1; }
    done
    sleep 1
}

# -- embedded routers (the first process on a0 and b0 runs one) -------------
for pol in aggregate static alltoall tcp; do
    run "p2p_sizes:$pol" 4 ok MPIR_CVAR_CH4_ICBC_POLICY=$pol
    # an update of a process's own window never overtakes a later one that
    # another process makes because of it (the step MCS locks rely on)
    run "rma_self_order:$pol" 4 ok MPIR_CVAR_CH4_ICBC_POLICY=$pol -- --rounds 500 --deadline 10
    # a target's MPI_Win_test after a barrier that followed MPI_Win_complete
    # finds the epoch over (the notice does not trail the barrier)
    run "pscw_complete_order:$pol" 4 ok MPIR_CVAR_CH4_ICBC_POLICY=$pol -- --rounds 300
done
run rma_coll:aggregate 4 ok MPIR_CVAR_CH4_ICBC_POLICY=aggregate
run stress:aggregate 4 ok MPIR_CVAR_CH4_ICBC_POLICY=aggregate -- --quick
if [ $quick = 0 ]; then
    run rma_coll:alltoall 4 ok MPIR_CVAR_CH4_ICBC_POLICY=alltoall
    run stress:static 4 ok MPIR_CVAR_CH4_ICBC_POLICY=static -- --quick --seed 3
    run stress:alltoall 4 ok MPIR_CVAR_CH4_ICBC_POLICY=alltoall -- --quick --seed 4
    run stress:tcp 4 ok MPIR_CVAR_CH4_ICBC_POLICY=tcp -- --quick --seed 5
    run p2p_sizes:small-chunks 4 ok MPIR_CVAR_CH4_ICBC_CHUNK_SIZE=4096
fi

# -- a process that does not know the key is refused --------------------------
mkdir -p "$work/badkey"
sed "s|^key .*|key $work/badkey/routers.key|" "$state/routers.conf" > "$work/badkey/routers.conf"
( umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/badkey/routers.key" )
start_daemons
run p2p_sizes:wrong-key 2 'error:(refused|REGISTER|authenticat)' \
    ICBC_ROUTERFILE="$work/badkey/routers.conf" MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0

# -- icbc-router daemons ---------------------------------------------------------
run p2p_sizes:daemons 4 ok MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0
run stress:daemons 4 ok MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 -- --quick --seed 6

# -- two jobs at once through the same routers -----------------------------------
# Same ranks, same nodes, different job ids (a hash of rank 0's business card):
# the routers keep the (job, rank) registrations apart, and stress checksums
# every payload, so a message delivered to the other job fails the run.
( run stress:two-jobs-1 4 ok MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 -- --quick --seed 8 ) \
    > "$work/two-jobs-1.out" 2>&1 &
first_job=$!
run stress:two-jobs-2 4 ok MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 -- --quick --seed 9
wait $first_job
line=$(grep -E '^(PASS|FAIL) stress:two-jobs-1' "$work/two-jobs-1.out")
if [ "${line%% *}" = PASS ]; then
    report stress:two-jobs-1 0 "${line#PASS stress:two-jobs-1 }"
else
    report stress:two-jobs-1 1 "${line:-(no result; see $work/two-jobs-1.out)}"
    sed -n '2,6p' "$work/two-jobs-1.out"
fi

# -- the full stress profile per policy, routers bounded to 16 MiB of payload ---
# and 24 MiB resident: each router's peak resident size must stay under it
vm_kib() { # PID FIELD: a Vm* line of /proc/PID/status, in KiB
    sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null
}
if [ -n "$stress_full" ]; then
    : > "$work/stress-full.txt"
    seed=11
    for pol in $stress_full; do
        stop_daemons
        start_daemons || continue
        declare -A rss0=()
        for n in a0 b0; do rss0[$n]=$(vm_kib "$(cat "$work/router-$n.pid")" VmRSS); done
        limit_saved=$limit; limit=1200
        run "stress:full-$pol" 4 ok MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 \
            MPIR_CVAR_CH4_ICBC_POLICY="$pol" -- --seed $seed
        limit=$limit_saved
        seed=$((seed + 1))
        declare -A hwm=() peak=()
        for n in a0 b0; do
            pid=$(cat "$work/router-$n.pid")
            hwm[$n]=$(vm_kib "$pid" VmHWM)
            kill "$pid"; sleep 1
            peak[$n]=$(grep -E 'stats:' "$work/router-$n.log" | tail -1 | sed -n 's/.*buffered [0-9]* B peak \([0-9]*\) B.*/\1/p')
            rm -f "$work/router-$n.pid"
        done
        {
            echo "policy $pol: $(grep -E '^stress: [0-9]+ messages' "$work/stress:full-$pol.log" | head -1)"
            echo "  $(grep -E '^stress: .* ranks' "$work/stress:full-$pol.log" | head -1)"
            echo "  result: $(grep -E '^(No Errors|Found)' "$work/stress:full-$pol.log" | tail -1)"
            for n in a0 b0; do
                echo "  router $n: --max-memory $router_memory B, peak buffered ${peak[$n]:-?} B; --max-rss $router_rss B, VmRSS after start ${rss0[$n]:-?} KiB, VmHWM ${hwm[$n]:-?} KiB"
            done
        } | tee -a "$work/stress-full.txt" | sed 's/^/    /'
        for n in a0 b0; do
            if [ -n "${hwm[$n]}" ] && [ $(( ${hwm[$n]} * 1024 )) -le $router_rss ]; then
                report "router-rss:$pol-$n" 0 "(VmHWM ${hwm[$n]} KiB <= --max-rss $router_rss B)"
            else
                report "router-rss:$pol-$n" 1 "(VmHWM ${hwm[$n]:-?} KiB, --max-rss $router_rss B)"
            fi
        done
        unset hwm peak
        unset rss0
    done
    start_daemons
fi

# -- a router dies with striped transfers in flight: MPI error, not a hang -------
# Router a0 is killed 4 s into the run. Rank 0 (cluster a) loses its router
# and ends the job with an MPI error naming it; rank 1 (cluster b) learns from
# router b0 that cluster a is unreachable (its trunk failed and stayed down
# for --trunk-wait, 10 s) and ends too, so the job is over by itself even if
# mpiexec cannot signal the other proxy. Both must end within 30 s of the kill.
fail_before=$fail
(
    sleep 4
    [ -f "$work/router-a0.pid" ] && kill -9 "$(cat "$work/router-a0.pid")"
) &
killer=$!
limit_saved=$limit; limit=90
killed_start=$(date +%s)
run stress:router-killed 2 'error:(icbc|router|unreachable|lost)' \
    MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 -- --seed 7
killed_secs=$(( $(date +%s) - killed_start - 4 ))
limit=$limit_saved
wait $killer 2>/dev/null
if [ $fail = $fail_before ]; then
    if [ $killed_secs -le 30 ]; then
        report "router-killed:within-30s" 0 "(ended ${killed_secs}s after the kill)"
    else
        report "router-killed:within-30s" 1 "(ended ${killed_secs}s after the kill)"
    fi
    # Whether rank 1 heard it before mpiexec ended the job for rank 0's error
    # depends on which comes first; either ends the job.
    grep -q 'reports cluster a unreachable' "$work/stress:router-killed.log" &&
        echo "    rank 1 heard from router b0 that cluster a is unreachable"
fi
grep -E 'lost router|router.*lost|stalled|unreachable' "$work/stress:router-killed.log" | head -3 | sed 's/^/    /'
stop_daemons

# -- a router stops answering without a connection error: MPI error, not a hang --
# Router a0 is stopped (SIGSTOP) 4 s into the run: its connections stay open,
# so no endpoint fails. A live router sends each registered process something
# every second; rank 0 hears nothing from a0 for MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT
# (20 s, the default a user has), takes it for lost and raises the MPI error
# naming the silence, which ends rank 0. Checked: that error within 45 s of the
# stop (20 s of silence, the 5 s grace, margin). Whether the whole job ends is
# reported, not required: rank 1's router b0 keeps an open trunk to the stopped
# a0 and does not learn of it, and mpiexec does not always reach rank 1's proxy
# once rank 0's has gone (hydra); the job is then killed after 60 s.
start_daemons
log_stop="$work/stress:router-stopped.log"
(
    sleep 4
    [ -f "$work/router-a0.pid" ] && kill -STOP "$(cat "$work/router-a0.pid")"
) &
stopper=$!
stopped_start=$(date +%s)
env MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 timeout -k 5 64 "$prefix/bin/mpiexec" \
    "${mpiexec_args[@]}" -n 2 "$work/stress" --seed 12 > "$log_stop" 2>&1 &
job=$!
error_secs=
while kill -0 $job 2>/dev/null; do
    if [ -z "$error_secs" ] && grep -qE 'lost: silent for [0-9]+ s' "$log_stop"; then
        error_secs=$(( $(date +%s) - stopped_start - 4 ))
    fi
    sleep 1
done
wait $job; rc=$?
[ -z "$error_secs" ] && grep -qE 'lost: silent for [0-9]+ s' "$log_stop" &&
    error_secs=$(( $(date +%s) - stopped_start - 4 ))
wait $stopper 2>/dev/null
[ -f "$work/router-a0.pid" ] && kill -CONT "$(cat "$work/router-a0.pid")" 2>/dev/null
if [ -n "$error_secs" ] && [ "$error_secs" -le 45 ] && grep -q 'Abort' "$log_stop"; then
    report "router-stopped:error-within-45s" 0 "(rank 0's MPI error ${error_secs}s after the stop)"
else
    report "router-stopped:error-within-45s" 1 "(no 'silent' error within 45 s; rc $rc; see $log_stop)"
fi
if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "    the job did not end by itself (rank 1 kept waiting; killed after 60 s)"
else
    echo "    the job ended with rc $rc"
fi
grep -E 'silent|lost' "$log_stop" | head -2 | sed 's/^/    /'
stop_daemons
for n in a0 b0; do
    [ -f "$work/router-$n.log" ] && grep -E 'stats|peak' "$work/router-$n.log" | tail -1 | sed "s/^/    router $n: /"
done

# -- MPICH's test suite with ranks alternating between two clusters -------------
if [ -n "$mpich_dirs" ]; then
    "$testbed" down --name "$name" >/dev/null 2>&1
    ts=${name}s
    "$testbed" down --name "$ts" >/dev/null 2>&1
    if "$testbed" up --name "$ts" --clusters 2 --nodes 1 --routers 1 --nic-rate 1gbit \
        --wan-rate 2gbit --delay "$mpich_delay" > "$work/testbed-suite.log" 2>&1; then
        name=$ts; state=/run/icbc-testbed/$ts
        start_daemons
        sel=(--list "$top/test/mpich/ci-subset-2clusters" --retries 1)
        [ "$mpich_list" = full ] && sel=(--retries 1)
        [ "$mpich_list" != full ] && [ "$mpich_list" != ci ] && sel=(--list "$(cd "$(dirname "$mpich_list")" && pwd)/$(basename "$mpich_list")" --retries 1)
        for pol in ${mpich_policies:-router-file}; do
            tag=mpich-2clusters; penv=()
            if [ "$pol" != router-file ]; then
                tag=mpich-2clusters-$pol; penv=(--env "MPIR_CVAR_CH4_ICBC_POLICY=$pol")
            fi
            "$top/test/mpich/run-testsuite.sh" --mpi "$prefix" --label icbc "${sel[@]}" --timeout "$mpich_timeout" \
                --dirs "$mpich_dirs" --testbed "$ts" --path-if ext0 --env MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 \
                "${penv[@]}" --out "$work/$tag" > "$work/$tag.log" 2>&1
            line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/$tag.log" | tail -1)
            sed -n '/^dir /,/^all /p' "$work/$tag.log" | sed 's/^/    /'
            sp=${line%% passed*}; sf=${line#*passed, }; sf=${sf%% failed*}
            if [ -n "$line" ]; then
                pass=$((pass + sp)); fail=$((fail + sf))
                echo "$tag: $line (see $work/$tag.log)"
            else
                report "$tag" 1 "(no summary; see $work/$tag.log)"
            fi
        done
        stop_daemons
        "$testbed" down --name "$ts" >/dev/null 2>&1
    else
        report testbed-suite-up 1 "(see $work/testbed-suite.log)"
    fi
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
