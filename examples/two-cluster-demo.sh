#!/bin/bash
# Two-cluster demo of MPICH+icbc: two emulated clusters of 4 nodes, 4 routers each, external
# NICs of 100 Mbit/s joined by a 400 Mbit/s WAN with 2 ms one-way delay. Shows which path
# rank 0 takes to every other node under each policy, then measures the inter-cluster
# bandwidth between a process of each cluster under aggregate (striped over all routers),
# static (one router) and alltoall (direct TCP) and prints a comparison table.
#
# Runs benchmarks/routed/run.sh --quick --parts paths,bw (which brings the testbed and the
# icbc-router daemons up and takes them down again) and formats its results. Root needed
# (network namespaces). About 1 minute.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
RUNNER=$REPO/benchmarks/routed/run.sh
PY=/usr/bin/python3

PREFIX=$REPO/_install
NODES=4
ROUTERS=4
NIC_RATE=100mbit
WAN_RATE=400mbit
DELAY=2ms
OUT=$REPO/_build/two-cluster-demo
TB_NAME=demo
EXTRA=()

usage() {
    cat <<'EOF'
Usage: examples/two-cluster-demo.sh [options]        (as root)

Builds a testbed of 2 clusters (icbc-testbed), starts icbc-router on the router nodes, runs
a cross-cluster MPI job that prints the path to every peer (examples/icbc_paths.c) and the
inter-cluster bandwidth benchmark (icbc_bw, 64 KiB - 4 MiB) under the policies aggregate,
static and alltoall, and prints: size, MB/s per policy, ratio to aggregate.

  --prefix PREFIX     MPICH+icbc install (default <repo>/_install)
  --nodes M           nodes per cluster (default 4)
  --routers R         routers per cluster, the first R nodes (default 4)
  --nic-rate RATE     external NIC rate per node (default 100mbit)
  --wan-rate RATE     WAN rate (default 400mbit; for striping to pay off it should be
                      at least R x the NIC rate)
  --delay TIME        one-way WAN delay (default 2ms)
  --router PATH       icbc-router binary (default: found by the runner)
  --out DIR           results and logs (default <repo>/_build/two-cluster-demo)
  --testbed-name T    (default demo)
  --help

Everything the runner writes (CSV, PNG, summary, router stats) is in --out; its full
output is in --out/demo.log.
EOF
}

while (( $# )); do
    case $1 in
        --prefix) PREFIX=${2:?}; shift 2 ;;
        --nodes) NODES=${2:?}; shift 2 ;;
        --routers) ROUTERS=${2:?}; shift 2 ;;
        --nic-rate) NIC_RATE=${2:?}; shift 2 ;;
        --wan-rate) WAN_RATE=${2:?}; shift 2 ;;
        --delay) DELAY=${2:?}; shift 2 ;;
        --router) EXTRA+=(--router "${2:?}"); shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --testbed-name) TB_NAME=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "two-cluster-demo: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
(( $(id -u) == 0 )) || { echo "two-cluster-demo: needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$OUT" || exit 2
LOG=$OUT/demo.log

echo "== two-cluster demo: 2 clusters x $NODES nodes, $ROUTERS routers each, NIC $NIC_RATE, WAN $WAN_RATE, delay $DELAY"
start=$SECONDS
"$RUNNER" --quick --parts paths,bw --policies "aggregate static alltoall" \
    --prefix "$PREFIX" --nodes "$NODES" --routers "$ROUTERS" --nic-rate "$NIC_RATE" \
    --wan-rate "$WAN_RATE" --delay "$DELAY" --testbed-name "$TB_NAME" --out "$OUT" \
    "${EXTRA[@]}" > "$LOG" 2>&1 &
runner=$!
trap 'kill -INT $runner 2>/dev/null; wait $runner' INT TERM
# progress: the runner's time-stamped lines and its errors
tail -n +1 -f "$LOG" --pid "$runner" 2>/dev/null | grep --line-buffered -E '^\[|error|warning'
wait "$runner"
rc=$?
trap - INT TERM

for pol in aggregate static alltoall; do
    f=$OUT/raw/routed_paths_$pol.txt
    echo
    echo "== paths under policy $pol (rank 0 on a0 to the first rank of every other node)"
    if [[ -f $f ]]; then grep -vE '^(MPICH Version|icbc control variables)' "$f"; else echo "(no result: see $LOG)"; fi
done

echo
echo "== inter-cluster bandwidth a$((NODES - 1)) -> b$((NODES - 1)) (icbc_bw, median of the timed iterations)"
if [[ -f $OUT/routed_bw.csv ]]; then
    "$PY" - "$OUT/routed_bw.csv" "$NIC_RATE" "$WAN_RATE" "$ROUTERS" <<'EOF'
import csv, re, sys
path, nic, wan, routers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def rate(t):
    m = re.fullmatch(r"([0-9.]+)(kbit|mbit|gbit|bit|kbps|mbps|gbps|bps)?", t.lower())
    v, u = float(m.group(1)), m.group(2) or "bit"
    return v * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
                "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}[u] / 8e6
rows = [r for r in csv.reader(l for l in open(path) if not l.startswith("#"))]
head, rows = rows[0], rows[1:]
pols = [p for p in ("aggregate", "static", "alltoall") if p in head]
missing = [p for p in ("aggregate", "static", "alltoall") if p not in head]
if missing:
    print(f"(no valid bandwidth run under: {', '.join(missing)}; see routed_events.txt)")
def fmt(n):
    n = int(n)
    for unit, s in (("M", 20), ("K", 10)):
        if n >= 1 << s and n % (1 << s) == 0:
            return f"{n >> s} {unit}iB"
    return f"{n} B"
ratios = [p for p in pols if p != "aggregate"] if "aggregate" in pols else []
print(f"{'size':>8}" + "".join(f"{p + ' MB/s':>16}" for p in pols)
      + "".join(f"{p + '/aggr':>16}" for p in ratios))
for r in rows:
    v = dict(zip(head, r))
    line = f"{fmt(v['size']):>8}" + "".join(f"{float(v[p]):16.2f}" for p in pols)
    for p in ratios:
        try:
            line += f"{float(v[p]) / float(v['aggregate']):16.3f}"
        except (ValueError, ZeroDivisionError):
            line += f"{'-':>16}"
    print(line)
n, w = (rate(nic) if nic != "0" else 0), (rate(wan) if wan != "0" else 0)
caps = [x for x in (n * routers, w) if x]
print(f"ceilings (line rate): one NIC {n:.1f} MB/s; min({routers} x NIC, WAN) "
      f"{min(caps) if caps else float('nan'):.1f} MB/s (TCP payload reaches ~95.6 % of it)")
EOF
else
    echo "(no bandwidth results: see $LOG)"
fi
echo
echo "results: $OUT (routed_bw.csv$([[ -f $OUT/routed_bw.png ]] && echo ", routed_bw.png"), routed_summary.txt, routed_routers.txt), log: $LOG"
echo "demo $( ((rc == 0)) && echo "finished in $((SECONDS - start)) s" || echo "FAILED (runner exit status $rc; see $LOG)")"
exit "$rc"
