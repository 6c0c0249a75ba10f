#!/bin/bash
# Runs every testbed test (as root) and ends with "N passed, N failed",
# counting the PASS/FAIL lines of all tests; a test that dies or times out
# without reporting counts as one failure.
#
# Usage: test/testbed/run.sh [TEST...]     (default: all *.sh but lib.sh/run.sh)
# Environment: ICBC_WANEMU or ICBC_BUILD_DIR locate icbc-wanemu (else PATH, else
# it is compiled from the sources); ICBC_TEST_TIMEOUT per test (default 240 s).
dir=$(cd "$(dirname "$0")" && pwd)
tests=("$@")
if (( ${#tests[@]} == 0 )); then
    for t in args single rtt throughput overload private reach down; do tests+=("$dir/$t.sh"); done
fi
passed=0 failed=0
start=$(date +%s)
for t in "${tests[@]}"; do
    [[ -f $t ]] || t=$dir/$t.sh
    name=$(basename "$t" .sh)
    echo "=== $name"
    log=$(mktemp)
    timeout -k 10 "${ICBC_TEST_TIMEOUT:-240}" bash "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(grep -c '^PASS: ' "$log")
    f=$(grep -c '^FAIL: ' "$log")
    if (( rc != 0 && f == 0 )); then
        echo "FAIL: $name exited with status $rc without reporting a failure"
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
    rm -f "$log"
done
echo "testbed tests took $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
(( failed == 0 ))
