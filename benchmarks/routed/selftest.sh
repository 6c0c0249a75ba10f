#!/bin/bash
# Self-test of the benchmark runners' pieces that need no testbed: stripe.py (ceilings,
# ratios, verdicts, bad input), run.sh's, builds.py's and startup.py's option checks, and
# the comparison tables of benchmarks/common (test_compare.py). Prints PASS/FAIL per check and
# "N passed, N failed"; exit status 1 if any failed. Run: benchmarks/routed/selftest.sh
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
T=$(mktemp -d /tmp/icbc-routed-selftest.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
check() { # NAME CONDITION-EXIT-STATUS [DETAIL]
    if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "PASS: $1"
    else fail=$((fail + 1)); echo "FAIL: $1${3:+ -- $3}"; fi
}

bw() { printf 'size,bandwidth_mbps\n8388608,%s\n' "$2" > "$T/$1.csv"; echo "$T/$1.csv"; }

# min(R x 100 Mbit/s, 400 Mbit/s) = 12.5, 25, 50 MB/s
out=$($PY "$HERE/stripe.py" --nic-rate 100mbit --wan-rate 400mbit --size 8M \
      --series 1 "$(bw r1a 11.6)" "$(bw r1b 11.9)" "$(bw r1c 5)" --series 2 "$(bw r2 23.5)" \
      --series 4 "$(bw r4 47)" --out "$T/s.csv" --png "$T/s.png" 2>&1)
rc=$?
[ $rc = 0 ] && [ -s "$T/s.png" ] && [ -s "$T/s.csv" ]
check "stripe.py exits 0 and writes CSV and PNG" $? "$out"
check "median over reps (11.6 of 11.6, 11.9, 5)" "$(grep -q '^1,11.600,5.000,11.900,3,12.500' "$T/s.csv"; echo $?)" "$(cat "$T/s.csv")"
check "ceiling is min(R x NIC, WAN): 50 MB/s at R=4" "$(grep -q '^4,47.000,.*,50.000,' "$T/s.csv"; echo $?)"
check "verdict PASS when every ratio >= 0.92" "$(grep -q 'R = 1, 2, 4: PASS' <<< "$out"; echo $?)" "$out"

out=$($PY "$HERE/stripe.py" --nic-rate 100mbit --wan-rate 150mbit --size 8M \
      --series 1 "$(bw x1 12)" --series 2 "$(bw x2 15)" --out "$T/w.csv" 2>&1)
check "WAN bounds the ceiling (150 Mbit/s = 18.75 MB/s at R=2), 0.8 misses" \
    "$(grep -q 'FAIL (R=2: 0.800)' <<< "$out"; echo $?)" "$out"
out=$($PY "$HERE/stripe.py" --nic-rate 100mbit --wan-rate 0 --size 8M \
      --series 4 "$(bw u4 48)" --out "$T/u.csv" 2>&1)
check "WAN rate 0 is unlimited: ceiling 4 x NIC" "$(grep -q '^4,48.000,.*,50.000,' "$T/u.csv"; echo $?)" "$out"

out=$($PY "$HERE/stripe.py" --nic-rate fast --wan-rate 400mbit --size 8M \
      --series 1 "$(bw b1 1)" --out "$T/b.csv" 2>&1)
rc=$?
check "a bad rate exits 2 naming it" $(( rc != 2 )) "$out"
out=$($PY "$HERE/stripe.py" --nic-rate 100mbit --wan-rate 400mbit --size 4M \
      --series 1 "$(bw m1 1)" --out "$T/m.csv" 2>&1)
rc=$?
check "a missing size exits 2 naming the file" $(( rc != 2 )) "$out"

# run.sh refuses bad options before it needs root or an install
# each bad option: exit 2 with the error that names it
while IFS='|' read -r args want; do
    eval "set -- $args"
    out=$("$HERE/run.sh" "$@" 2>&1)
    rc=$?
    check "run.sh $args: exit 2, '$want'" "$( [ $rc = 2 ] && grep -qF -- "$want" <<< "$out"; echo $?)" "rc $rc: $out"
done <<'EOF'
--policies bogus|unknown policy 'bogus'
--policies 'aggregate aggregate'|'aggregate' twice
--parts nope|unknown part 'nope'
--routers 9|--routers must be 0..4
--nodes 0|--nodes must be 1..99
--stripe-routers 8|--stripe-routers: '8' is not 1..--routers (4)
--reps x|--reps must be a positive number
--testbed-name TooLongName|--testbed-name: 1-8 of
--env NOEQUALS|--env item 'NOEQUALS' is not KEY=VALUE
--frobnicate|unrecognized arguments: --frobnicate
--small-max lots|--small-max: a size like 1K
--parts placement --routers 1|the placement part needs --routers >= 2
--parts placement --nic-rate 0|the placement part needs a shaped NIC
--parts placement --placement-slow fast|--placement-slow: rate 'fast'
EOF
out=$("$HERE/run.sh" --help 2>&1)
check "run.sh --help" "$(grep -q 'Usage: benchmarks/routed/run.sh' <<< "$out"; echo $?)"

# builds.py: bad usage is refused before anything runs (exit 2, the reason named)
B=$(cd "$HERE/../.." && pwd)/_install
while IFS='|' read -r args want; do
    out=$(/usr/bin/python3 "$HERE/builds.py" $args 2>&1); rc=$?
    check "builds.py $args: exit $rc, '$want'" "$([ $rc = 2 ] && grep -qF -- "$want" <<< "$out"; echo $?)"
done <<EOF
--build only=/nonexistent|/nonexistent/bin/icbc-router not found
--build a=$B|give at least two --build
--build a=$B --build a=$B|build labels must differ
--build a=$B --build b=$B --prefix /x|--prefix is set per build here
--build a=$B --build b=$B --reps 0|--reps: a positive integer
EOF

# startup.py: bad usage is refused before anything runs (exit 2, the reason named)
while IFS='|' read -r args want; do
    out=$(/usr/bin/python3 "$HERE/../startup/startup.py" $args 2>&1); rc=$?
    check "startup.py $args: exit $rc, '$want'" "$([ $rc = 2 ] && grep -qF -- "$want" <<< "$out"; echo $?)"
done <<EOF
|--build NAME=PREFIX at least once
--build a=/nonexistent|no mpicc/mpiexec in /nonexistent/bin
--build a|want NAME=PREFIX
--build a=$B:FI_PROVIDER|'FI_PROVIDER' is not K=V
--build a=$B --build a=$B|build names must differ
--build a=$B --layouts 8|'8' is not NxK
--build a=$B --reps 0|--reps wants at least 1
EOF

# The comparison tables, ratios and verdicts (benchmarks/common/test_compare.py)
out=$(/usr/bin/python3 "$HERE/../common/test_compare.py" 2>&1)
echo "$out" | grep -E '^(PASS|FAIL)'
read -r p f < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' <<< "$out" | tail -1)
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
