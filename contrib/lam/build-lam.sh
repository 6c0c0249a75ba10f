#!/bin/bash
# Build LAM/MPI 7.1.4 with IMPI support: the foreign MPI that ICBC's IMPI
# path is tested against (docs/impi.md, "LAM/MPI 7.1.4 as it behaves").
#
#   contrib/lam/build-lam.sh [--builddir DIR] [--prefix DIR] [--jobs N]
#
# Debian's source package `lam` (apt-get source, deb-src enabled when
# missing; its orig tarball alone when the Debian part cannot be fetched),
# built 32-bit: LAM's 64-bit build fails inside MPI_Init on
# `mpirun -client` runs, the 32-bit one is a working IMPI client. No source
# edits; C++ sources that predate today's headers get them with -include.
# Steps (each skipped when done): packages (gcc-multilib g++-multilib),
# source, configure (--with-impi --with-rpi=tcp; no Fortran, ROMIO, C++ bindings or
# TotalView support, none of which the IMPI tests use),
# make, install. Logs: BUILDDIR/logs/<step>.log. Prints the prefix at the end;
# `PREFIX/bin/laminfo` then lists IMPI support and the impi coll module.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
builddir=$top/_build/lam
prefix=
jobs=2

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --builddir) builddir=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-lam: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
mkdir -p "$builddir/logs"
builddir=$(cd "$builddir" && pwd)
prefix=${prefix:-$builddir/install}
logs=$builddir/logs

step() { printf '[build-lam %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run_logged() { # name command...
    local name=$1; shift
    if ! "$@" > "$logs/$name.log" 2>&1; then
        tail -n 30 "$logs/$name.log" >&2
        echo "build-lam: $name failed (log: $logs/$name.log)" >&2
        exit 1
    fi
}

# laminfo's whole output first: grep -q would end the pipe early (pipefail)
has_impi() { local out; out=$("$prefix/bin/laminfo" 2>/dev/null) && grep -q 'IMPI support: yes' <<< "$out"; }

if [ -x "$prefix/bin/laminfo" ] && has_impi; then
    step "LAM/MPI with IMPI support is installed in $prefix"
    echo "$prefix"
    exit 0
fi

missing=
for p in gcc-multilib g++-multilib dpkg-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    step "packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    run_logged apt-update apt-get update -q
    # shellcheck disable=SC2086
    run_logged apt-install apt-get install -y -q --no-install-recommends $missing
fi

src=$(find "$builddir" -maxdepth 1 -type d -name 'lam-7.1.4*' | head -n 1)
if [ -z "$src" ]; then
    step "source: apt-get source lam (in $builddir)"
    if ! apt-cache showsrc lam > /dev/null 2>&1 || [ -z "$(apt-cache showsrc lam 2>/dev/null)" ]; then
        run_logged deb-src sed -i 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources
        run_logged apt-update apt-get update -q
    fi
    # the orig tarball alone will do when the Debian part cannot be fetched
    (cd "$builddir" && apt-get source -q lam > "$logs/source.log" 2>&1) || true
    src=$(find "$builddir" -maxdepth 1 -type d -name 'lam-7.1.4*' | head -n 1)
    if [ -z "$src" ] && [ -f "$builddir/lam_7.1.4.orig.tar.gz" ]; then
        step "source: Debian's part not fetched; the orig tarball (log: $logs/source.log)"
        (cd "$builddir" && run_logged untar tar xzf lam_7.1.4.orig.tar.gz)
    fi
    src=$(find "$builddir" -maxdepth 1 -type d -name 'lam-7.1.4*' | head -n 1)
    [ -n "$src" ] || { echo "build-lam: no lam-7.1.4 directory after apt-get source" >&2; exit 1; }
fi

if [ ! -f "$src/config.status" ]; then
    step "configure (32-bit, IMPI, TCP RPI; log: $logs/configure.log)"
    (cd "$src" && run_logged configure env CC="gcc -m32" CXX="g++ -m32" CFLAGS="-O2 -m32" \
        CXXFLAGS="-O2 -m32 -include cstring -include cstdlib -include climits" LDFLAGS=-m32 \
        ./configure --prefix="$prefix" --with-impi --without-fc --without-romio --with-rpi=tcp \
        --without-mpi2cpp --disable-tv --disable-dependency-tracking)
fi
step "make -j$jobs (log: $logs/make.log)"
(cd "$src" && run_logged make make -j"$jobs")
step "install into $prefix (log: $logs/install.log)"
(cd "$src" && run_logged install make install)
if ! has_impi; then
    echo "build-lam: $prefix/bin/laminfo does not report IMPI support" >&2
    exit 1
fi
step "LAM/MPI 7.1.4 with IMPI support: $prefix"
echo "$prefix"
