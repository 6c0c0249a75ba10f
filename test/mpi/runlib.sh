# Shared by test/mpi/run.sh and test/mpi/run-clusters.sh (sourced): PASS/FAIL
# counting and one bounded MPI run. The caller sets prefix, work (binaries
# and logs), limit (seconds) and, optionally, the array mpiexec_args (e.g.
# "-f hosts").

pass=0; fail=0
mpiexec_args=()

report() { # name status detail
    if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "PASS $1 $3"; else fail=$((fail + 1)); echo "FAIL $1 $3"; fi
}

# run NAME NP EXPECT [ENV...] [-- ARG...]: EXPECT is "ok" (exit 0 and "No Errors"/"succeeded")
# or "error:<regex>" (non-zero exit within the limit and output matching regex); ARGs
# after "--" go to the test program, which is $work/NAME without its ":variant".
run() {
    local tname=$1 np=$2 expect=$3; shift 3
    local exe="$work/${tname%%:*}" log="$work/$tname.log" start rc envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    start=$(date +%s)
    env "${envs[@]}" timeout -k 5 "$limit" "$prefix/bin/mpiexec" "${mpiexec_args[@]}" -n "$np" \
        "$exe" "$@" > "$log" 2>&1
    rc=$?
    local secs=$(( $(date +%s) - start ))
    if [ "$expect" = ok ]; then
        if [ $rc = 0 ] && grep -qE '^(No Errors|demo succeeded)$' "$log"; then
            report "$tname" 0 "(${secs}s)"
        else
            report "$tname" 1 "(rc $rc, ${secs}s; see $log)"; tail -n 5 "$log" | sed 's/^/    /'
        fi
    else
        local re=${expect#error:}
        if [ $rc = 124 ] || [ $rc = 137 ]; then
            report "$tname" 1 "(hung: killed after ${limit}s; see $log)"
        elif [ $rc != 0 ] && grep -qE "$re" "$log"; then
            report "$tname" 0 "(failed as expected with rc $rc in ${secs}s)"
        else
            report "$tname" 1 "(rc $rc, expected an error matching '$re'; see $log)"; tail -n 5 "$log" | sed 's/^/    /'
        fi
    fi
}
