#!/bin/bash
# benchmarks/p2p/run.sh: point-to-point latency and bandwidth of two MPI installs (by default
# MPICH+icbc and stock MPICH ch4:ucx), side by side, between two emulated nodes.
#
# Brings up its own testbed (icbc-testbed, 1 cluster x 2 nodes), compiles the benchmarks
# with each install's own mpicc, runs them alternately (A then B on odd reps, B then A on
# even ones), checks every run (exit status, all sizes done, payload check, the MPI device
# that really ran, and that the payload crossed the fab0 interfaces), and writes per-size
# medians and ratios as CSV + PNG with a verdict per target. See benchmarks/README.md.

set -u
PROG=run.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SRC=$REPO/benchmarks/src
COMMON=$REPO/benchmarks/common
PY=/usr/bin/python3

A_PREFIX=$REPO/_install
A_LABEL=icbc
A_KIND=auto
A_ENV=''
B_PREFIX=/usr
B_LABEL=stock
B_KIND=auto
B_ENV=''
REPS=3
OUT=$REPO/benchmarks/results
BUILD=$REPO/_build/bench-p2p
TB_NAME=bench
PIN=yes
TIMEOUT=900
FIN_GRACE=20
QUIET_WAIT=0
QUIET_MAX=15
BENCHES='latency bw'
LAT_OPTS=''
BW_OPTS=''
STAT=median
LAT_TARGET=1.10
LAT_FROM=0
BW_TARGET=0.95
BW_FROM=64K
NET_DEV=fab0

die() { echo "$PROG: error: $*" >&2; exit 2; }
note() { echo "[$(date +%H:%M:%S)] $*"; }

usage() {
    cat <<'EOF'
Usage: benchmarks/p2p/run.sh [options]

Compares the point-to-point latency (icbc_latency) and bandwidth (icbc_bw) of two MPI
installs between two emulated nodes (network namespaces of icbc-testbed), side by side.
Side A defaults to our MPICH+icbc build, side B to Debian's stock MPICH (ch4:ucx).

Options:
  --icbc PREFIX, --a PREFIX   install of side A (default: <repo>/_install)
  --stock PREFIX, --b PREFIX  install of side B (default: /usr)
  --label-a NAME              column name of side A (default: icbc)
  --label-b NAME              column name of side B (default: stock)
  --kind-a K, --kind-b K      icbc | stock | auto (default auto: from the install's
                              mpichversion, ch4:icbc -> icbc, anything else -> stock);
                              selects the transport environment below
  --env-a "K=V ...", --env-b "K=V ..."
                              extra environment for that side's ranks (added last)
  --reps N                    repetitions per side and benchmark (default 3)
  --out DIR                   results directory (default: benchmarks/results)
  --build DIR                 binaries and logs (default: <repo>/_build/bench-p2p)
  --only latency|bw           run one benchmark only
  --stat mean|median|best     statistic over the timed iterations of one run, passed to
                              both programs (default median: a preempted iteration on a
                              busy host does not move it; mean is OSU's definition)
  --latency-opts "..."        extra options for icbc_latency (e.g. "--max 1M")
  --bw-opts "..."             extra options for icbc_bw (e.g. "--window 32")
  --timeout SEC               bound of one mpiexec run (default 900)
  --finalize-grace SEC        time allowed between "entering MPI_Finalize" and the exit of
                              mpiexec; past it the run is killed and recorded as a
                              finalize hang (its data is kept, the run retried once)
                              (default 20)
  --quiet-wait SEC            before each run, wait up to SEC seconds for the CPU use of
                              other processes to fall to --quiet-max percent of the host
                              (default 0: do not wait; the use is recorded either way)
  --quiet-max PCT             (default 15)
  --testbed-name NAME         icbc-testbed name (default bench)
  --pin yes|no                pin rank r to CPU r mod nproc with taskset, on both sides
                              (default yes): the two namespace nodes share the host's
                              cores, and an unpinned pair sometimes shares one core or
                              migrates, which moves a latency by 20-30% between runs
  --lat-target R              latency target: A/B <= R at every size (default 1.10)
  --bw-target R               bandwidth target: A/B >= R (default 0.95) ...
  --bw-target-from SIZE       ... for sizes >= SIZE (default 64K)
  --help                      this text

Transport environment (inter-node traffic must cross the namespace network; UCX's
shared-memory transports would otherwise reach across namespaces):
  stock: UCX_TLS=tcp,self UCX_NET_DEVICES=fab0
  icbc:  MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=fab0
         UCX_NET_DEVICES=fab0
Each run is also checked against the fab0 byte counters of both namespaces: they must
have carried at least the payload the benchmark reports having sent.

Output (in --out): p2p_latency.csv, p2p_bw.csv (size,A,B,ratio with # metadata lines:
command, date, machine, installs, events), p2p_latency.png, p2p_bw.png, p2p_summary.txt
(tables and verdicts), p2p_events.txt (failed or retried runs), raw/ (one CSV per run).
Exit status: 0 when every run gave valid data (whatever the verdicts), 1 when some run
failed even after its retry, 2 on bad usage or set-up.
EOF
}

CMDLINE="benchmarks/p2p/run.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

while (( $# )); do
    case $1 in
        --icbc|--a) A_PREFIX=${2:?}; shift 2 ;;
        --stock|--b) B_PREFIX=${2:?}; shift 2 ;;
        --label-a) A_LABEL=${2:?}; shift 2 ;;
        --label-b) B_LABEL=${2:?}; shift 2 ;;
        --kind-a) A_KIND=${2:?}; shift 2 ;;
        --kind-b) B_KIND=${2:?}; shift 2 ;;
        --env-a) A_ENV=${2?}; shift 2 ;;
        --env-b) B_ENV=${2?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --build) BUILD=${2:?}; shift 2 ;;
        --only) BENCHES=${2:?}; shift 2 ;;
        --stat) STAT=${2:?}; shift 2 ;;
        --latency-opts) LAT_OPTS=${2?}; shift 2 ;;
        --bw-opts) BW_OPTS=${2?}; shift 2 ;;
        --timeout) TIMEOUT=${2:?}; shift 2 ;;
        --finalize-grace) FIN_GRACE=${2:?}; shift 2 ;;
        --testbed-name) TB_NAME=${2:?}; shift 2 ;;
        --pin) PIN=${2:?}; shift 2 ;;
        --quiet-wait) QUIET_WAIT=${2:?}; shift 2 ;;
        --quiet-max) QUIET_MAX=${2:?}; shift 2 ;;
        --lat-target) LAT_TARGET=${2:?}; shift 2 ;;
        --bw-target) BW_TARGET=${2:?}; shift 2 ;;
        --bw-target-from) BW_FROM=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive number"
[[ $PIN == yes || $PIN == no ]] || die "--pin takes yes or no"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds"
[[ $FIN_GRACE =~ ^[1-9][0-9]*$ ]] || die "--finalize-grace must be a positive number of seconds"
[[ $QUIET_WAIT =~ ^[0-9]+$ ]] || die "--quiet-wait must be a number of seconds"
[[ $QUIET_MAX =~ ^[0-9]+$ ]] && (( QUIET_MAX <= 100 )) || die "--quiet-max must be 0..100"
[[ $A_LABEL =~ ^[A-Za-z][A-Za-z0-9_.-]*$ && $B_LABEL =~ ^[A-Za-z][A-Za-z0-9_.-]*$ ]] \
    || die "labels must be a letter then letters, digits, _ . -"
[[ $A_LABEL != "$B_LABEL" ]] || die "--label-a and --label-b must differ"
for b in $BENCHES; do [[ $b == latency || $b == bw ]] || die "--only takes latency or bw"; done
[[ $STAT == mean || $STAT == median || $STAT == best ]] || die "--stat takes mean, median or best"
LAT_OPTS="--stat $STAT${LAT_OPTS:+ $LAT_OPTS}"
BW_OPTS="--stat $STAT${BW_OPTS:+ $BW_OPTS}"
(( $(id -u) == 0 )) || die "needs root (network namespaces)"
[[ -x $PY ]] || die "$PY not found (Debian python3 with python3-matplotlib)"
$PY -c 'import matplotlib' 2>/dev/null || die "matplotlib missing for $PY (apt-get install python3-matplotlib)"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
[[ $PIN == no ]] || command -v taskset >/dev/null || die "taskset (util-linux) not found"

# ---- the two installs -------------------------------------------------------------------

# side X FIELD: the value of X_FIELD (X is A or B)
side() { local v="${1}_$2"; printf '%s' "${!v}"; }

# side_setup X PREFIX KIND: sets X_MPICC, X_MPIEXEC, X_DEVICE, X_KIND
side_setup() {
    local x=$1 prefix=$2 kind=$3 mpicc mpiexec ver dev
    [[ -d $prefix ]] || die "side $x: no directory $prefix (is the icbc build installed? for a stock-vs-stock check use --icbc /usr --label-a stock2)"
    mpicc=$prefix/bin/mpicc.mpich; [[ -x $mpicc ]] || mpicc=$prefix/bin/mpicc
    mpiexec=$prefix/bin/mpiexec.mpich; [[ -x $mpiexec ]] || mpiexec=$prefix/bin/mpiexec
    [[ -x $mpicc ]] || die "side $x: no mpicc in $prefix/bin (is the icbc build installed? for a stock-vs-stock check use --icbc /usr --label-a stock2)"
    [[ -x $mpiexec ]] || die "side $x: no mpiexec in $prefix/bin"
    dev=unknown
    if [[ -x $prefix/bin/mpichversion ]]; then
        ver=$("$prefix/bin/mpichversion" 2>/dev/null)
        dev=$(sed -n 's/^MPICH Device:[[:space:]]*//p' <<< "$ver" | head -1)
        [[ -n $dev ]] || dev=unknown
    fi
    if [[ $kind == auto ]]; then
        case $dev in
            ch4:icbc*) kind=icbc ;;
            unknown) die "side $x: cannot tell the MPI device of $prefix (no mpichversion); use --kind-${x,,}" ;;
            *) kind=stock ;;
        esac
    fi
    [[ $kind == icbc || $kind == stock ]] || die "side $x: kind must be icbc, stock or auto"
    printf -v "${x}_MPICC" '%s' "$mpicc"
    printf -v "${x}_MPIEXEC" '%s' "$mpiexec"
    printf -v "${x}_DEVICE" '%s' "$dev"
    printf -v "${x}_KIND" '%s' "$kind"
}

# side_env KIND PREFIX EXTRA: prints the KEY=VALUE pairs for the ranks, one per line
side_env() {
    local kind=$1 prefix=$2 extra=$3 kv
    if [[ $kind == stock ]]; then
        echo "UCX_TLS=tcp,self"
        echo "UCX_NET_DEVICES=$NET_DEV"
    else
        echo "MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp"
        echo "MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=$NET_DEV"
        echo "UCX_NET_DEVICES=$NET_DEV"
    fi
    if [[ $prefix != /usr && -d $prefix/lib ]]; then
        echo "LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    for kv in $extra; do
        echo "$kv"
    done
}

for kv in $A_ENV $B_ENV; do
    [[ $kv == [A-Za-z_]*=* ]] || die "environment item '$kv' is not KEY=VALUE"
done
side_setup A "$A_PREFIX" "$A_KIND"
side_setup B "$B_PREFIX" "$B_KIND"
mapfile -t A_ENVL < <(side_env "$A_KIND" "$A_PREFIX" "$A_ENV")
mapfile -t B_ENVL < <(side_env "$B_KIND" "$B_PREFIX" "$B_ENV")

mkdir -p "$OUT/raw" "$BUILD/logs" || die "cannot create $OUT or $BUILD"
OUT=$(cd "$OUT" && pwd)
BUILD=$(cd "$BUILD" && pwd)
EVENTS=$OUT/p2p_events.txt
SUMMARY=$OUT/p2p_summary.txt
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
MACHINE="nproc=$(nproc), kernel=$(uname -r), cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), mem=$(free -g | awk '/^Mem:/ {print $2}') GiB"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$EVENTS"
echo "# p2p runner events, run started $START_DATE: $CMDLINE" >> "$EVENTS"

# ---- compile -------------------------------------------------------------------------------

declare -A BIN
: > "$BUILD/logs/libraries.txt"
for x in A B; do
    label=$(side "$x" LABEL) mpicc=$(side "$x" MPICC)
    mkdir -p "$BUILD/$label"
    for b in latency bw; do
        exe=$BUILD/$label/icbc_$b
        note "compile $label: $mpicc -O2 -Wall -I$SRC -o $exe $SRC/icbc_$b.c"
        "$mpicc" -O2 -Wall -I"$SRC" -o "$exe" "$SRC/icbc_$b.c" > "$BUILD/logs/compile_${label}_$b.log" 2>&1 \
            || { cat "$BUILD/logs/compile_${label}_$b.log" >&2; die "compiling icbc_$b with $mpicc failed"; }
        BIN[$x.$b]=$exe
        if [[ $PIN == yes ]]; then
            # the rank comes from the process manager's environment (PMI_RANK: hydra,
            # OMPI_COMM_WORLD_RANK: Open MPI)
            printf '#!/bin/sh\nr=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}\nexec taskset -c $((r %% %d)) "%s" "$@"\n' \
                "$(nproc)" "$exe" > "$exe.pinned"
            chmod +x "$exe.pinned"
            BIN[$x.$b]=$exe.pinned
        fi
    done
    echo "$label: $(ldd "$BUILD/$label/icbc_latency" | grep -E 'libmpi|libucp' | awk '{print $1" -> "$3}' | tr '\n' ' ')" \
        >> "$BUILD/logs/libraries.txt"
done

# ---- testbed -------------------------------------------------------------------------------

TESTBED=''
for c in "$(command -v icbc-testbed 2>/dev/null)" "$A_PREFIX/bin/icbc-testbed" \
         "$B_PREFIX/bin/icbc-testbed" "$REPO/contrib/testbed/icbc-testbed"; do
    [[ -n $c && -x $c ]] && { TESTBED=$c; break; }
done
[[ -n $TESTBED ]] || die "icbc-testbed not found (PATH, PREFIX/bin, contrib/testbed/)"
TB_STATE=/run/icbc-testbed/$TB_NAME
TB_OWNED=0
MPI_PIDS_FILE=$BUILD/logs/running.pid

cleanup() {
    local rc=$?
    if [[ -f $MPI_PIDS_FILE ]]; then
        kill -TERM -- "-$(cat "$MPI_PIDS_FILE")" 2>/dev/null
        rm -f "$MPI_PIDS_FILE"
    fi
    kill_leftovers
    if (( TB_OWNED )); then
        note "testbed $TB_NAME: down"
        "$TESTBED" down --name "$TB_NAME" > /dev/null 2>&1 || echo "$PROG: warning: '$TESTBED down --name $TB_NAME' failed" >&2
    fi
    exit $rc
}

# Kill benchmark processes and hydra proxies left in the testbed's node namespaces (after a
# timeout): only processes whose executable is one of our binaries or hydra_pmi_proxy.
kill_leftovers() {
    local ns pid exe b
    for ns in "$TB_NAME-a0" "$TB_NAME-a1"; do
        [[ -e /run/netns/$ns ]] || continue
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
            for b in "${BIN[@]}"; do
                if [[ $exe == "${b%.pinned}" || $exe == */hydra_pmi_proxy* ]]; then
                    kill -KILL "$pid" 2>/dev/null && echo "killed leftover pid $pid ($exe) in $ns" >&2
                    break
                fi
            done
        done
    done
}

trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -d $TB_STATE ]]; then
    note "testbed $TB_NAME exists already: reusing it, leaving it up afterwards"
else
    TB_OWNED=1
fi
note "testbed: $TESTBED up --name $TB_NAME --clusters 1 --nodes 2"
"$TESTBED" up --name "$TB_NAME" --clusters 1 --nodes 2 > "$BUILD/logs/testbed_up.log" 2>&1 \
    || { cat "$BUILD/logs/testbed_up.log" >&2; die "icbc-testbed up failed"; }
[[ -f $TB_STATE/env ]] || die "icbc-testbed up wrote no $TB_STATE/env"
# shellcheck disable=SC1090
. "$TB_STATE/env"
for ns in "$TB_NAME-a0" "$TB_NAME-a1"; do
    ip netns exec "$ns" test -e "/sys/class/net/$NET_DEV" \
        || die "namespace $ns has no interface $NET_DEV"
done

# fab_bytes: tx bytes summed over the fab0 interfaces of both nodes
fab_bytes() {
    local ns sum=0 v
    for ns in "$TB_NAME-a0" "$TB_NAME-a1"; do
        v=$(ip netns exec "$ns" cat "/sys/class/net/$NET_DEV/statistics/tx_bytes" 2>/dev/null) || v=0
        sum=$((sum + v))
    done
    echo "$sum"
}

# cpu_busy: percent of all CPUs busy (not idle/iowait) over one second, from /proc/stat
cpu_busy() {
    local a b ta ia tb ib
    read -ra a < /proc/stat
    sleep 1
    read -ra b < /proc/stat
    ta=$((a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7] + a[8]))
    ia=$((a[4] + a[5]))
    tb=$((b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7] + b[8]))
    ib=$((b[4] + b[5]))
    (( tb > ta )) || { echo 0; return; }
    echo $(( (100 * ((tb - ta) - (ib - ia))) / (tb - ta) ))
}

# wait_quiet: before a run, wait up to QUIET_WAIT seconds for the host's CPU use by others
# to fall to QUIET_MAX percent; sets BUSY to the last sample (recorded with the run).
BUSY_ALL=''
wait_quiet() {
    local deadline=$((SECONDS + QUIET_WAIT))
    BUSY=$(cpu_busy)
    while (( BUSY > QUIET_MAX && SECONDS < deadline )); do
        sleep 4
        BUSY=$(cpu_busy)
    done
    BUSY_ALL+=" $BUSY"
}

# ---- runs ----------------------------------------------------------------------------------

FAILED_RUNS=0
declare -A GOOD   # "$x.$b" -> space-separated raw files

event() {
    echo "$(date -u '+%Y-%m-%dT%H:%M:%SZ') $* [host busy ${BUSY:-?}% before the run]" >> "$EVENTS"
    echo "$PROG: $*" >&2
}

# run_try X BENCH REP TRY: one bounded mpiexec. Returns 0 when the data is good; sets
# TRY_STATUS (ok, finalize-hang, timeout, failed, wrong-device, no-network) and TRY_DETAIL.
run_try() {
    local x=$1 b=$2 rep=$3 try=$4 label mpiexec dev opts csv err before after sent rc
    label=$(side "$x" LABEL) mpiexec=$(side "$x" MPIEXEC) dev=$(side "$x" DEVICE)
    local -n envl=${x}_ENVL
    [[ $b == latency ]] && opts=$LAT_OPTS || opts=$BW_OPTS
    csv=$BUILD/logs/${b}_${label}_rep${rep}_try${try}.csv
    err=$BUILD/logs/${b}_${label}_rep${rep}_try${try}.err
    local genv=() kv
    for kv in "${envl[@]}"; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
    rm -f "$csv" "$err"
    wait_quiet
    TRY_T0=$SECONDS
    before=$(fab_bytes)
    # shellcheck disable=SC2086
    setsid timeout -k 10 "$TIMEOUT" "$mpiexec" -n 2 -ppn 1 "${genv[@]}" "${BIN[$x.$b]}" $opts \
        > "$csv" 2> "$err" &
    local pid=$! fin_since=0 hung=0
    echo "$pid" > "$MPI_PIDS_FILE"
    # Poll: once rank 0 announced MPI_Finalize, allow FIN_GRACE seconds for the exit.
    while kill -0 "$pid" 2>/dev/null; do
        if (( fin_since == 0 )) && grep -qs 'entering MPI_Finalize' "$err"; then
            fin_since=$SECONDS
        fi
        if (( fin_since > 0 && SECONDS - fin_since > FIN_GRACE )); then
            hung=1
            kill -TERM -- "-$pid" 2>/dev/null
            sleep 3
            kill -KILL -- "-$pid" 2>/dev/null
            break
        fi
        sleep 0.5
    done
    wait "$pid"
    rc=$?
    rm -f "$MPI_PIDS_FILE"
    after=$(fab_bytes)
    local done_ok=0 rt_dev
    grep -q "icbc_$b: all sizes done, entering MPI_Finalize" "$err" && done_ok=1
    rt_dev=$(sed -n "s/^icbc_$b: .*; device: \([^;]*\).*/\1/p" "$err" | head -1)
    sent=$(sed -n "s/^icbc_$b: payload bytes sent by all ranks: //p" "$err" | head -1)
    TRY_CSV=$csv
    if (( hung || rc == 124 || rc == 137 )); then
        kill_leftovers
        if (( done_ok )); then
            TRY_STATUS=finalize-hang
            TRY_DETAIL="all sizes measured, then no exit within ${FIN_GRACE}s of entering MPI_Finalize (killed)"
        else
            TRY_STATUS=timeout
            TRY_DETAIL="no result within ${TIMEOUT}s; last line: $(tail -1 "$csv" 2>/dev/null)"
            return 1
        fi
    elif (( rc != 0 )) || (( ! done_ok )); then
        TRY_STATUS=failed
        TRY_DETAIL="exit status $rc; stderr: $(grep -v '^\s*$' "$err" | tail -3 | tr '\n' '|')"
        return 1
    fi
    if [[ $dev != unknown && $rt_dev != "$dev" ]]; then
        TRY_STATUS=wrong-device
        TRY_DETAIL="the library that ran reports device '$rt_dev', $label's mpichversion says '$dev'"
        return 1
    fi
    if [[ -z $sent ]] || (( after - before < sent )); then
        TRY_STATUS=no-network
        TRY_DETAIL="$NET_DEV carried $((after - before)) bytes, the benchmark sent ${sent:-?} payload bytes: traffic did not cross the namespace network"
        return 1
    fi
    [[ ${TRY_STATUS:-} == finalize-hang ]] || TRY_STATUS=ok
    TRY_DETAIL="${TRY_DETAIL:-}${TRY_DETAIL:+; }$NET_DEV carried $((after - before)) bytes for $sent payload bytes"
    return 0
}

# run_one X BENCH REP: a run and, if it fails or hangs (also only in MPI_Finalize), one
# retry. Data of a run that hung only in MPI_Finalize is complete and valid: it is kept if
# the retry gives nothing better.
run_one() {
    local x=$1 b=$2 rep=$3 label try raw kept=''
    label=$(side "$x" LABEL)
    raw=$OUT/raw/p2p_${b}_${label}_rep${rep}.csv
    rm -f "$raw"
    for try in 1 2; do
        TRY_STATUS='' TRY_DETAIL='' TRY_T0=$SECONDS
        if run_try "$x" "$b" "$rep" "$try"; then
            cp "$TRY_CSV" "$raw"
            kept=$try
            note "$b $label rep $rep try $try: $TRY_STATUS in $((SECONDS - TRY_T0)) s, host busy $BUSY% before ($TRY_DETAIL)"
            if [[ $TRY_STATUS == ok ]]; then
                (( try == 1 )) || event "$b $label rep $rep try $try: ok: $TRY_DETAIL (data kept)"
                break
            fi
            event "$b $label rep $rep try $try: $TRY_STATUS: $TRY_DETAIL (data complete, kept unless the retry is clean)"
        else
            note "$b $label rep $rep try $try: $TRY_STATUS in $((SECONDS - TRY_T0)) s, host busy $BUSY% before"
            event "$b $label rep $rep try $try: $TRY_STATUS: $TRY_DETAIL"
        fi
    done
    if [[ -n $kept ]]; then
        GOOD[$x.$b]+=" $raw"
        return 0
    fi
    FAILED_RUNS=$((FAILED_RUNS + 1))
    return 1
}

note "A: $A_LABEL = $A_PREFIX ($A_DEVICE, kind $A_KIND): ${A_ENVL[*]}"
note "B: $B_LABEL = $B_PREFIX ($B_DEVICE, kind $B_KIND): ${B_ENVL[*]}"
for rep in $(seq 1 "$REPS"); do
    if (( rep % 2 )); then order='A B'; else order='B A'; fi
    for b in $BENCHES; do
        for x in $order; do
            run_one "$x" "$b" "$rep"
        done
    done
done

# ---- report --------------------------------------------------------------------------------

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "command: $CMDLINE"
    echo "date: $START_DATE"
    echo "machine: $MACHINE"
    echo "load average (1/5/15 min) at start: $LOAD_START, at end: $LOAD_END"
    echo "host CPU busy (other processes) in the second before each run, %: ${BUSY_ALL# }"
} > "$SUMMARY"

report_one() {
    local b=$1 name kind unit target from csv png
    if [[ $b == latency ]]; then
        name=latency kind=lower unit=us target=$LAT_TARGET from=$LAT_FROM
    else
        name=bandwidth kind=higher unit=MB/s target=$BW_TARGET from=$BW_FROM
    fi
    csv=$OUT/p2p_$b.csv png=$OUT/p2p_$b.png
    if [[ -z ${GOOD[A.$b]:-} || -z ${GOOD[B.$b]:-} ]]; then
        echo "VERDICT $name: NO DATA (a side has no valid run; see $EVENTS)" | tee -a "$SUMMARY"
        return 1
    fi
    local evs
    evs=$(grep -v '^#' "$EVENTS" | grep " $b " | sed 's/^[^ ]* //' | tr '\n' ';')
    # shellcheck disable=SC2086
    {
        echo
        echo "== $name ($b): median of reps per size; ratio = $A_LABEL/$B_LABEL"
        $PY "$COMMON/compare.py" --name "$name" --kind "$kind" --unit "$unit" \
            --series "$A_LABEL" ${GOOD[A.$b]} --series "$B_LABEL" ${GOOD[B.$b]} \
            --target "$target" --target-from "$from" --out "$csv" --png "$png" \
            --title "p2p $name between two namespace nodes: $A_LABEL vs $B_LABEL" \
            --footer "$START_DATE; $MACHINE; $CMDLINE" \
            --meta "command=$CMDLINE" --meta "date=$START_DATE" --meta "machine=$MACHINE" \
            --meta "load average at start/end=$LOAD_START / $LOAD_END" \
            --meta "host CPU busy (other processes) in the second before each run, %=${BUSY_ALL# }" \
            --meta "testbed=icbc-testbed up --name $TB_NAME --clusters 1 --nodes 2; mpiexec -n 2 -ppn 1 (nodes a0, a1); ranks pinned to CPUs r mod nproc: $PIN" \
            --meta "$A_LABEL=$A_PREFIX ($A_DEVICE); env ${A_ENVL[*]}" \
            --meta "$B_LABEL=$B_PREFIX ($B_DEVICE); env ${B_ENVL[*]}" \
            --meta "benchmark=icbc_$b $( [[ $b == latency ]] && echo "$LAT_OPTS" || echo "$BW_OPTS")" \
            --meta "events=${evs:-none}"
    } 2>&1 | tee -a "$SUMMARY"
    return "${PIPESTATUS[0]}"
}

REPORT_FAIL=0
for b in $BENCHES; do
    report_one "$b" || REPORT_FAIL=1
done
{
    echo
    echo "events (retries, hangs, failures): $(grep -vc '^#' "$EVENTS")"
    grep -v '^#' "$EVENTS" | sed 's/^/  /'
    echo "results: $OUT (p2p_*.csv, p2p_*.png, raw/), logs: $BUILD/logs"
} | tee -a "$SUMMARY"

if (( FAILED_RUNS || REPORT_FAIL )); then
    echo "$PROG: $FAILED_RUNS run(s) gave no valid data after a retry; see $EVENTS" >&2
    exit 1
fi
exit 0
