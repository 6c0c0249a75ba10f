#!/bin/sh
# Point-to-point latency and bandwidth, two installs side by side (benchmarks/p2p/p2p.py; --help).
exec /usr/bin/python3 "$(dirname "$0")/p2p.py" "$@"
