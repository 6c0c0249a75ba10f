#!/bin/bash
# Save the cross-cluster runs of MPICH's test suite made by
# test/mpi/run-clusters.sh --mpich-dirs ... --mpich-policies ... and compare
# each policy with the single-cluster icbc run (results/icbc), over the same
# directories.
#
# usage: compare-clusters.sh [--from DIR] POLICY...
#
#   --from DIR   where run-clusters.sh left mpich-2clusters-POLICY/
#                (default <repo>/_build/test-clusters)
#
# Writes results/2clusters/POLICY/ (summary files) and
# results/2clusters/comparison-POLICY.md. The runs themselves:
#
#   test/mpi/run-clusters.sh --prefix _install --quick \
#       --mpich-dirs "pt2pt coll comm datatype rma part" --mpich-list full \
#       --mpich-policies "aggregate static alltoall tcp"
#
# Exit status: 1 if, for some policy, a test that passes in one cluster does
# not pass across two (compare.py's verdict), 2 on bad usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
from=$top/_build/test-clusters
while [ $# -gt 0 ]; do
    case $1 in
        --from) from=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "compare-clusters.sh: unknown option '$1'" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "compare-clusters.sh: name at least one policy" >&2; exit 2; }

rc=0
for pol in "$@"; do
    src=$from/mpich-2clusters-$pol
    dst=$here/results/2clusters/$pol
    [ -f "$src/tests.tsv" ] || { echo "compare-clusters.sh: no results in $src" >&2; rc=2; continue; }
    mkdir -p "$dst"
    for f in summary.xml summary.tap summary.junit.xml counts.tsv tests.tsv failures.txt \
        run-info.txt; do
        [ ! -f "$src/$f" ] || cp "$src/$f" "$dst/$f"
    done
    dirs=$(sed -n 's/^dirs=//p' "$dst/run-info.txt")
    (cd "$top" && python3 test/mpich/compare.py test/mpich/results/icbc \
        "test/mpich/results/2clusters/$pol" --ref-name "one cluster" \
        --cand-name "two clusters, $pol" --dirs "$dirs" \
        --command "test/mpi/run-clusters.sh --prefix _install --quick --mpich-dirs \"$dirs\" --mpich-list full --mpich-policies \"$pol\"; test/mpich/compare-clusters.sh $pol" \
        -o "test/mpich/results/2clusters/comparison-$pol.md")
    r=$?
    echo "$pol: $(grep -E '^(\*\*[0-9]+ test|Every test)' "$here/results/2clusters/comparison-$pol.md" | tail -1)"
    [ $r -le $rc ] || rc=$r
done
exit $rc
