#!/bin/bash
# Save the cross-cluster runs of MPICH's test suite made by
# test/pytest/test_mpich_clusters.py --mpich-policies ... and compare
# each policy with the single-cluster icbc run (results/icbc), over the same
# directories.
#
# usage: compare-clusters.sh [--from DIR] [--long] POLICY...
#
#   --from DIR   where the pytest suite left mpich-2clusters-POLICY/
#                (default <repo>/_build/test-pytest)
#   --long       the runs are of test/mpich/long-rma.list with a longer time
#                limit (--mpich-dirs rma --mpich-list test/mpich/long-rma.list
#                --mpich-timeout 900): save them in
#                results/2clusters/long-rma/POLICY/ and tabulate every saved
#                policy in results/2clusters/long-rma.md
#
# Writes results/2clusters/POLICY/ (summary files) and
# results/2clusters/comparison-POLICY.md. The runs themselves:
#
#   python3 -m pytest test/pytest/test_mpich_clusters.py --prefix _install \
#       --mpich-list full --mpich-policies "aggregate static alltoall tcp"
#
# Exit status: 1 if, for some policy, a test that passes in one cluster does
# not pass across two (compare.py's verdict), 2 on bad usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
from=$top/_build/test-pytest
long=0
while [ $# -gt 0 ]; do
    case $1 in
        --from) from=${2:?}; shift 2 ;;
        --long) long=1; shift ;;
        -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "compare-clusters.sh: unknown option '$1'" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "compare-clusters.sh: name at least one policy" >&2; exit 2; }

# long_note POLICY: (re)writes, at the end of comparison-POLICY.md, how the
# tests of the long runs did with their longer time limit.
long_note() {
    local md=$here/results/2clusters/comparison-$1.md tsv=$here/results/2clusters/long-rma/$1/tests.tsv
    [ -f "$md" ] && [ -f "$tsv" ] || return 0
    sed -i '/^## With a longer time limit/,$d' "$md"
    sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$md" # trailing blank lines
    {
        echo
        echo "## With a longer time limit"
        echo
        echo "The tests that move gigabytes, run alone with a limit of" \
            "$(sed -n 's/^timeout=//p' "$here/results/2clusters/long-rma/$1/run-info.txt") s" \
            "(long-rma.md, \`compare-clusters.sh --long\`):"
        echo
        awk -F'\t' 'NR > 1 { printf "* `%s`: %s in %.0f s\n", $1, $3, $4 }' "$tsv"
    } >> "$md"
}

if [ $long = 1 ]; then
    rc=0
    for pol in "$@"; do
        src=$from/mpich-2clusters-$pol
        dst=$here/results/2clusters/long-rma/$pol
        [ -f "$src/tests.tsv" ] || { echo "compare-clusters.sh: no results in $src" >&2; rc=2; continue; }
        mkdir -p "$dst"
        for f in summary.tap tests.tsv failures.txt run-info.txt; do
            [ ! -f "$src/$f" ] || cp "$src/$f" "$dst/$f"
        done
        long_note "$pol"
    done
    python3 - "$here/results/2clusters/long-rma" > "$here/results/2clusters/long-rma.md" <<'PY' || rc=1
import csv, os, sys
root = sys.argv[1]
pols = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "tests.tsv")))
order = ["aggregate", "static", "alltoall", "tcp"]
pols.sort(key=lambda p: order.index(p) if p in order else len(order))
rows, info, bad = {}, {}, 0
for p in pols:
    with open(os.path.join(root, p, "run-info.txt")) as f:
        info[p] = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l and not l.startswith("#"))
    with open(os.path.join(root, p, "tests.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows.setdefault(r["test"], {})[p] = (r["status"], r["time"])
            bad += r["status"] != "pass"
print("# MPICH rma tests that move gigabytes, across two clusters, longer time limit\n")
print("The two tests of `rma/testlist` that time out at MPICH's 120 s across the emulated")
print("clusters (1 Gbit/s NICs, 100 us WAN delay), run alone with the time limit below.")
print("Regenerate: `python3 -m pytest test/pytest/test_mpich_clusters.py --prefix _install")
print("--mpich-dirs rma --mpich-list test/mpich/long-rma.list --mpich-timeout 900")
print("--mpich-policies \"aggregate static alltoall tcp\"` then")
print("`test/mpich/compare-clusters.sh --long aggregate static alltoall tcp`.\n")
print("| test | " + " | ".join(pols) + " |")
print("| --- |" + " --- |" * len(pols))
for t in sorted(rows):
    cells = []
    for p in pols:
        st, tm = rows[t].get(p, ("-", ""))
        cells.append(f"{st} ({float(tm):.0f} s)" if tm else st)
    print(f"| `{t}` | " + " | ".join(cells) + " |")
print()
for p in pols:
    i = info[p]
    print(f"* {p}: {i.get('date', '?')}, time limit {i.get('timeout', '?')} s, {i.get('env', '').strip()}")
print(f"\n{'Every test passed.' if bad == 0 else str(bad) + ' test run(s) did not pass.'}")
sys.exit(1 if bad else 0)
PY
    cat "$here/results/2clusters/long-rma.md"
    exit $rc
fi

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
        --command "python3 -m pytest test/pytest/test_mpich_clusters.py --prefix _install --mpich-dirs \"$dirs\" --mpich-list full --mpich-policies \"$pol\"; test/mpich/compare-clusters.sh $pol" \
        -o "test/mpich/results/2clusters/comparison-$pol.md")
    r=$?
    long_note "$pol"
    echo "$pol: $(grep -E '^(\*\*[0-9]+ test|Every test)' "$here/results/2clusters/comparison-$pol.md" | tail -1)"
    [ $r -le $rc ] || rc=$r
done
exit $rc
