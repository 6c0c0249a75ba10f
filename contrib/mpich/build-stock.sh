#!/bin/bash
# Build and install a stock MPICH 4.0.2 (no icbc, no patches) from the same
# source as ours, for comparisons: ch4:ofi over Debian's libfabric (MPICH's
# own default device, which Debian does not package), or ch4:ucx.
#
#   build-stock.sh --prefix DIR [--device ch4:ofi|ch4:ucx] [--source TARBALL]
#                  [--builddir DIR] [--jobs N]
#
# Defaults: --device ch4:ofi, --source Debian's source package (fetched into
# <repo>/_cache), --builddir <repo>/_build/stock-<device>. C and C++ only
# (the benchmarks are C), shared libraries, hydra, ccache when installed.
# A finished install whose configuration matches is left as it is.
# Logs: BUILDDIR/logs/{configure,make,install}.log
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
prefix="" device=ch4:ofi source_arg="" builddir="" jobs=2

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --device) device=$2; shift 2 ;;
        --source) source_arg=$2; shift 2 ;;
        --builddir) builddir=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-stock: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "build-stock: --prefix is required" >&2; exit 2; }
case "$device" in
    ch4:ofi) fabric=(--with-libfabric=/usr) ; pkg=libfabric-dev ;;
    ch4:ucx) fabric=(--with-ucx=/usr) ; pkg=libucx-dev ;;
    *) echo "build-stock: --device must be ch4:ofi or ch4:ucx" >&2; exit 2 ;;
esac
dpkg -s "$pkg" >/dev/null 2>&1 || { echo "build-stock: $device needs $pkg (apt-get install $pkg)" >&2; exit 1; }
builddir=${builddir:-$top/_build/stock-${device#ch4:}}
mkdir -p "$builddir/logs" "$prefix"
prefix=$(cd "$prefix" && pwd)
builddir=$(cd "$builddir" && pwd)
logs=$builddir/logs
src=$builddir/mpich-4.0.2
cc=gcc cxx=g++
if command -v ccache >/dev/null; then cc="ccache gcc" cxx="ccache g++"; fi
args=(--prefix="$prefix" --with-device="$device" "${fabric[@]}" --with-pm=hydra
      --disable-fortran --disable-doc --enable-shared --disable-static)
stamp="$prefix/.icbc-stock"

say() { printf '[build-stock %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run_logged() {
    local name=$1; shift
    say "$name ... (log: $logs/$name.log)"
    if ! "$@" > "$logs/$name.log" 2>&1; then
        echo "build-stock: '$name' failed; last lines of $logs/$name.log:" >&2
        tail -n 30 "$logs/$name.log" >&2
        exit 1
    fi
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${args[*]}" ] && [ -x "$prefix/bin/mpichversion" ]; then
    say "$prefix: stock MPICH ($device) installed already"
    exit 0
fi
if [ ! -f "$src/maint/version.m4" ]; then
    tarball=${source_arg:-$("$top/contrib/mpich/fetch-mpich-source.sh")}
    say "source: extracting $tarball"
    rm -rf "$src" && mkdir -p "$src"
    tar -xf "$tarball" -C "$src" --strip-components=1
    grep -q '4\.0\.2' "$src/maint/version.m4" || { echo "build-stock: $tarball is not MPICH 4.0.2" >&2; exit 1; }
fi
# MPICH's configure adds `pkg-config --static --libs libfabric` to the link
# line, and Debian's libfabric.pc lists static-only dependencies there (psm,
# psm2, rdmacm, verbs, efa) whose development files are not installed; a
# shared build needs none of them. Configure sees a copy without them.
pcdir=$builddir/pkgconfig
if [ "$device" = ch4:ofi ]; then
    pc=$(pkg-config --variable=pcfiledir libfabric)/libfabric.pc
    mkdir -p "$pcdir"
    sed 's/^Libs.private:.*/Libs.private:/' "$pc" > "$pcdir/libfabric.pc"
fi
rm -rf "$builddir/build" && mkdir -p "$builddir/build"
cd "$builddir/build"
run_logged configure env PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    "$src/configure" CC="$cc" CXX="$cxx" "${args[@]}"
run_logged make make -j"$jobs"
run_logged install make install
echo "${args[*]}" > "$stamp"
"$prefix/bin/mpichversion" | sed -n 's/^MPICH \(Version\|Device\):/  &/p'
say "installed stock MPICH ($device) into $prefix"
