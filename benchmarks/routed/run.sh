#!/bin/sh
# Inter-cluster benchmarks of MPICH+icbc (benchmarks/routed/routed.py; --help).
exec /usr/bin/python3 "$(dirname "$0")/routed.py" "$@"
