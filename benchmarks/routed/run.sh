#!/bin/bash
# benchmarks/routed/run.sh: inter-cluster benchmarks of MPICH+icbc on an emulated cluster of
# clusters: p2p latency and bandwidth per policy between a process of cluster a and one of
# cluster b, striped bandwidth over R = 1, 2, 4 routers against min(R x NIC, WAN), the routed
# small-message round trip against the direct TCP path, multi-pair bandwidth and MPI_Alltoall
# per policy. Brings up its own two-cluster testbed (icbc-testbed), starts icbc-router on the
# router nodes, checks every run (exit status, device, all sizes done, and that the payload
# crossed the WAN emulator), and writes CSV + PNG + a summary into benchmarks/results/routed/.
# See benchmarks/README.md ("Inter-cluster") and --help.

set -u
PROG=routed/run.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SRC=$REPO/benchmarks/src
COMMON=$REPO/benchmarks/common
PY=/usr/bin/python3

PREFIX=$REPO/_install
STOCK_PREFIX=/usr
NODES=4
ROUTERS=4
NIC_RATE=100mbit
WAN_RATE=400mbit
DELAY=2ms
BUFFER=''
POLICIES='aggregate static alltoall'
STRIPE_RS=''
REPS=''
PARTS=''
QUICK=0
OUT=$REPO/benchmarks/results/routed
BUILD=$REPO/_build/bench-routed
TB_NAME=routed
ROUTER=''
ROUTER_ARGS=''
ROUTER_DAEMONS=1
ROUTER_WAIT=20
TIMEOUT=900
FIN_GRACE=20
EXTRA_ENV=''
LAT_OPTS='' BW_OPTS='' STRIPE_OPTS='' MBW_OPTS='' A2A_OPTS='' STRESS_OPTS='--quick'
STRIPE_SIZE=8M
STRIPE_TARGET=0.92
SMALL_TARGET=1.25
SMALL_MAX=1K
FAB_DEV=fab0
YIELD=auto

die() { echo "$PROG: error: $*" >&2; exit 2; }
note() { echo "[$(date +%H:%M:%S)] $*"; }

usage() {
    cat <<'EOF'
Usage: benchmarks/routed/run.sh [options]        (as root: network namespaces)

Inter-cluster benchmarks of an MPICH+icbc install on a testbed of two emulated clusters
joined by a WAN (icbc-testbed), with icbc-router daemons on the router nodes.

Parts (--parts, comma-separated; default all but with --quick latency,bw):
  latency   icbc_latency between a{M-1} and b{M-1}, per policy: half round trip
  bw        icbc_bw a{M-1} -> b{M-1}, per policy
  stripe    icbc_bw at --stripe-size under aggregate with R = 1, 2, 4.. routers per cluster
            (the routers are restarted with a router file listing the first R of each
            cluster), against min(R x NIC, WAN); target ratio >= --stripe-target
  mbw       icbc_mbw_mr with one rank per node, every pair crossing the WAN, per policy
  alltoall  icbc_alltoall with one rank per node, per policy
  paths     examples/icbc_paths.c with one rank per node, per policy: which path rank 0
            takes to every other node, with an 8 B latency and a 1 MiB bandwidth each
            (not in the default set; the two-cluster demo uses it)
  stress    test/mpi/stress.c with one rank per node, per policy: random traffic between
            all ranks with checked payloads (--stress-opts, default --quick); any
            mismatch fails the run (not in the default set)
  The small-message target compares the aggregate latency with the alltoall (direct TCP)
  one for sizes up to --small-max: ratio <= --small-target.

Testbed (icbc-testbed up --clusters 2 ...):
  --nodes M                 nodes per cluster (default 4)
  --routers R               router nodes per cluster, the first R (default 4)
  --nic-rate RATE           external NIC rate per node (default 100mbit)
  --wan-rate RATE           WAN rate per direction (default 400mbit)
  --delay TIME              one-way WAN delay (default 2ms)
  --buffer SIZE             WAN bottleneck buffer (default: icbc-testbed's, 256KiB)
  --testbed-name NAME       (default routed); an existing testbed of that name is reused
                            (it must have the same shape) and left up

MPI and routers:
  --prefix PREFIX           MPICH+icbc install (default <repo>/_install)
  --policies "P ..."        series to run (default "aggregate static alltoall"; also tcp,
                            and "stock": stock MPICH from --stock-prefix with UCX over
                            ext0, direct TCP between the processes, as a reference)
  --stock-prefix PREFIX     (default /usr)
  --router PATH             icbc-router (default: PATH, PREFIX/bin, <repo>/_build)
  --router-args "..."       extra icbc-router options, e.g. "--streams 4 --max-memory 64Mi";
                            "--device fab0" is added unless it has a --device
  --no-router-daemons       start no daemons: the first rank on each router node runs its
                            router in a thread (MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER); only
                            nodes with ranks then route. With daemons, the ranks get
                            MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0
  --router-wait SEC         time for the routers to listen and connect (default 20)
  --env "K=V ..."           extra environment for every rank
  --yield auto|0|1          MPIR_CVAR_CH4_ICBC_YIELD for the icbc ranks (default auto: 1
                            when the run's ranks plus the router daemons outnumber the
                            host's cores, as on a 2-core host: busy-polling ranks would
                            otherwise starve the routers and the WAN emulator they need)

Measurement:
  --reps N                  repetitions, interleaved over the policies (default 3; quick 1)
  --quick                   the demo profile: --parts latency,bw, 1 rep, latency 1 B-4 KiB,
                            bandwidth 64 KiB-8 MiB with a window of 4 (< 3 minutes)
  --parts LIST              see above
  --stripe-routers "1 2 4"  router counts of the stripe part (default 1 2 4 .. up to R)
  --stripe-size SIZE        (default 8M)
  --latency-opts "..." --bw-opts "..." --stripe-opts "..." --mbw-opts "..."
  --alltoall-opts "..."     options of the benchmark programs (replace the defaults below)
  --stress-opts "..."       options of the stress test (default --quick)
  --stripe-target R         (default 0.92)  --small-target R (default 1.25)
  --small-max SIZE          (default 1K)
  --timeout SEC             bound of one mpiexec (default 900)
  --finalize-grace SEC      time from "entering MPI_Finalize" to the exit (default 20); a
                            run past it is killed, its complete data kept, and retried once
  --out DIR                 results (default benchmarks/results/routed)
  --build DIR               binaries, router files, logs (default <repo>/_build/bench-routed)
  --help

Default program options (the benchmarks' own --stat median throughout):
  latency   --min 1 --max 1M --iters 100 --warmup 10 --min-iters 5
  bw        --min 1 --max 8M --window 8 --iters 20 --warmup 2 --min-iters 2
  stripe    --min SIZE --max SIZE --window 8 --iters 3 --warmup 1 --min-iters 3
  mbw       --min 1K --max 4M --window 8 --iters 10 --warmup 2 --min-iters 2
  alltoall  --min 1 --max 256K --iters 20 --warmup 2 --min-iters 3

Rank environment (icbc): MPIR_CVAR_CH4_ICBC_POLICY=<policy>, ICBC_ROUTERFILE=<a copy of
the testbed's router file with the policy and the first R routers of each cluster>,
MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp, MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=fab0,
UCX_NET_DEVICES=fab0. Every run must move at least its payload (p2p, mbw) or the
cross-cluster share of it (alltoall) through the WAN emulator, else it is rejected as
'no-wan'. The external NIC bytes of every node are recorded per run (routed_traffic.csv),
which shows how a policy spread the traffic over the routers.

Output (--out): routed_{latency,bw,mbw,alltoall}.{csv,png} (per-size medians, ratios),
routed_stripe.{csv,png}, routed_summary.txt (tables, ratios, verdicts, router stats),
routed_routers.txt (router logs' stats lines, peak RSS), routed_traffic.csv,
routed_events.txt (failed, retried or suspicious runs), raw/ (every kept run).
Exit status: 0 when every run gave data (whatever the verdicts), 1 when a run failed even
after its retry, 2 on bad usage or set-up.
EOF
}

CMDLINE="benchmarks/routed/run.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

while (( $# )); do
    case $1 in
        --prefix) PREFIX=${2:?}; shift 2 ;;
        --stock-prefix) STOCK_PREFIX=${2:?}; shift 2 ;;
        --nodes) NODES=${2:?}; shift 2 ;;
        --routers) ROUTERS=${2:?}; shift 2 ;;
        --nic-rate) NIC_RATE=${2:?}; shift 2 ;;
        --wan-rate) WAN_RATE=${2:?}; shift 2 ;;
        --delay) DELAY=${2:?}; shift 2 ;;
        --buffer) BUFFER=${2:?}; shift 2 ;;
        --testbed-name) TB_NAME=${2:?}; shift 2 ;;
        --policies) POLICIES=${2:?}; shift 2 ;;
        --router) ROUTER=${2:?}; shift 2 ;;
        --router-args) ROUTER_ARGS=${2?}; shift 2 ;;
        --no-router-daemons) ROUTER_DAEMONS=0; shift ;;
        --router-wait) ROUTER_WAIT=${2:?}; shift 2 ;;
        --env) EXTRA_ENV=${2?}; shift 2 ;;
        --yield) YIELD=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --parts) PARTS=${2:?}; shift 2 ;;
        --stripe-routers) STRIPE_RS=${2:?}; shift 2 ;;
        --stripe-size) STRIPE_SIZE=${2:?}; shift 2 ;;
        --latency-opts) LAT_OPTS=${2?}; shift 2 ;;
        --bw-opts) BW_OPTS=${2?}; shift 2 ;;
        --stripe-opts) STRIPE_OPTS=${2?}; shift 2 ;;
        --mbw-opts) MBW_OPTS=${2?}; shift 2 ;;
        --alltoall-opts) A2A_OPTS=${2?}; shift 2 ;;
        --stress-opts) STRESS_OPTS=${2?}; shift 2 ;;
        --stripe-target) STRIPE_TARGET=${2:?}; shift 2 ;;
        --small-target) SMALL_TARGET=${2:?}; shift 2 ;;
        --small-max) SMALL_MAX=${2:?}; shift 2 ;;
        --timeout) TIMEOUT=${2:?}; shift 2 ;;
        --finalize-grace) FIN_GRACE=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --build) BUILD=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done

# ---- option checks and defaults ---------------------------------------------------------

posint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
posint "$NODES" && (( NODES >= 1 && NODES <= 99 )) || die "--nodes must be 1..99"
[[ $ROUTERS =~ ^[0-9]+$ ]] && (( ROUTERS <= NODES )) || die "--routers must be 0..--nodes ($NODES)"
posint "$TIMEOUT" || die "--timeout must be a positive number of seconds"
posint "$FIN_GRACE" || die "--finalize-grace must be a positive number of seconds"
posint "$ROUTER_WAIT" || die "--router-wait must be a positive number of seconds"
[[ $YIELD == auto || $YIELD == 0 || $YIELD == 1 ]] || die "--yield takes auto, 0 or 1"
[[ $TB_NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--testbed-name: 1-8 of [a-z0-9], starting with a letter"
for t in "$STRIPE_TARGET" "$SMALL_TARGET"; do
    [[ $t =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "targets are positive numbers, not '$t'"
done
[[ $SMALL_MAX =~ ^[0-9]+[KMG]?$ ]] || die "--small-max: a size like 1K"
[[ $STRIPE_SIZE =~ ^[1-9][0-9]*[KMG]?$ ]] || die "--stripe-size: a size like 8M"
if (( QUICK )); then
    : "${REPS:=1}" "${PARTS:=latency,bw}"
    [[ -n $LAT_OPTS ]] || LAT_OPTS='--min 1 --max 4K --iters 30 --warmup 3'
    [[ -n $BW_OPTS ]] || BW_OPTS='--min 64K --max 8M --window 4 --iters 2 --warmup 1 --min-iters 2'
fi
: "${REPS:=3}" "${PARTS:=latency,bw,stripe,mbw,alltoall}"
posint "$REPS" || die "--reps must be a positive number"
[[ -n $LAT_OPTS ]] || LAT_OPTS='--min 1 --max 1M --iters 100 --warmup 10 --min-iters 5'
[[ -n $BW_OPTS ]] || BW_OPTS='--min 1 --max 8M --window 8 --iters 20 --warmup 2 --min-iters 2'
[[ -n $STRIPE_OPTS ]] || STRIPE_OPTS="--min $STRIPE_SIZE --max $STRIPE_SIZE --window 8 --iters 3 --warmup 1 --min-iters 3"
[[ -n $MBW_OPTS ]] || MBW_OPTS='--min 1K --max 4M --window 8 --iters 10 --warmup 2 --min-iters 2'
[[ -n $A2A_OPTS ]] || A2A_OPTS='--min 1 --max 256K --iters 20 --warmup 2 --min-iters 3'
LAT_OPTS="--stat median $LAT_OPTS"
BW_OPTS="--stat median $BW_OPTS"
STRIPE_OPTS="--stat median $STRIPE_OPTS"

declare -A WANT=()
IFS=',' read -ra _parts <<< "$PARTS"
for p in "${_parts[@]}"; do
    case $p in
        latency|bw|stripe|mbw|alltoall|paths|stress) WANT[$p]=1 ;;
        *) die "--parts: unknown part '$p' (latency, bw, stripe, mbw, alltoall, paths, stress)" ;;
    esac
done
read -ra POLS <<< "$POLICIES"
(( ${#POLS[@]} )) || die "--policies is empty"
declare -A SEEN=()
for p in "${POLS[@]}"; do
    case $p in aggregate|static|alltoall|tcp|stock) ;; *)
        die "--policies: unknown policy '$p' (aggregate, static, alltoall, tcp, stock)" ;;
    esac
    [[ -z ${SEEN[$p]:-} ]] || die "--policies: '$p' twice"
    SEEN[$p]=1
done
if [[ -z $STRIPE_RS ]]; then
    r=1
    while (( r < ROUTERS )); do STRIPE_RS+="$r "; r=$((r * 2)); done
    (( ROUTERS >= 1 )) && STRIPE_RS+="$ROUTERS"
fi
read -ra STRIPE_RL <<< "$STRIPE_RS"
for r in "${STRIPE_RL[@]}"; do
    posint "$r" && (( r <= ROUTERS )) || die "--stripe-routers: '$r' is not 1..--routers ($ROUTERS)"
done
if [[ -n ${WANT[stripe]:-} ]] && (( ${#STRIPE_RL[@]} == 0 )); then
    die "the stripe part needs routers (--routers 0)"
fi
for kv in $EXTRA_ENV; do
    [[ $kv == [A-Za-z_]*=* ]] || die "--env item '$kv' is not KEY=VALUE"
done

(( $(id -u) == 0 )) || die "needs root (network namespaces)"
[[ -x $PY ]] || die "$PY not found (Debian python3 with python3-matplotlib)"
$PY -c 'import matplotlib' 2>/dev/null || die "matplotlib missing for $PY (apt-get install python3-matplotlib)"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
command -v ss >/dev/null || die "ss (iproute2) not found"

# ---- installs -----------------------------------------------------------------------------

# mpi_tools PREFIX: prints "mpicc mpiexec device" of an install
mpi_tools() {
    local prefix=$1 mpicc mpiexec dev=unknown
    mpicc=$prefix/bin/mpicc.mpich; [[ -x $mpicc ]] || mpicc=$prefix/bin/mpicc
    mpiexec=$prefix/bin/mpiexec.mpich; [[ -x $mpiexec ]] || mpiexec=$prefix/bin/mpiexec
    [[ -x $mpicc && -x $mpiexec ]] || return 1
    if [[ -x $prefix/bin/mpichversion ]]; then
        dev=$("$prefix/bin/mpichversion" 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p' | head -1)
    fi
    echo "$mpicc $mpiexec ${dev:-unknown}"
}

NEED_ICBC=0 NEED_STOCK=0 NEED_ROUTERS=0
for p in "${POLS[@]}"; do
    if [[ $p == stock ]]; then NEED_STOCK=1; else NEED_ICBC=1; fi
    [[ $p == aggregate || $p == static ]] && NEED_ROUTERS=1
done
[[ -n ${WANT[stripe]:-} ]] && NEED_ICBC=1 NEED_ROUTERS=1
if (( NEED_ICBC )); then
    read -r ICBC_MPICC ICBC_MPIEXEC ICBC_DEVICE < <(mpi_tools "$PREFIX") \
        || die "no mpicc/mpiexec in $PREFIX/bin (is MPICH+icbc installed? --prefix)"
    [[ $ICBC_DEVICE == ch4:icbc* ]] || die "$PREFIX is not an icbc build (mpichversion says device '$ICBC_DEVICE')"
fi
if (( NEED_STOCK )); then
    read -r STOCK_MPICC STOCK_MPIEXEC STOCK_DEVICE < <(mpi_tools "$STOCK_PREFIX") \
        || die "no mpicc/mpiexec in $STOCK_PREFIX/bin (--stock-prefix)"
fi
# Routers run during every series when they can (the same conditions for all policies);
# they are required for aggregate, static and the stripe part.
(( NEED_ROUTERS && ROUTERS < 1 )) && die "policies aggregate/static and the stripe part need --routers >= 1"
if (( ROUTER_DAEMONS && ROUTERS >= 1 )); then
    if [[ -z $ROUTER ]]; then
        for c in "$(command -v icbc-router 2>/dev/null)" "$PREFIX/bin/icbc-router" \
                 "$REPO/_build/icbc-router" "$REPO/_build/src/router/icbc-router"; do
            [[ -n $c && -x $c ]] && { ROUTER=$c; break; }
        done
    fi
    [[ -n $ROUTER ]] || [[ $NEED_ROUTERS == 0 ]] \
        || die "icbc-router not found (PATH, $PREFIX/bin, $REPO/_build; --router PATH, or --no-router-daemons when the processes embed their routers)"
    [[ -z $ROUTER || -x $ROUTER ]] || die "--router $ROUTER is not executable"
fi
[[ -n $ROUTER ]] || ROUTER_DAEMONS=0

TESTBED=''
for c in "$(command -v icbc-testbed 2>/dev/null)" "$PREFIX/bin/icbc-testbed" \
         "$REPO/contrib/testbed/icbc-testbed"; do
    [[ -n $c && -x $c ]] && { TESTBED=$c; break; }
done
[[ -n $TESTBED ]] || die "icbc-testbed not found (PATH, PREFIX/bin, contrib/testbed/)"
if [[ -z ${ICBC_WANEMU:-} && ! -x $(dirname "$TESTBED")/icbc-wanemu ]] && ! command -v icbc-wanemu >/dev/null; then
    for c in "$PREFIX/bin/icbc-wanemu" "$REPO/_build/icbc-wanemu"; do
        [[ -x $c ]] && { export ICBC_WANEMU=$c; break; }
    done
fi

mkdir -p "$OUT/raw" "$BUILD/logs" || die "cannot create $OUT or $BUILD"
OUT=$(cd "$OUT" && pwd)
BUILD=$(cd "$BUILD" && pwd)
rm -f "$OUT"/raw/routed_*.csv "$OUT"/raw/routed_paths_*.txt "$OUT"/raw/routed_stress_*.txt
EVENTS=$OUT/routed_events.txt
SUMMARY=$OUT/routed_summary.txt
ROUTER_STATS=$OUT/routed_routers.txt
TRAFFIC=$OUT/routed_traffic.csv
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
MACHINE="nproc=$(nproc), kernel=$(uname -r), cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), mem=$(free -g | awk '/^Mem:/ {print $2}') GiB"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# routed runner events, run started $START_DATE: $CMDLINE" > "$EVENTS"
echo "# router stats, run started $START_DATE: $CMDLINE" > "$ROUTER_STATS"
NODE_LIST=()
for c in a b; do for ((i = 0; i < NODES; i++)); do NODE_LIST+=("$c$i"); done; done
{
    printf 'run,part,series,routers,rep,try,status'
    for n in "${NODE_LIST[@]}"; do printf ',ext0_tx_%s' "$n"; done
    printf ',wan_payload\n'
} > "$TRAFFIC"

# ---- compile ------------------------------------------------------------------------------

declare -A BIN=()
compile_for() { # KIND MPICC
    local kind=$1 mpicc=$2 b exe src
    mkdir -p "$BUILD/$kind"
    for b in latency bw mbw_mr alltoall paths stress; do
        exe=$BUILD/$kind/icbc_$b
        src=$SRC/icbc_$b.c
        [[ $b == paths ]] && src=$REPO/examples/icbc_paths.c
        [[ $b == stress ]] && src=$REPO/test/mpi/stress.c
        "$mpicc" -O2 -Wall -I"$SRC" -I"$REPO/test/mpi" -o "$exe" "$src" > "$BUILD/logs/compile_${kind}_$b.log" 2>&1 \
            || { cat "$BUILD/logs/compile_${kind}_$b.log" >&2; die "compiling $src with $mpicc failed"; }
        BIN[$kind.$b]=$exe
    done
    note "compiled the benchmarks with $mpicc into $BUILD/$kind"
}
(( NEED_ICBC )) && compile_for icbc "$ICBC_MPICC"
(( NEED_STOCK )) && compile_for stock "$STOCK_MPICC"

# ---- testbed ------------------------------------------------------------------------------

TB_STATE=/run/icbc-testbed/$TB_NAME
TB_OWNED=0
MPI_PID_FILE=$BUILD/logs/running.pid
declare -A ROUTER_PID=()
ROUTERS_UP=0

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -f $MPI_PID_FILE ]]; then
        kill -KILL -- "-$(cat "$MPI_PID_FILE")" 2>/dev/null
        rm -f "$MPI_PID_FILE"
        kill_leftovers
    fi
    (( ROUTERS_UP )) && stop_routers cleanup
    if (( TB_OWNED )); then
        note "testbed $TB_NAME: down"
        "$TESTBED" down --name "$TB_NAME" > /dev/null 2>&1 || echo "$PROG: warning: '$TESTBED down --name $TB_NAME' failed" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TB_ARGS=(--clusters 2 --nodes "$NODES" --routers "$ROUTERS" --nic-rate "$NIC_RATE"
         --wan-rate "$WAN_RATE" --delay "$DELAY")
[[ -n $BUFFER ]] && TB_ARGS+=(--buffer "$BUFFER")
if [[ -d $TB_STATE ]]; then
    note "testbed $TB_NAME exists already: reusing it (same arguments required), leaving it up"
else
    TB_OWNED=1
fi
note "testbed: icbc-testbed up --name $TB_NAME ${TB_ARGS[*]}"
"$TESTBED" up --name "$TB_NAME" "${TB_ARGS[@]}" > "$BUILD/logs/testbed_up.log" 2>&1 \
    || { cat "$BUILD/logs/testbed_up.log" >&2; die "icbc-testbed up failed"; }
[[ -f $TB_STATE/env && -f $TB_STATE/routers.conf ]] || die "icbc-testbed up wrote no $TB_STATE/env or routers.conf"
# shellcheck disable=SC1090
. "$TB_STATE/env"
TB_CANON=$(cat "$TB_STATE/args" 2>/dev/null | head -1)

# routerfile R POLICY: writes a copy of the testbed's router file with the policy line, an
# absolute key path and only the first R routers of each cluster; prints its path.
routerfile() {
    local r=$1 pol=$2 f=$BUILD/routers-R$1-$2.conf
    awk -v r="$r" -v pol="$pol" -v dir="$TB_STATE" '
        /^[[:space:]]*policy[[:space:]]/ { print "policy " pol; next }
        /^[[:space:]]*key[[:space:]]/ { k = $2; if (k !~ /^\//) k = dir "/" k; print "key " k; next }
        /^[[:space:]]*cluster[[:space:]]/ { n = 0 }
        /^[[:space:]]*router[[:space:]]/ { if (n++ >= r) next }
        { print }' "$TB_STATE/routers.conf" > "$f" || die "cannot write $f"
    grep -q '^policy ' "$f" || sed -i "1i policy $pol" "$f"
    echo "$f"
}

# ---- routers ------------------------------------------------------------------------------

# in_ns NODE CMD...: run CMD in node NODE's namespace (no hostname change needed)
in_ns() { local n=$1; shift; ip netns exec "$TB_NAME-$n" "$@"; }

# router_port FILE NODE SIDE: the port of the fabric or wan address of router NODE in FILE
router_port() {
    awk -v n="$2" -v side="$3" '$1 == "router" && $2 == n {
        for (i = 3; i <= NF; i++) if (index($i, side "=") == 1) { sub(/.*:/, "", $i); print $i } }' "$1"
}

# start_routers R: icbc-router on the first R nodes of each cluster; waits until each
# listens on its WAN port and holds an established WAN connection.
CUR_R=0
start_routers() {
    local r=$1 conf node c i log pid deadline ok port
    (( ROUTER_DAEMONS )) || { CUR_R=$r; return 0; }
    conf=$(routerfile "$r" aggregate)
    local rargs=$ROUTER_ARGS
    [[ " $rargs " == *" --device "* ]] || rargs="--device $FAB_DEV $rargs"
    for c in a b; do
        for ((i = 0; i < r; i++)); do
            node=$c$i
            log=$BUILD/logs/router-R$r-$node.log
            echo "# $(date -u '+%F %T') $ROUTER --routerfile $conf --host $node $rargs" > "$log"
            # shellcheck disable=SC2086
            setsid "$TESTBED" exec --name "$TB_NAME" "$node" -- \
                "$ROUTER" --routerfile "$conf" --host "$node" $rargs >> "$log" 2>&1 < /dev/null &
            ROUTER_PID[$node]=$!
        done
    done
    ROUTERS_UP=1 CUR_R=$r
    deadline=$((SECONDS + ROUTER_WAIT))
    while :; do
        ok=1
        for node in "${!ROUTER_PID[@]}"; do
            pid=${ROUTER_PID[$node]}
            if ! kill -0 "$pid" 2>/dev/null; then
                tail -5 "$BUILD/logs/router-R$r-$node.log" >&2
                die "icbc-router on $node exited at start-up (log: $BUILD/logs/router-R$r-$node.log)"
            fi
            port=$(router_port "$conf" "$node" wan)
            [[ -n $(in_ns "$node" ss -Hltn "sport = :$port" 2>/dev/null) ]] || { ok=0; break; }
            [[ -n $(in_ns "$node" ss -Htn state established "( sport = :$port or dport = :$port )" 2>/dev/null) ]] \
                || { ok=0; break; }
        done
        (( ok )) && break
        if (( SECONDS >= deadline )); then
            event "routers R=$r: not all listening with an established WAN connection after ${ROUTER_WAIT}s (continuing)"
            break
        fi
        sleep 0.5
    done
    note "routers R=$r up on ${!ROUTER_PID[*]} ($conf)"
}

# stop_routers WHY: SIGTERM (a clean exit prints the final stats line), SIGKILL after 10 s;
# their peak RSS (VmHWM) and the stats lines of their logs go into routed_routers.txt.
stop_routers() {
    local why=$1 node pid hwm log i
    declare -A HWM=()
    for node in "${!ROUTER_PID[@]}"; do
        pid=${ROUTER_PID[$node]}
        HWM[$node]=$(awk '/^VmHWM:/ {print $2 " " $3}' "/proc/$pid/status" 2>/dev/null)
        kill -TERM "$pid" 2>/dev/null
    done
    for ((i = 0; i < 100; i++)); do
        local alive=0
        for node in "${!ROUTER_PID[@]}"; do kill -0 "${ROUTER_PID[$node]}" 2>/dev/null && alive=1; done
        (( alive )) || break
        sleep 0.1
    done
    {
        echo "== routers R=$CUR_R stopped ($why), $(date -u '+%F %T')"
        for node in $(printf '%s\n' "${!ROUTER_PID[@]}" | sort); do
            pid=${ROUTER_PID[$node]}
            log=$BUILD/logs/router-R$CUR_R-$node.log
            if kill -0 "$pid" 2>/dev/null; then
                kill -KILL "$pid" 2>/dev/null
                echo "$node: did not exit within 10 s of SIGTERM: killed"
            fi
            wait "$pid" 2>/dev/null
            echo "$node: exit status $?, peak RSS (VmHWM before SIGTERM) ${HWM[$node]:-?}"
            # the final stats line (bytes and messages each way, peak buffered bytes, peak RSS)
            grep -E ': stats: ' "$log" | tail -1 | sed "s/^[^]]*] [a-z]*: /$node:   /"
            grep -cE '(warn|error): ' "$log" | sed "s/^/$node:   warnings and errors in the log: /"
        done
    } >> "$ROUTER_STATS"
    ROUTER_PID=()
    ROUTERS_UP=0
}

# ---- one run ------------------------------------------------------------------------------

# kill_leftovers: benchmark processes and hydra proxies left in the node namespaces after a
# killed run (mpiexec does not always take its remote processes with it); routers stay.
kill_leftovers() {
    local n pid exe b
    for n in "${NODE_LIST[@]}"; do
        for pid in $(ip netns pids "$TB_NAME-$n" 2>/dev/null); do
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
            for b in "${BIN[@]}" hydra_pmi_proxy; do
                if [[ $exe == "$b" || $exe == */"$b" || $exe == */hydra_pmi_proxy* ]]; then
                    kill -KILL "$pid" 2>/dev/null && echo "killed leftover pid $pid ($exe) on $n" >&2
                    break
                fi
            done
        done
    done
}

FAILED_RUNS=0
RUN_NO=0
declare -A GOOD=()   # "part.series" -> raw files

event() {
    echo "$(date -u '+%Y-%m-%dT%H:%M:%SZ') $*" >> "$EVENTS"
    echo "$PROG: $*" >&2
}

# wan_payload: TCP/UDP payload bytes delivered by the WAN emulator so far, both directions
wan_payload() {
    sleep 0.25 # the stats file is rewritten every 100 ms
    awk '$1 == "dir" { for (i = 2; i <= NF; i++) if ($i ~ /^payload=/) { sub(/payload=/, "", $i); s += $i } }
         END { printf "%.0f\n", s }' "$TB_STATE/wan.stats" 2>/dev/null || echo 0
}

ext0_tx() { # prints the ext0 tx bytes of every node, in NODE_LIST order
    local n
    for n in "${NODE_LIST[@]}"; do
        in_ns "$n" cat /sys/class/net/ext0/statistics/tx_bytes 2>/dev/null || echo 0
    done
}

# series_env SERIES R NP: KEY=VALUE lines of the environment of the NP ranks
series_env() {
    local s=$1 r=$2 np=$3 kv y=$YIELD
    if [[ $s == stock ]]; then
        echo "UCX_TLS=tcp,self"
        echo "UCX_NET_DEVICES=ext0"
    else
        echo "MPIR_CVAR_CH4_ICBC_POLICY=$s"
        # with daemons, a router that died must not be replaced by one embedded in a rank
        (( ROUTER_DAEMONS )) && echo "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0"
        if [[ $y == auto ]]; then
            y=0; (( np + (ROUTER_DAEMONS ? 2 * CUR_R : 0) > $(nproc) )) && y=1
        fi
        echo "MPIR_CVAR_CH4_ICBC_YIELD=$y"
        echo "ICBC_ROUTERFILE=$(routerfile "$r" "$s")"
        echo "MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp"
        echo "MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=$FAB_DEV"
        echo "UCX_NET_DEVICES=$FAB_DEV"
        [[ $PREFIX != /usr && -d $PREFIX/lib ]] && echo "LD_LIBRARY_PATH=$PREFIX/lib"
    fi
    for kv in $EXTRA_ENV; do echo "$kv"; done
}

HOSTS_P2P="a$((NODES - 1)):1,b$((NODES - 1)):1"
HOSTS_ALL=$(printf '%s:1,' "${NODE_LIST[@]}"); HOSTS_ALL=${HOSTS_ALL%,}

# run_try PART SERIES R REP TRY: one bounded mpiexec. Returns 0 with good data; sets
# TRY_STATUS (ok, finalize-hang, timeout, failed, wrong-device, no-wan) and TRY_DETAIL.
run_try() {
    local part=$1 s=$2 r=$3 rep=$4 try=$5 kind prog opts hosts np mpiexec want_dev frac
    kind=icbc; [[ $s == stock ]] && kind=stock
    case $part in
        latency) prog=latency opts=$LAT_OPTS hosts=$HOSTS_P2P np=2 frac=1 ;;
        bw) prog=bw opts=$BW_OPTS hosts=$HOSTS_P2P np=2 frac=1 ;;
        stripe) prog=bw opts=$STRIPE_OPTS hosts=$HOSTS_P2P np=2 frac=1 ;;
        mbw) prog=mbw_mr opts=$MBW_OPTS hosts=$HOSTS_ALL np=$((2 * NODES)) frac=1 ;;
        alltoall) prog=alltoall opts=$A2A_OPTS hosts=$HOSTS_ALL np=$((2 * NODES))
                  frac=$(awk -v m="$NODES" 'BEGIN { printf "%.4f", 0.95 * m / (2 * m - 1) }') ;;
        paths) prog=paths opts='' hosts=$HOSTS_ALL np=$((2 * NODES)) frac=0 ;;
        stress) prog=stress opts=$STRESS_OPTS hosts=$HOSTS_ALL np=$((2 * NODES)) frac=0.25 ;;
    esac
    if [[ $kind == stock ]]; then mpiexec=$STOCK_MPIEXEC want_dev=$STOCK_DEVICE
    else mpiexec=$ICBC_MPIEXEC want_dev=$ICBC_DEVICE; fi
    local tag=${part}_${s}_R${r}_rep${rep}_try${try}
    local csv=$BUILD/logs/$tag.csv err=$BUILD/logs/$tag.err genv=() kv
    while IFS= read -r kv; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done < <(series_env "$s" "$r" "$np")
    rm -f "$csv" "$err"
    RUN_NO=$((RUN_NO + 1))
    local w0 w1 tx0 tx1
    w0=$(wan_payload)
    mapfile -t tx0 < <(ext0_tx)
    echo "# $mpiexec -n $np -hosts $hosts ${genv[*]} ${BIN[$kind.$prog]} $opts" > "$err"
    # shellcheck disable=SC2086
    setsid timeout -k 10 "$TIMEOUT" "$mpiexec" -n "$np" -hosts "$hosts" "${genv[@]}" \
        "${BIN[$kind.$prog]}" $opts > "$csv" 2>> "$err" &
    local pid=$! fin_since=0 hung=0 rc
    echo "$pid" > "$MPI_PID_FILE"
    while kill -0 "$pid" 2>/dev/null; do
        if (( fin_since == 0 )) && { grep -qs 'entering MPI_Finalize' "$err" ||
                                     grep -qsE '^(paths (succeeded|FAILED)|No Errors|Found [0-9]+ errors)$' "$csv"; }; then
            fin_since=$SECONDS
        fi
        if (( fin_since > 0 && SECONDS - fin_since > FIN_GRACE )); then
            hung=1
            kill -TERM -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
            break
        fi
        sleep 0.5
    done
    wait "$pid"; rc=$?
    rm -f "$MPI_PID_FILE"
    (( hung || rc == 124 || rc == 137 )) && kill_leftovers
    w1=$(wan_payload)
    mapfile -t tx1 < <(ext0_tx)
    local done_ok=0 rt_dev sent i line
    grep -q "icbc_$prog: all sizes done, entering MPI_Finalize" "$err" && done_ok=1
    rt_dev=$(sed -n "s/^icbc_$prog: .*; device: \([^;]*\).*/\1/p" "$err" | head -1)
    sent=$(sed -n "s/^icbc_$prog: payload bytes sent by all ranks: //p" "$err" | head -1)
    if [[ $prog == paths ]]; then # a demo job, not a benchmark: its own success line
        grep -q '^paths succeeded$' "$csv" && done_ok=1
        rt_dev=$want_dev sent=0
    elif [[ $prog == stress ]]; then # a test: "No Errors", and the bytes it received
        grep -q '^No Errors$' "$csv" && done_ok=1
        rt_dev=$want_dev
        sent=$(sed -n 's/^stress: .* \([0-9]*\) payload bytes received.*/\1/p' "$csv" | head -1)
    fi
    TRY_CSV=$csv TRY_STATUS='' TRY_DETAIL=''
    if (( hung || rc == 124 || rc == 137 )); then
        if (( done_ok )); then
            TRY_STATUS=finalize-hang
            TRY_DETAIL="all sizes measured, then no exit within ${FIN_GRACE}s of entering MPI_Finalize (killed)"
        else
            TRY_STATUS=timeout
            TRY_DETAIL="no result within ${TIMEOUT}s; last line: $(tail -1 "$csv" 2>/dev/null)"
        fi
    elif (( rc != 0 || ! done_ok )); then
        TRY_STATUS=failed
        TRY_DETAIL="exit status $rc; stderr: $(grep -v '^\s*$' "$err" | tail -3 | tr '\n' '|')"
    elif [[ $want_dev != unknown && $rt_dev != "$want_dev" ]]; then
        TRY_STATUS=wrong-device
        TRY_DETAIL="the library that ran reports device '$rt_dev', the install says '$want_dev'"
    elif [[ -z $sent ]] || awk -v w=$((w1 - w0)) -v s="$sent" -v f="$frac" 'BEGIN { exit !(w < s * f) }'; then
        TRY_STATUS=no-wan
        TRY_DETAIL="the WAN carried $((w1 - w0)) payload bytes, the benchmark sent ${sent:-?} (at least $frac of it must cross): traffic did not take the inter-cluster path"
    else
        TRY_STATUS=ok
    fi
    line="$RUN_NO,$part,$s,$r,$rep,$try,$TRY_STATUS"
    for ((i = 0; i < ${#NODE_LIST[@]}; i++)); do line+=",$(( ${tx1[i]:-0} - ${tx0[i]:-0} ))"; done
    echo "$line,$((w1 - w0))" >> "$TRAFFIC"
    TRY_DETAIL="${TRY_DETAIL:+$TRY_DETAIL; }WAN payload $((w1 - w0)) B for ${sent:-?} B sent"
    [[ $TRY_STATUS == ok || $TRY_STATUS == finalize-hang ]]
}

# run_one PART SERIES R REP: a run and one retry if it fails or hangs
run_one() {
    local part=$1 s=$2 r=$3 rep=$4 try raw kept='' t0
    raw=$OUT/raw/routed_${part}_${s}_R${r}_rep${rep}.csv
    [[ $part == paths ]] && raw=$OUT/raw/routed_paths_${s}.txt
    [[ $part == stress ]] && raw=$OUT/raw/routed_stress_${s}_rep${rep}.txt
    rm -f "$raw"
    for try in 1 2; do
        t0=$SECONDS
        if run_try "$part" "$s" "$r" "$rep" "$try"; then
            cp "$TRY_CSV" "$raw"; kept=$try
            note "$part $s R=$r rep $rep try $try: $TRY_STATUS in $((SECONDS - t0)) s ($TRY_DETAIL)"
            [[ $TRY_STATUS == ok ]] && { (( try == 1 )) || event "$part $s R=$r rep $rep try $try: ok (data kept)"; break; }
            event "$part $s R=$r rep $rep try $try: $TRY_STATUS: $TRY_DETAIL (data complete, kept unless the retry is clean)"
        else
            note "$part $s R=$r rep $rep try $try: $TRY_STATUS in $((SECONDS - t0)) s"
            event "$part $s R=$r rep $rep try $try: $TRY_STATUS: $TRY_DETAIL"
        fi
    done
    if [[ -n $kept ]]; then GOOD[$part.$s.$r]+=" $raw"; return 0; fi
    FAILED_RUNS=$((FAILED_RUNS + 1))
    return 1
}

# ---- the runs -----------------------------------------------------------------------------

T_RUNS=$SECONDS
SERIES_PARTS=()
for p in paths stress latency bw mbw alltoall; do [[ -n ${WANT[$p]:-} ]] && SERIES_PARTS+=("$p"); done
if (( ${#SERIES_PARTS[@]} )); then
    (( ROUTERS >= 1 )) && start_routers "$ROUTERS"
    for rep in $(seq 1 "$REPS"); do
        order=("${POLS[@]}")
        (( rep % 2 )) || order=($(printf '%s\n' "${POLS[@]}" | tac))
        for p in "${SERIES_PARTS[@]}"; do
            [[ $p == paths ]] && (( rep > 1 )) && continue
            for s in "${order[@]}"; do run_one "$p" "$s" "$ROUTERS" "$rep"; done
        done
    done
    (( ROUTERS_UP )) && stop_routers "after the policy runs"
fi
if [[ -n ${WANT[stripe]:-} ]]; then
    for r in "${STRIPE_RL[@]}"; do
        start_routers "$r"
        for rep in $(seq 1 "$REPS"); do run_one stripe aggregate "$r" "$rep"; done
        stop_routers "after the stripe runs with R=$r"
    done
fi
T_RUNS=$((SECONDS - T_RUNS))

# ---- report -------------------------------------------------------------------------------

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "command: $CMDLINE"
    echo "date: $START_DATE; runs took $T_RUNS s"
    echo "machine: $MACHINE"
    echo "load average (1/5/15 min) at start: $LOAD_START, at end: $LOAD_END"
    echo "testbed: icbc-testbed up --name $TB_NAME ${TB_ARGS[*]} (${TB_CANON:-?})"
    echo "placement: p2p ranks on a$((NODES - 1)) and b$((NODES - 1)); mbw/alltoall one rank per node, $((2 * NODES)) ranks"
    (( NEED_ICBC )) && echo "icbc: $PREFIX ($ICBC_DEVICE)"
    (( NEED_STOCK )) && echo "stock: $STOCK_PREFIX ($STOCK_DEVICE), UCX_TLS=tcp,self UCX_NET_DEVICES=ext0"
    echo "routers: $( ((ROUTER_DAEMONS)) && echo "$ROUTER $ROUTER_ARGS" || echo "no daemons started")"
    echo "options: latency [$LAT_OPTS] bw [$BW_OPTS] stripe [$STRIPE_OPTS] mbw [$MBW_OPTS] alltoall [$A2A_OPTS]"
} > "$SUMMARY"

FOOT="$START_DATE; testbed 2x$NODES nodes, R=$ROUTERS, NIC $NIC_RATE, WAN $WAN_RATE, delay $DELAY; $MACHINE"
META=(--meta "command=$CMDLINE" --meta "date=$START_DATE" --meta "machine=$MACHINE"
      --meta "testbed=icbc-testbed up --name $TB_NAME ${TB_ARGS[*]}"
      --meta "load average at start/end=$LOAD_START / $LOAD_END")

# compare_part PART NAME KIND UNIT COLUMN REF [TARGET TARGET_TO]: per-policy comparison
REPORT_FAIL=0
compare_part() {
    local part=$1 name=$2 kind=$3 unit=$4 col=$5 ref=$6 target=${7:-} to=${8:-} s series=() opts
    local nser=0
    for s in "${POLS[@]}"; do
        [[ -n ${GOOD[$part.$s.$ROUTERS]:-} ]] || continue
        # shellcheck disable=SC2206
        series+=(--series "$s" ${GOOD[$part.$s.$ROUTERS]})
        nser=$((nser + 1))
    done
    if (( ${#series[@]} == 0 )); then
        echo "== $name: NO DATA (no policy gave a valid run; see $EVENTS)" | tee -a "$SUMMARY"
        REPORT_FAIL=1
        return
    fi
    if (( nser == 1 )); then
        # one policy only: show its medians against themselves (ratio 1)
        local again=("${series[@]}")
        again[1]="${series[1]}(again)"
        series+=("${again[@]}")
    fi
    local have_ref=0
    for s in "${POLS[@]}"; do [[ $s == "$ref" && -n ${GOOD[$part.$s.$ROUTERS]:-} ]] && have_ref=1; done
    opts=(--name "$name" --kind "$kind" --unit "$unit" --column "$col")
    (( have_ref )) && opts+=(--ref "$ref")
    if [[ -n $target ]] && (( have_ref )); then opts+=(--target "$target" --target-to "$to"); fi
    {
        echo
        echo "== $name ($part): median of reps per size; ratio = policy / ${ref}"
        $PY "$COMMON/compare.py" "${opts[@]}" "${series[@]}" \
            --out "$OUT/routed_$part.csv" --png "$OUT/routed_$part.png" \
            --title "$name across two clusters (R=$ROUTERS routers per cluster)" \
            --footer "$FOOT; $CMDLINE" "${META[@]}" \
            --meta "events=$(grep -v '^#' "$EVENTS" | grep " $part " | sed 's/^[^ ]* //' | tr '\n' ';')"
    } 2>&1 | tee -a "$SUMMARY"
    (( PIPESTATUS[0] == 0 )) || REPORT_FAIL=1
}

if [[ -n ${WANT[paths]:-} ]]; then
    for s in "${POLS[@]}"; do
        f=$OUT/raw/routed_paths_$s.txt
        { echo; echo "== paths under policy $s (examples/icbc_paths.c, one rank per node)"
          if [[ -f $f ]]; then cat "$f"; else echo "NO DATA (see $EVENTS)"; fi; } | tee -a "$SUMMARY"
    done
fi
if [[ -n ${WANT[stress]:-} ]]; then
    {
        echo
        echo "== stress test (test/mpi/stress.c $STRESS_OPTS, one rank per node) per policy"
        for s in "${POLS[@]}"; do
            for f in "$OUT"/raw/routed_stress_"$s"_rep*.txt; do
                [[ -f $f ]] || { echo "$s: NO DATA (see $EVENTS)"; continue; }
                r=${f##*_rep}; echo "$s rep ${r%.txt}: $(grep -E '^stress: [0-9]+ messages' "$f" | sed 's/^stress: //') $(tail -1 "$f")"
            done
        done
    } | tee -a "$SUMMARY"
fi
[[ -n ${WANT[latency]:-} ]] && compare_part latency latency lower us 1 alltoall "$SMALL_TARGET" "$SMALL_MAX"
[[ -n ${WANT[bw]:-} ]] && compare_part bw bandwidth higher MB/s 1 aggregate
[[ -n ${WANT[mbw]:-} ]] && compare_part mbw "multi-pair bandwidth" higher MB/s 1 aggregate
[[ -n ${WANT[alltoall]:-} ]] && compare_part alltoall "MPI_Alltoall time" lower us 1 aggregate

if [[ -n ${WANT[stripe]:-} ]]; then
    sargs=()
    for r in "${STRIPE_RL[@]}"; do
        # shellcheck disable=SC2206
        [[ -n ${GOOD[stripe.aggregate.$r]:-} ]] && sargs+=(--series "$r" ${GOOD[stripe.aggregate.$r]})
    done
    {
        echo
        echo "== striped bandwidth (aggregate, icbc_bw at $STRIPE_SIZE) vs min(R x NIC, WAN)"
        if (( ${#sargs[@]} )); then
            $PY "$HERE/stripe.py" --nic-rate "$NIC_RATE" --wan-rate "$WAN_RATE" --size "$STRIPE_SIZE" \
                --target "$STRIPE_TARGET" "${sargs[@]}" "${META[@]}" \
                --out "$OUT/routed_stripe.csv" --png "$OUT/routed_stripe.png" \
                --title "striped bandwidth a$((NODES - 1)) -> b$((NODES - 1)) at $STRIPE_SIZE (aggregate)" \
                --footer "$FOOT; $CMDLINE"
        else
            echo "VERDICT striped bandwidth: NO DATA"
        fi
    } 2>&1 | tee -a "$SUMMARY"
fi

# Traffic spread: per policy, the share of cluster a's external NIC bytes each node sent in
# the bandwidth runs (p2p from a{M-1}): routed policies should spread over the routers.
if [[ -s $TRAFFIC ]]; then
    {
        echo
        echo "== external NIC bytes sent per node of cluster a (share of cluster a's total), bandwidth runs"
        awk -F, -v m="$NODES" 'NR == 1 { next }
            ($2 == "bw" || $2 == "stripe") && ($7 == "ok" || $7 == "finalize-hang") {
                key = $2 " " $3 " R=" $4; tot = 0
                for (i = 0; i < m; i++) tot += $(8 + i)
                if (tot <= 0) next
                n[key]++
                for (i = 0; i < m; i++) share[key, i] += $(8 + i) / tot
                order[key] = NR }
            END {
                for (k in n) {
                    line = sprintf("%-24s", k)
                    for (i = 0; i < m; i++) line = line sprintf("  a%d %5.1f%%", i, 100 * share[k, i] / n[k])
                    print order[k] " " line }
            }' "$TRAFFIC" | sort -n | cut -d' ' -f2-
    } | tee -a "$SUMMARY"
fi

{
    echo
    echo "== router stats (routed_routers.txt)"
    grep -v '^#' "$ROUTER_STATS" || echo "(no routers were started)"
    echo
    echo "events (retries, hangs, failures): $(grep -vc '^#' "$EVENTS")"
    grep -v '^#' "$EVENTS" | sed 's/^/  /'
    echo "results: $OUT (routed_*.csv, routed_*.png, raw/), logs: $BUILD/logs"
} | tee -a "$SUMMARY"

if (( FAILED_RUNS || REPORT_FAIL )); then
    echo "$PROG: $FAILED_RUNS run(s) gave no valid data after a retry; see $EVENTS" >&2
    exit 1
fi
exit 0
