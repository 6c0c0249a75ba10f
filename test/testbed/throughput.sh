#!/bin/bash
# One bulk TCP flow (iperf3) across the WAN:
#  - WAN 100 Mbit/s, NIC 400 Mbit/s: the flow gets 85-102% of the WAN rate;
#  - the 1 ms trace's payload bytes a->b match iperf3's received bytes +- 2%,
#    and no 1 ms sample exceeds the WAN rate by more than one frame, also
#    when the emulator is not scheduled for a while: it is stopped for 20 ms
#    three times during the flow (longer than the 5 ms delay), as a loaded
#    machine may do, and the frames it then reads late are still counted at
#    their model delivery times;
#  - WAN 200 Mbit/s, NIC 50 Mbit/s: the node is capped at 85-102% of its NIC rate.
. "$(dirname "$0")/lib.sh"
tb_init ttput

# iperf3_run NODE DST SECONDS JSON: one TCP flow from NODE to DST's server
iperf3_run() {
    tb_exec "${DST_NODE}" iperf3 -s -1 -D -p 5201 >/dev/null 2>&1
    sleep 0.3
    timeout $(( $3 + 30 )) "$TESTBED" exec --name "$TB_NAME" "$1" -- \
        iperf3 -c "$2" -p 5201 -t "$3" -J > "$4" 2>/dev/null
}

json() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# --- WAN-limited flow ----------------------------------------------------------
wan=100000000
tb_up --clusters 2 --nodes 1 --nic-rate 400mbit --wan-rate 100mbit --delay 5ms --buffer 256KiB
DST_NODE=b0
tb_ping_times a0 "$(tb_ext_ip b0)" 1 0.1 >/dev/null
# stall_emulator: stop the emulator for 20 ms, three times, 1 s apart.
stall_emulator() {
    local pid i
    pid=$(cat "$(tb_state)/wan.pid")
    sleep 1.5
    for i in 1 2 3; do
        kill -STOP "$pid"; sleep 0.02; kill -CONT "$pid"
        sleep 1
    done
}
stall_emulator & stall=$!
if iperf3_run a0 "$(tb_ext_ip b0)" 6 "$TB_TMP/wan.json"; then
    wait "$stall"
    bps=$(json "$TB_TMP/wan.json" "d['end']['sum_received']['bits_per_second']")
    rbytes=$(json "$TB_TMP/wan.json" "d['end']['sum_received']['bytes']")
    pct=$(awk -v b="$bps" -v w="$wan" 'BEGIN { printf "%.1f", 100 * b / w }')
    info "iperf3 a0->b0: $(awk -v b="$bps" 'BEGIN { printf "%.1f", b / 1e6 }') Mbit/s received = $pct% of the 100 Mbit/s WAN"
    if fcmp "$pct" '>=' 85 && fcmp "$pct" '<=' 102; then
        pass "one TCP flow gets $pct% of the WAN rate (85-102%)"
    else
        fail "one TCP flow gets $pct% of the WAN rate (expected 85-102%)"
    fi
    # Let the last frames leave the emulator and the trace reach the disk.
    sleep 0.5
    csv=$(tb_state)/wan.csv
    read -r tbytes tpay maxrow rows step < <(awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { b += $col["bytes_a_b"]; p += $col["payload_a_b"]
          if ($col["bytes_a_b"] > m) m = $col["bytes_a_b"]; n++
          if (NR == 3) st = $1 - prev; prev = $1 }
        END { printf "%.0f %.0f %.0f %d %.6f\n", b, p, m, n, st }' "$csv")
    diff=$(awk -v a="$tpay" -v b="$rbytes" 'BEGIN { printf "%.2f", 100 * (a - b) / b }')
    info "trace: $rows rows of ${step}s, a->b frame bytes $tbytes, payload $tpay; iperf3 received $rbytes bytes ($diff%)"
    if awk -v s="$step" 'BEGIN { exit !(s > 0.000999 && s < 0.001001) }'; then
        pass "trace rows are 1 ms apart"
    else
        fail "trace rows are $step s apart (expected 0.001)"
    fi
    if fcmp "${diff#-}" '<=' 2; then
        pass "1 ms trace payload bytes a->b match iperf3's bytes within 2% ($diff%)"
    else
        fail "1 ms trace payload bytes a->b differ from iperf3's by $diff% (more than 2%)"
    fi
    late=$(awk -F'[ =]' 'NR == 1 { print $4 }' "$(tb_state)/wan.stats")
    info "emulator stopped 3 x 20 ms; counts that came after their row was written: $late"
    limit=$(( wan / 8 / 1000 + 1514 ))
    if (( maxrow <= limit )); then
        pass "no 1 ms sample exceeds the WAN rate (max $maxrow bytes/ms, limit $limit)"
    else
        fail "a 1 ms sample carries $maxrow bytes, more than rate x 1 ms + 1 frame ($limit)"
    fi
    /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && "$TB_SRCDIR/contrib/wanemu/icbc-wanemu-plot" \
        "$csv" -o "$TB_TMP/wan.png" --avg 10 >/dev/null 2>&1
    if [[ -n ${ICBC_TEST_KEEP:-} ]]; then cp "$csv" "$TB_TMP"/wan.png "$ICBC_TEST_KEEP"/ 2>/dev/null; fi
else
    fail "iperf3 across the WAN did not run"
fi

# --- NIC-limited flow --------------------------------------------------------
nic=50000000
tb_up --clusters 2 --nodes 1 --nic-rate 50mbit --wan-rate 200mbit --delay 5ms --buffer 256KiB
tb_ping_times a0 "$(tb_ext_ip b0)" 1 0.1 >/dev/null
if iperf3_run a0 "$(tb_ext_ip b0)" 5 "$TB_TMP/nic.json"; then
    bps=$(json "$TB_TMP/nic.json" "d['end']['sum_received']['bits_per_second']")
    pct=$(awk -v b="$bps" -v w="$nic" 'BEGIN { printf "%.1f", 100 * b / w }')
    info "iperf3 a0->b0: $(awk -v b="$bps" 'BEGIN { printf "%.1f", b / 1e6 }') Mbit/s = $pct% of the 50 Mbit/s NIC (WAN 200 Mbit/s)"
    if fcmp "$pct" '>=' 85 && fcmp "$pct" '<=' 102; then
        pass "a single node is capped at its NIC rate ($pct% of 50 Mbit/s)"
    else
        fail "a single node gets $pct% of its NIC rate (expected 85-102%)"
    fi
else
    fail "iperf3 with the NIC limit did not run"
fi
tb_finish
