#!/bin/bash
# Build and install MPICH 4.0.2 with the icbc netmod.
#
#   build-mpich.sh --prefix DIR [--source TARBALL|DIR|debian] [--builddir DIR]
#                  [--jobs N] [--stage all|prepare|build|install]
#
# Stages (each skipped when already done and its inputs are unchanged):
#   source     extract the MPICH source (default: Debian's source package)
#   patch      apply contrib/mpich/patches/*.patch
#   overlay    link src/mpid/icbc as src/mpid/ch4/netmod/icbc, src/icbc as its core/,
#              src/bt_lib, src/mx_router and src/router beside it
#   autogen    regenerate MPICH's build system (needed for a new netmod)
#   configure  --with-device=ch4:icbc, Fortran on, dataloop datatype engine
#   make       make -jN
#   install    make install into --prefix
# Logs: BUILDDIR/logs/<stage>.log
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
prefix=""
source_arg=debian
builddir="$top/_build/mpich"
jobs=2
stage=all

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --source) source_arg=$2; shift 2 ;;
        --builddir) builddir=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --stage) stage=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-mpich: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "build-mpich: --prefix is required" >&2; exit 2; }
mkdir -p "$builddir/logs" "$prefix"
prefix=$(cd "$prefix" && pwd)
builddir=$(cd "$builddir" && pwd)
src="$builddir/mpich-4.0.2"
obj="$builddir/build"
logs="$builddir/logs"

say() { printf '[build-mpich %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run_logged() {
    local name=$1; shift
    say "$name ... (log: $logs/$name.log)"
    if ! "$@" > "$logs/$name.log" 2>&1; then
        echo "build-mpich: stage '$name' failed; last lines of $logs/$name.log:" >&2
        tail -n 30 "$logs/$name.log" >&2
        exit 1
    fi
}

# ---- source ---------------------------------------------------------------
if [ ! -f "$src/.icbc-source" ]; then
    rm -rf "$src"
    case "$source_arg" in
        debian) tarball=$("$top/contrib/mpich/fetch-mpich-source.sh") ;;
        *) tarball=$source_arg ;;
    esac
    if [ -d "$tarball" ]; then
        say "source: copying $tarball"
        mkdir -p "$src" && cp -a "$tarball/." "$src/"
    elif [ -f "$tarball" ]; then
        say "source: extracting $tarball"
        mkdir -p "$src" && tar -xf "$tarball" -C "$src" --strip-components=1
    else
        echo "build-mpich: MPICH source '$tarball' not found" >&2; exit 1
    fi
    grep -q '4\.0\.2' "$src/maint/version.m4" || { echo "build-mpich: $tarball is not MPICH 4.0.2" >&2; exit 1; }
    echo "$tarball" > "$src/.icbc-source"
fi

# ---- patch ----------------------------------------------------------------
for p in "$top"/contrib/mpich/patches/*.patch; do
    stamp="$src/.icbc-patch-$(basename "$p")"
    [ -f "$stamp" ] && continue
    say "patch: $(basename "$p")"
    (cd "$src" && patch -p1 --forward --silent < "$p") || { echo "build-mpich: patch $p failed" >&2; exit 1; }
    touch "$stamp"
done

# ---- overlay --------------------------------------------------------------
# A real directory of links: MPICH's generator writes func_table.c and
# icbc_noinline.h into it, which must not land in our source tree.
nm="$src/src/mpid/ch4/netmod/icbc"
mkdir -p "$nm"
for f in "$top"/src/mpid/icbc/*; do
    ln -sfn "$f" "$nm/$(basename "$f")"
done
ln -sfn "$top/src/icbc" "$nm/core"
ln -sfn "$top/src/bt_lib" "$nm/bt_lib"
ln -sfn "$top/src/mx_router" "$nm/mx_router"
ln -sfn "$top/src/router" "$nm/router"
ln -sfn "$top/src/impi" "$nm/impi"
for l in "$nm"/*; do   # drop links to files that no longer exist
    [ -L "$l" ] && [ ! -e "$l" ] && rm -f "$l"
done

# ---- autogen --------------------------------------------------------------
# Inputs of autogen: the patches, the netmod's build fragments, error names
# and CVAR blocks. Their checksum is kept in the stamp.
autogen_stamp="$src/.icbc-autogen"
autogen_sig=$(cd "$top" && { cat contrib/mpich/patches/*.patch src/mpid/icbc/subconfigure.m4 \
        src/mpid/icbc/Makefile.mk src/mpid/icbc/errnames.txt;
    for f in src/mpid/icbc/*.c; do sed -n '/BEGIN_MPI_T_CVAR_INFO_BLOCK/,/END_MPI_T_CVAR_INFO_BLOCK/p' "$f"; done;
    } | sha256sum | cut -c1-64)
if [ ! -f "$autogen_stamp" ] || [ "$(cat "$autogen_stamp")" != "$autogen_sig" ]; then
    # Only what the patches and the netmod change is regenerated: hydra,
    # json-c and test/mpi keep the release tarball's build files.
    run_logged autogen bash -c "cd '$src' && ./autogen.sh -quick -without-ucx -without-ofi \
        -without-hwloc -without-izem -without-hydra -without-json -without-test"
    [ -f "$nm/func_table.c" ] && [ -f "$nm/icbc_noinline.h" ] \
        || { echo "build-mpich: autogen did not generate the icbc function table" >&2; exit 1; }
    echo "$autogen_sig" > "$autogen_stamp"
    rm -f "$obj/.icbc-configured"
fi
[ "$stage" = prepare ] && exit 0

# ---- configure ------------------------------------------------------------
# ccache through its directory of compiler names, not in CC: configure writes
# CC into the installed mpicc, which must run where ccache is not installed.
cc="gcc"; cxx="g++"; fc="gfortran"
if [ -d /usr/lib/ccache ]; then export PATH=/usr/lib/ccache:$PATH; fi
config_sig="prefix=$prefix cc=$cc"
if [ ! -f "$obj/.icbc-configured" ] || [ "$(cat "$obj/.icbc-configured")" != "$config_sig" ]; then
    mkdir -p "$obj"
    # --no-recursion: MPICH's own test/mpi is not configured with the build
    # (test/mpich/run-testsuite.sh configures a copy of it against the install).
    run_logged configure bash -c "cd '$obj' && '$src/configure' --prefix='$prefix' --no-recursion \
        --with-device=ch4:icbc --with-pm=hydra --with-datatype-engine=dataloop \
        --disable-static --enable-shared --enable-fortran=all --disable-doc \
        CC='$cc' CXX='$cxx' FC='$fc' F77='$fc' \
        FFLAGS='-O2 -fallow-argument-mismatch' FCFLAGS='-O2 -fallow-argument-mismatch'"
    grep -q "ch4:icbc" "$obj/src/include/mpichinfo.h" 2>/dev/null \
        || grep -q "MPICH_DEVICE.*ch4:icbc" "$obj/src/env/mpichversion.c" 2>/dev/null || true
    echo "$config_sig" > "$obj/.icbc-configured"
fi

# ---- make / install -------------------------------------------------------
if [ "$stage" = all ] || [ "$stage" = build ]; then
    run_logged make make -C "$obj" -j"$jobs"
fi
if [ "$stage" = all ] || [ "$stage" = install ]; then
    run_logged install make -C "$obj" install
    device=$("$prefix/bin/mpichversion" --device 2>/dev/null || true)
    say "installed MPICH into $prefix (device: ${device:-unknown})"
fi
