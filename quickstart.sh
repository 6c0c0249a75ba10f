#!/bin/bash
# ICBC quick start, on a fresh Debian 12 machine, as root:
#
#   ./quickstart.sh demo   install what the build needs, build and install into
#                          ./_install (skipping what is already done), then the
#                          two-cluster demo: two emulated clusters (network
#                          namespaces) with routers, the inter-cluster bandwidth
#                          under the policies aggregate, static and alltoall side
#                          by side
#   ./quickstart.sh test   the same set-up and the test packages, then the default
#                          tier of the tests (about 30 min on 2 cores); lists every
#                          skip and ends with "N passed, N failed, N skipped"; exits
#                          non-zero on any failure
#
#   ./quickstart.sh test full      every suite (the default tier and every slice)
#   ./quickstart.sh test slice K   slice K of the full tier only
#   ./quickstart.sh test ci        the default tier and the slice the commit
#                                  checked out chooses (what CI runs)
#   ./quickstart.sh test list      the suites and slices
#
# Further commands: deps (packages only), build (deps + build + install), help.
# Environment: ICBC_PREFIX (default ./_install), ICBC_JOBS (default 2),
# ICBC_NPB_DIR (NPB 3.4-MPI sources for the NPB tests; benchmarks/README.md).
set -euo pipefail
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
prefix=${ICBC_PREFIX:-$top/_install}
jobs=${ICBC_JOBS:-2}
build="$top/_build"
logs="$build/logs"

# What the build and the demo need; what only the tests and benchmarks need is
# installed by "test" (the fuzzers' clang, the format check, stock MPICH for
# comparisons, pytest, mpi4py's venv, gdb for hung jobs, iperf3 for the
# testbed's tests, matplotlib for figures).
BUILD_PACKAGES="build-essential autoconf automake libtool pkg-config ccache gfortran
  libucx-dev ucx-utils libhwloc-dev libfabric-dev libssl-dev libgtest-dev googletest
  iproute2 ethtool iputils-ping procps psmisc python3 dpkg-dev xz-utils patch"
TEST_PACKAGES="clang libclang-rt-14-dev clang-format mpich libmpich-dev python3-pytest
  python3-venv python3-dev python3-matplotlib gdb iperf3"

step() { printf '\n==> %s\n' "$*"; }

need_root() {
    [ "$(id -u)" = 0 ] || { echo "quickstart: run as root (namespaces and apt need it)" >&2; exit 1; }
}

deps() { # packages...: installs those of them that are missing
    need_root
    local missing="" p
    for p in "$@"; do
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
    # shellcheck disable=SC2086
    deps $BUILD_PACKAGES "$@"
    mkdir -p "$build" "$logs"
    if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
        step "autogen (log: $logs/autogen.log)"
        ./autogen.sh > "$logs/autogen.log" 2>&1 || { tail -n 20 "$logs/autogen.log"; exit 1; }
    fi
    # configure looks for clang (the fuzzers): configure again once it is there
    local tools="clang=$(command -v clang || true)"
    if [ ! -f "$build/Makefile" ] || [ "$top/configure" -nt "$build/Makefile" ] \
        || [ "$(cat "$build/.configured-with" 2>/dev/null)" != "$tools" ]; then
        step "configure (log: $logs/configure.log)"
        (cd "$build" && "$top/configure" --prefix="$prefix") > "$logs/configure.log" 2>&1 \
            || { tail -n 20 "$logs/configure.log"; exit 1; }
        echo "$tools" > "$build/.configured-with"
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

tests() { # [full | slice K | ci | list]
    local args=()
    case "${1:-}" in
        "") ;;
        full) args=(--tier full) ;;
        slice) [ -n "${2:-}" ] || { echo "quickstart: test slice K (see: test list)" >&2; exit 2; }
               args=(--slice "$2") ;;
        ci) args=(--slice-of "$(git -C "$top" rev-parse HEAD)") ;;
        list) exec python3 "$top/test/run.py" --list ;;
        *) echo "quickstart: unknown test tier '$1' (full, slice K, ci, list)" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    build_all $TEST_PACKAGES
    python3 "$top/test/run.py" --prefix "$prefix" --build "$build" --logs "$logs" "${args[@]}"
}

case "${1:-help}" in
    demo) demo ;;
    test) shift; tests "$@" ;;
    build) build_all ;;
    # shellcheck disable=SC2086
    deps) deps $BUILD_PACKAGES $TEST_PACKAGES ;;
    help|-h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) echo "quickstart: unknown command '$1' (demo, test, build, deps, help)" >&2; exit 2 ;;
esac
