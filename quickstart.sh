#!/bin/bash
# ICBC quick start, on a fresh Debian 12 machine, as root:
#
#   ./quickstart.sh demo   install what is needed, build and install into ./_install
#                          (skipping what is already done), then the two-cluster demo:
#                          two emulated clusters (network namespaces) with routers, the
#                          inter-cluster bandwidth under the policies aggregate, static
#                          and alltoall side by side
#   ./quickstart.sh test   the same set-up, then every test suite; ends with
#                          "N passed, N failed" and exits non-zero on any failure
#
# Further commands: deps (packages only), build (deps + build + install), help.
# Environment: ICBC_PREFIX (default ./_install), ICBC_JOBS (default 2).
set -euo pipefail
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
prefix=${ICBC_PREFIX:-$top/_install}
jobs=${ICBC_JOBS:-2}
build="$top/_build"
logs="$build/logs"

PACKAGES="build-essential autoconf automake libtool pkg-config ccache gfortran
  libucx-dev ucx-utils libhwloc-dev libfabric-dev libssl-dev libgtest-dev googletest
  iproute2 iperf3 ethtool iputils-ping procps psmisc python3 python3-matplotlib python3-pytest python3-venv
  python3-dev dpkg-dev xz-utils patch gdb clang libclang-rt-14-dev clang-format
  mpich libmpich-dev"

step() { printf '\n==> %s\n' "$*"; }

need_root() {
    [ "$(id -u)" = 0 ] || { echo "quickstart: run as root (namespaces and apt need it)" >&2; exit 1; }
}

deps() {
    need_root
    local missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        step "packages: all present"
        return
    fi
    step "packages: installing$missing (log: $logs/apt.log)"
    mkdir -p "$logs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q > "$logs/apt.log" 2>&1
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing >> "$logs/apt.log" 2>&1 \
        || { tail -n 20 "$logs/apt.log"; exit 1; }
}

build_all() {
    deps
    mkdir -p "$build" "$logs"
    if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
        step "autogen (log: $logs/autogen.log)"
        ./autogen.sh > "$logs/autogen.log" 2>&1 || { tail -n 20 "$logs/autogen.log"; exit 1; }
    fi
    if [ ! -f "$build/Makefile" ] || [ "$top/configure" -nt "$build/Makefile" ]; then
        step "configure (log: $logs/configure.log)"
        (cd "$build" && "$top/configure" --prefix="$prefix") > "$logs/configure.log" 2>&1 \
            || { tail -n 20 "$logs/configure.log"; exit 1; }
    fi
    step "build: libicbc, tools, MPICH 4.0.2 with ch4:icbc (logs: $logs/make.log, $build/mpich/logs/)"
    make -C "$build" -j"$jobs" > "$logs/make.log" 2>&1 || { tail -n 30 "$logs/make.log"; exit 1; }
    step "install into $prefix (log: $logs/install.log)"
    make -C "$build" install > "$logs/install.log" 2>&1 || { tail -n 30 "$logs/install.log"; exit 1; }
    "$prefix/bin/mpichversion" | sed -n 's/^MPICH Device: */  MPICH device: /p'
}

demo() {
    build_all
    step "two-cluster demo: 2 clusters x 4 emulated nodes, 4 routers each, NIC 100 Mbit/s, WAN 400 Mbit/s"
    "$top/examples/two-cluster-demo.sh" --prefix "$prefix"
}

run_suite() { # name command...: runs a suite, keeps its log, adds its counts
    local sname=$1; shift
    local log="$logs/test-$sname.log" p f
    step "tests: $sname (log: $log)"
    set +e
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    set -e
    p=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/')
    f=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/')
    if [ -z "$p" ]; then p=0; f=1; echo "quickstart: suite $sname printed no summary (rc $rc)"; fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "quickstart: suite $sname exited with $rc"; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    summary="$summary\n  $sname: $p passed, $f failed"
    if [ "$f" != 0 ]; then # what failed, in the summary CI shows
        local line
        while IFS= read -r line; do
            summary="$summary\n    ${line:0:200}"
        done < <(grep -E 'FAILED' "$log" | grep -v '^=' | head -n 6)
    fi
}

unit_tests() {
    # The unit tests, once in the normal build and once under ASan+UBSan.
    local p=0 f=0 dir
    for dir in "$build" "$build/asan"; do
        if [ "$dir" = "$build/asan" ] && [ ! -f "$dir/Makefile" ]; then
            mkdir -p "$dir"
            (cd "$dir" && "$top/configure" --disable-mpich --enable-sanitizers) > "$logs/configure-asan.log" 2>&1
        fi
        local t="normal"; [ "$dir" = "$build/asan" ] && t="asan+ubsan"
        if make -C "$dir" -j"$jobs" check > "$logs/unit-$t.log" 2>&1; then :; fi
        local tp tf
        tp=$(grep -hE '^\[  PASSED  \] [0-9]+ test' "$dir"/test/*/*.log 2>/dev/null | sed -E 's/.* ([0-9]+) test.*/\1/' | awk '{s+=$1} END {print s+0}')
        tf=$(grep -hE '^\[  FAILED  \] [0-9]+ test' "$dir"/test/*/*.log 2>/dev/null | sed -E 's/.* ([0-9]+) test.*/\1/' | awk '{s+=$1} END {print s+0}')
        if ! grep -q '^# FAIL: *0' "$logs/unit-$t.log" || ! grep -q '^# ERROR: *0' "$logs/unit-$t.log"; then
            [ "$tf" -gt 0 ] || tf=1
            tail -n 40 "$logs/unit-$t.log"
        fi
        echo "unit tests ($t): $tp passed, $tf failed"
        p=$((p + tp)); f=$((f + tf))
    done
    echo "$p passed, $f failed"
    [ "$f" = 0 ]
}

tests() {
    build_all
    total_pass=0; total_fail=0; summary=""
    run_suite format "$top/contrib/check-format.sh"
    run_suite unit unit_tests
    run_suite fuzz "$top/test/fuzz/run.sh" --build "$build" --seconds 20
    [ -x "$top/test/testbed/run.sh" ] && run_suite testbed "$top/test/testbed/run.sh"
    run_suite mpi python3 -m pytest "$top/test/pytest/test_one_cluster.py" --prefix "$prefix"
    run_suite first-contact python3 "$top/test/mpi/first_contact.py" --prefix "$prefix"
    run_suite trust-boundary python3 "$top/test/mpi/trust_boundary.py" --prefix "$prefix"
    run_suite clusters python3 -m pytest -m "not slow" "$top/test/pytest/test_clusters.py" \
        "$top/test/pytest/test_mpich_clusters.py" "$top/test/pytest/test_npb.py" \
        "$top/test/pytest/test_apps_results.py" "$top/test/pytest/test_testbed_counters.py" \
        "$top/test/pytest/test_pacing.py" --prefix "$prefix"
    run_suite failover python3 -m pytest "$top/test/pytest/test_failover.py" --prefix "$prefix"
    run_suite impi-lam python3 -m pytest "$top/test/pytest/test_impi_lam.py" --build "$build"
    run_suite impi-clients python3 -m pytest "$top/test/pytest/test_impi_clients.py" --prefix "$prefix"
    run_suite mpich-impi python3 -m pytest "$top/test/pytest/test_mpich_impi.py" --prefix "$prefix"
    run_suite mpi4py python3 "$top/test/mpi/mpi4py_suite.py" --prefix "$prefix" \
        --layout both --policies aggregate --csv "$logs/mpi4py-times.csv"
    [ -x "$top/test/mpich/run-testsuite.sh" ] && \
        run_suite mpich-testsuite "$top/test/mpich/run-testsuite.sh" --ci --mpi "$prefix" --label icbc
    step "summary"
    printf "%b\n" "$summary"
    echo "$total_pass passed, $total_fail failed"
    [ "$total_fail" = 0 ]
}

case "${1:-help}" in
    demo) demo ;;
    test) tests ;;
    build) build_all ;;
    deps) deps ;;
    help|-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) echo "quickstart: unknown command '$1' (demo, test, build, deps, help)" >&2; exit 2 ;;
esac
