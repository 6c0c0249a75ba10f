#!/bin/bash
# Benchmark of icbc-wanemu itself (not a test): the highest WAN rate it
# sustains with 10 ms one-way delay before its own CPU limits it, and the CPU
# it uses at each rate. For each WAN rate a two-cluster testbed (unshaped
# NICs, buffer = 2 x BDP) carries iperf3 TCP streams a0 -> b0 for a few
# seconds; we record the goodput, the emulator's CPU time (user + system,
# including the kernel forwarding it triggers), its delivery lateness and any
# frames the kernel dropped before the emulator could read them.
#
# Usage: benchmarks/wanemu/run.sh [RATE_MBIT...]   (as root)
# Environment: ICBC_WANEMU / ICBC_BUILD_DIR as for test/testbed; SECONDS_PER_RATE
# (default 5); STREAMS (iperf3 -P, default 4); OUT (default benchmarks/wanemu/results).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
. "$src/test/testbed/lib.sh"
out=${OUT:-$here/results}
secs=${SECONDS_PER_RATE:-5}
streams=${STREAMS:-4}
rates=("$@")
(( ${#rates[@]} )) || rates=(100 200 400 600 800 1000 1500 2000 3000)
delay_ms=10

(( EUID == 0 )) || { echo "run as root" >&2; exit 1; }
tb_find_wanemu || exit 1
TB_NAME=bnwan
TB_TMP=$(mktemp -d)
trap tb_cleanup EXIT
mkdir -p "$out"
csv=$out/wanemu_bench.csv
echo "rate_mbit,delay_ms,buffer_bytes,streams,goodput_mbit,pct_of_rate,emu_cpu_pct,late_avg_us,late_max_us,wan_drops,kernel_drops,loadavg" > "$csv"

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
stat_of() { awk -v d=a_b -v k="$1" '$1 == "dir" && $2 == d { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$(tb_state)/wan.stats"; }
port_of() { awk -v p=a -v k="$1" '$1 == "port" && $2 == p { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$(tb_state)/wan.stats"; }

echo "icbc-wanemu benchmark: delay ${delay_ms} ms, $streams TCP streams, ${secs} s per rate; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%10s %12s %8s %9s %12s %12s %8s\n" "rate" "goodput" "of rate" "emu CPU" "late avg" "late max" "kdrops"
for r in "${rates[@]}"; do
    buf=$(( r * 1000000 / 8 * 2 * delay_ms * 2 / 1000 ))    # 2 x bandwidth-delay product
    (( buf < 262144 )) && buf=262144
    tb_up --clusters 2 --nodes 1 --routers 1 --nic-rate 0 --wan-rate "${r}mbit" --delay "${delay_ms}ms" --buffer "$buf"
    dst=$(tb_ext_ip b0)
    tb_ping_times a0 "$dst" 1 0.1 >/dev/null
    tb_exec b0 iperf3 -s -1 -D -p 5301 >/dev/null 2>&1
    sleep 0.3
    pid=$(cat "$(tb_state)/wan.pid")
    c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
    timeout $((secs + 30)) "$TESTBED" exec --name "$TB_NAME" a0 -- \
        iperf3 -c "$dst" -p 5301 -P "$streams" -t "$secs" -J > "$TB_TMP/r.json" 2>/dev/null
    c1=$(cpu_ticks "$pid"); t1=$(date +%s.%N)
    sleep 0.3
    good=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6)' "$TB_TMP/r.json" 2>/dev/null || echo 0)
    cpu=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" -v hz="$ticks" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / (t1 - t0) }')
    pct=$(awk -v g="$good" -v r="$r" 'BEGIN { printf "%.1f", 100 * g / r }')
    la=$(stat_of late_avg_us); lm=$(stat_of late_max_us); dr=$(stat_of drops); kd=$(port_of kernel_drops)
    load=$(cut -d' ' -f1 /proc/loadavg)
    printf "%7s Mb %9.1f Mb %7s%% %8s%% %9s us %9s us %8s\n" "$r" "$good" "$pct" "$cpu" "$la" "$lm" "$kd"
    echo "$r,$delay_ms,$buf,$streams,$good,$pct,$cpu,$la,$lm,$dr,$kd,$load" >> "$csv"
    if (( r == 400 )); then
        cp "$(tb_state)/wan.csv" "$TB_TMP/trace400.csv"
        "$src/contrib/wanemu/icbc-wanemu-plot" "$TB_TMP/trace400.csv" -o "$out/trace_400mbit_10ms.png" \
            --avg 1 --title "icbc-wanemu, 400 Mbit/s WAN, 10 ms delay, $streams TCP streams (1 ms samples)" >/dev/null
    fi
    "$TESTBED" down --name "$TB_NAME" >/dev/null
done
/usr/bin/python3 "$here/plot.py" "$csv" "$out/wanemu_bench.png"
echo "results: $csv $out/wanemu_bench.png $out/trace_400mbit_10ms.png"
