#!/bin/bash
# A --private cluster: its non-router nodes have no external NIC and cannot
# reach the other cluster; its router nodes can; inside the cluster the
# fabric works; the router file lists the routers' addresses and the fabric
# API given for cluster b (--fabric-api) in b's section alone.
. "$(dirname "$0")/lib.sh"
tb_init ttprv

tb_up --clusters 2 --nodes 3 --routers 1 --nic-rate 100mbit --wan-rate 200mbit --delay 1ms \
    --buffer 128KiB --private b --fabric-api b=ofi
a0=$(tb_ext_ip a0)

reach() { tb_exec "$1" ping -n -c 2 -i 0.2 -W 1 "$2" >/dev/null 2>&1; }
unreach() { ! reach "$@"; }
no_ext0() { ! tb_exec "$1" ip link show ext0 >/dev/null 2>&1; }

check "private cluster: compute node b1 has no ext0" no_ext0 b1
check "private cluster: nodes file shows no external address for b2" \
    test "$(awk '$1 == "b2" { print $5 }' "$(tb_state)/nodes")" = "-"
check "private cluster: compute node b1 cannot reach a0 ($a0)" unreach b1 "$a0"
check "private cluster: compute node b2 cannot reach a0's fabric address" \
    unreach b2 "$(tb_fab_ip a0)"
check "private cluster: router b0 reaches a0 across the WAN" reach b0 "$a0"
check "public cluster: a0 reaches router b0" reach a0 "$(tb_ext_ip b0)"
check "public cluster: a1 cannot reach private b1's fabric address" \
    unreach a1 "$(tb_fab_ip b1)"
check "private cluster: b1 reaches its router b0 over the fabric" reach b1 "$(tb_fab_ip b0)"
check "router file: one router line per cluster with fabric and wan addresses" \
    grep -qx "    router b0 fabric=$(tb_fab_ip b0):7100 wan=$(tb_ext_ip b0):7200" "$(tb_state)/routers.conf"
section_api() {  # the fabric-api lines of cluster $1's section
    awk -v c="$1" '$1 == "cluster" { in_c = ($2 == c) } in_c && $1 == "fabric-api" { print $2 }' \
        "$(tb_state)/routers.conf"
}
check "router file: 'fabric-api ofi' in cluster b's section" test "$(section_api b)" = ofi
check "router file: no fabric-api line in cluster a's section" test -z "$(section_api a)"
tb_finish
