#!/bin/bash
# Regenerate test/mpich/results/comparison.md: MPICH's test/mpi suite (C
# testlist of 13 directories) run with stock MPICH 4.0.2 ch4:ucx (Debian's
# package, /usr) and with our ch4:icbc build, ranks over 2 namespace nodes,
# then compared with compare.py.  See docs/testsuite.md.
#
# usage: compare.sh [--icbc PREFIX] [--stock PREFIX] [--timeout S]
#                   [--reuse-stock | --stock-only] [--stock-env K=V ...]
#                   [--icbc-env K=V ...]
#
#   --icbc PREFIX     icbc install (default /work/main/_install, else <repo>/_install)
#   --stock PREFIX    stock install (default /usr)
#   --timeout S       default per-test time limit, MPITEST_TIMEOUT (default 120)
#   --reuse-stock     do not re-run stock; compare with results/stock as committed
#   --stock-only      run only stock into results/stock (no icbc install needed);
#                     a later --reuse-stock run completes the comparison
#   --stock-env K=V   extra environment for the stock run (repeatable)
#   --icbc-env K=V    extra environment for the icbc run (repeatable),
#                     e.g. --icbc-env MPIR_CVAR_CH4_ICBC_YIELD=1
#
# Writes results/stock/, results/icbc/ (summary files) and results/comparison.md.
# Exit status: that of compare.py (1 if a test passing on stock fails on icbc).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
dirs="attr basic coll comm datatype errhan group info init pt2pt rma part topo"

icbc= stock=/usr timeout=120 reuse=0 stock_only=0
stock_args=() icbc_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --icbc) icbc=${2:?}; shift 2 ;;
        --stock) stock=${2:?}; shift 2 ;;
        --timeout) timeout=${2:?}; shift 2 ;;
        --reuse-stock) reuse=1; shift ;;
        --stock-only) stock_only=1; shift ;;
        --stock-env) stock_args+=(--env "${2:?}"); shift 2 ;;
        --icbc-env) icbc_args+=(--env "${2:?}"); shift 2 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ $reuse = 0 ] || [ $stock_only = 0 ] || {
    echo "compare.sh: --reuse-stock and --stock-only exclude each other" >&2; exit 2; }
if [ $stock_only = 1 ]; then
    :
elif [ -z "$icbc" ]; then
    for c in /work/main/_install "$top/_install"; do
        [ -x "$c/bin/mpiexec" ] && { icbc=$c; break; }
    done
fi
[ $stock_only = 1 ] || { [ -n "$icbc" ] && [ -x "$icbc/bin/mpiexec" ]; } || {
    echo "compare.sh: no icbc install found (give --icbc PREFIX)" >&2; exit 2; }
if [ $stock_only = 0 ] && ! "$icbc/bin/mpichversion" 2>/dev/null | grep -q 'Device:.*ch4:icbc'; then
    echo "compare.sh: warning: $icbc/bin/mpichversion does not report ch4:icbc" >&2
fi

results=$here/results
cmd="test/mpich/compare.sh"
[ "$icbc" = /work/main/_install ] || [ "$icbc" = "$top/_install" ] || cmd="$cmd --icbc $icbc"

mkdir -p "$top/_build/testsuite"
if [ $reuse = 0 ]; then
    echo "compare.sh: stock run ($stock), log: $top/_build/testsuite/stock.log"
    "$here/run-testsuite.sh" --mpi "$stock" --label stock --dirs "$dirs" \
        --timeout "$timeout" --retries 1 --jobs-note --save "$results/stock" \
        "${stock_args[@]+"${stock_args[@]}"}" >"$top/_build/testsuite/stock.log" 2>&1
    tail -1 "$top/_build/testsuite/stock.log"
    [ -f "$results/stock/tests.tsv" ] || {
        echo "compare.sh: stock run failed, see $top/_build/testsuite/stock.log" >&2; exit 2; }
else
    [ -f "$results/stock/tests.tsv" ] || {
        echo "compare.sh: --reuse-stock but no $results/stock/tests.tsv" >&2; exit 2; }
fi
[ $stock_only = 0 ] || exit 0

echo "compare.sh: icbc run ($icbc), log: $top/_build/testsuite/icbc.log"
"$here/run-testsuite.sh" --mpi "$icbc" --label icbc --dirs "$dirs" \
    --timeout "$timeout" --retries 1 --jobs-note --save "$results/icbc" \
    "${icbc_args[@]+"${icbc_args[@]}"}" >"$top/_build/testsuite/icbc.log" 2>&1
tail -1 "$top/_build/testsuite/icbc.log"
[ -f "$results/icbc/tests.tsv" ] || {
    echo "compare.sh: icbc run failed, see $top/_build/testsuite/icbc.log" >&2; exit 2; }

python=python3
command -v python3 >/dev/null 2>&1 || python=/usr/bin/python3
(cd "$top" && $python test/mpich/compare.py --ref-name stock --cand-name icbc \
    --command "$cmd" -o test/mpich/results/comparison.md \
    test/mpich/results/stock test/mpich/results/icbc)
rc=$?
echo "compare.sh: wrote $results/comparison.md (compare.py exit status $rc)"
exit $rc
