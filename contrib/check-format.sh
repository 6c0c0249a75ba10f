#!/bin/bash
# The C and C++ sources against .clang-format (clang-format 14, Debian's);
# the Fortran include icbcf.h is not C.
#
#   contrib/check-format.sh          list the files that differ; exit 1 if any
#   contrib/check-format.sh --fix    rewrite them in place
#
# Prints "N passed, N failed" (one check per file), as the test suites do.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
fix=0
[ "${1:-}" = --fix ] && fix=1
command -v clang-format > /dev/null || { echo "check-format: clang-format is not installed"; echo "0 passed, 1 failed"; exit 1; }
pass=0 fail=0
while IFS= read -r f; do
    if [ $fix = 1 ]; then
        clang-format -i --style=file "$f"
    fi
    if clang-format --style=file --dry-run --Werror "$f" > /dev/null 2>&1; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $f is not formatted (contrib/check-format.sh --fix)"
    fi
done < <(git ls-files 'src/*.c' 'src/*.h' 'test/*.c' 'test/*.cc' 'examples/*.c' 'benchmarks/*.c' \
             | grep -v -e '^test/mpich/' -e '/icbcf\.h$')  # icbcf.h is Fortran
echo "$pass passed, $fail failed"
[ $fail = 0 ]
