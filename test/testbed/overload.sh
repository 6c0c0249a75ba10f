#!/bin/bash
# More offered load than the WAN rate: a 120 Mbit/s UDP flow into a 50 Mbit/s
# WAN with a 64 KiB buffer. The emulator counts drops, its queue never holds
# more than the buffer, and pings crossing the same bottleneck meanwhile see
# a queueing delay (RTT under load - idle RTT) of at most buffer / rate + 10%.
# The delay is read at the 95th percentile: the slowest replies also carry the
# host's scheduling of the flow, the emulator and ping on two shared cores, which
# the emulator's queue (bounded exactly by qmax below) does not cause.
. "$(dirname "$0")/lib.sh"
tb_init ttovl

rate=50000000 buffer=65536 delay_ms=2
tb_up --clusters 2 --nodes 2 --routers 1 --nic-rate 200mbit --wan-rate 50mbit \
    --delay ${delay_ms}ms --buffer 64KiB
bound_ms=$(awk -v b=$buffer -v r=$rate 'BEGIN { printf "%.3f", b * 8 / r * 1000 }')
tb_ping_times a1 "$(tb_ext_ip b1)" 2 0.1 >/dev/null
tb_ping_times a0 "$(tb_ext_ip b0)" 1 0.1 >/dev/null
base=$(tb_ping_times a1 "$(tb_ext_ip b1)" 20 0.02 | median)

tb_exec b0 iperf3 -s -1 -D -p 5202 >/dev/null 2>&1
sleep 0.3
timeout 40 "$TESTBED" exec --name "$TB_NAME" a0 -- \
    iperf3 -u -b 120M -l 1400 -c "$(tb_ext_ip b0)" -p 5202 -t 5 -J > "$TB_TMP/udp.json" 2>/dev/null &
ipid=$!
sleep 1.5          # the queue fills at once; leave iperf3's start-up out
times=$(tb_ping_times a1 "$(tb_ext_ip b1)" 150 0.02)
wait $ipid
sleep 0.3

n=$(echo "$times" | grep -c .)
max=$(echo "$times" | sort -g | tail -1)
p95=$(echo "$times" | sort -g | awk '{ v[NR] = $1 } END { i = int(NR * 0.95); if (i < 1) i = 1; print v[i] }')
med=$(echo "$times" | median)
qd=$(awk -v p="$p95" -v b="$base" 'BEGIN { printf "%.3f", p - b }')
lim=$(awk -v b="$bound_ms" 'BEGIN { printf "%.3f", b * 1.1 }')
drops=$(tb_stat a_b drops)
qmax=$(tb_stat a_b qmax)
info "idle RTT $base ms; under load $n replies, median $med ms, 95th percentile $p95 ms, max $max ms; queueing delay $qd ms (bound $bound_ms ms + 10% = $lim)"
info "emulator a->b: drops $drops, largest backlog $qmax bytes (buffer $buffer)"

if [[ -n $drops ]] && (( drops > 100 )); then
    pass "overload: the emulator counted $drops drops a->b"
else
    fail "overload: drops a->b = '${drops}' (expected many)"
fi
if [[ -n $qmax ]] && (( qmax <= buffer && qmax > buffer / 2 )); then
    pass "bottleneck queue filled up to the buffer and no further ($qmax <= $buffer bytes)"
else
    fail "bottleneck queue peak $qmax bytes (expected between buffer/2 and $buffer)"
fi
if (( n >= 100 )) && fcmp "$med" '>' "$(awk -v b="$base" -v q="$bound_ms" 'BEGIN { print b + q / 2 }')"; then
    pass "pings through the loaded bottleneck are queued (median $med ms vs idle $base ms)"
else
    fail "pings under load: $n replies, median $med ms, idle $base ms (expected queueing)"
fi
if (( n >= 100 )) && fcmp "$qd" '<=' "$lim"; then
    pass "queueing delay (95th percentile - idle) $qd ms <= buffer/rate + 10% ($lim ms)"
else
    fail "queueing delay $qd ms exceeds buffer/rate + 10% ($lim ms) or too few replies ($n)"
fi
tb_finish
