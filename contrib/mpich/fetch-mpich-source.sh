#!/bin/sh
# Print the path of an MPICH 4.0.2 source tarball, fetching Debian bookworm's
# source package (orig tarball only) into the cache directory when needed.
#   fetch-mpich-source.sh [CACHE_DIR]      (default: <repo>/_cache)
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${1:-$top/_cache}
tarball=$cache/mpich_4.0.2.orig.tar.xz
if [ ! -s "$tarball" ]; then
    mkdir -p "$cache"
    if ! grep -qs '^Types:.*deb-src' /etc/apt/sources.list.d/debian.sources \
        && ! grep -qs '^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/*.list; then
        echo "fetch-mpich-source: enabling deb-src for apt" >&2
        if [ -f /etc/apt/sources.list.d/debian.sources ]; then
            sed -i 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources
        else
            sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/icbc-src.list
        fi
        apt-get update -q >&2
    fi
    (cd "$cache" && apt-get source --download-only -q mpich=4.0.2-3 >&2) \
        || (cd "$cache" && apt-get source --download-only -q mpich >&2)
    [ -s "$tarball" ] || { echo "fetch-mpich-source: no MPICH 4.0.2 orig tarball in $cache" >&2; exit 1; }
fi
echo "$tarball"
