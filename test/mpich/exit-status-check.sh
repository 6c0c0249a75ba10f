#!/bin/sh
# Program wrapper for test programs that report by exit status instead of
# printing "No Errors" (test/mpi/basic).  runtests starts it as
#     mpiexec -n N exit-status-check.sh ./prog args...
# Each rank runs the program with its output kept aside.  A rank that exits
# non-zero, or prints a line containing "FAILURE" or "error", shows the
# program's output and exits non-zero; otherwise rank 0 prints "No Errors".
out=$(mktemp "${TMPDIR:-/tmp}/exit-status-check.XXXXXX") || exit 1
"$@" >"$out" 2>&1 &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
rc=0
wait $child || rc=$?
while kill -0 $child 2>/dev/null; do
    rc=0
    wait $child || rc=$?
done
if [ $rc -ne 0 ] || grep -Eiq 'FAILURE|error' "$out"; then
    echo "rank ${PMI_RANK:-?}: exit status $rc; output:"
    cat "$out"
    rm -f "$out"
    [ $rc -ne 0 ] || rc=1
    exit $rc
fi
rm -f "$out"
if [ "${PMI_RANK:-0}" = 0 ]; then
    echo " No Errors"
fi
exit 0
