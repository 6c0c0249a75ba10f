#!/bin/bash
# RTT between nodes of two clusters = 2 x delay +- 10%, for delays 1, 5 and 10 ms.
# The median of 40 pings is compared (a single ping can meet a busy CPU).
. "$(dirname "$0")/lib.sh"
tb_init ttrtt

for d in 1 5 10; do
    tb_up --clusters 2 --nodes 1 --routers 1 --nic-rate 100mbit --wan-rate 400mbit \
        --delay "${d}ms" --buffer 256KiB
    dst=$(tb_ext_ip b0)
    tb_ping_times a0 "$dst" 2 0.1 >/dev/null      # ARP and caches warm
    times=$(tb_ping_times a0 "$dst" 40 0.025)
    n=$(echo "$times" | grep -c .)
    med=$(echo "$times" | median)
    lo=$(awk -v d="$d" 'BEGIN { print 2 * d * 0.9 }')
    hi=$(awk -v d="$d" 'BEGIN { print 2 * d * 1.1 }')
    info "delay ${d}ms: $n replies, RTT min/median/max $(echo "$times" | sort -g | head -1)/$med/$(echo "$times" | sort -g | tail -1) ms, expected $lo..$hi"
    if (( n >= 35 )) && fcmp "$med" '>=' "$lo" && fcmp "$med" '<=' "$hi"; then
        pass "RTT a0->b0 with delay ${d}ms is $med ms (2 x delay +- 10%)"
    else
        fail "RTT a0->b0 with delay ${d}ms is $med ms from $n replies (expected $lo..$hi)"
    fi
done
tb_finish
