#!/bin/bash
# Which addresses of every other node answer, from every node, against the
# topology: fabric addresses inside a cluster only, external addresses
# between nodes that have an external NIC (across the WAN too), management
# addresses never (mgmt0 carries launch traffic to the launching host only),
# and nothing at all from a private cluster's compute node beyond its fabric.
. "$(dirname "$0")/lib.sh"
tb_init ttrch

tb_up --clusters 2 --nodes 3 --routers 1 --nic-rate 100mbit --wan-rate 200mbit --delay 1ms \
    --buffer 128KiB --private b
nodes=$(tb_state)/nodes
# the launching host: the management bridge's own address in the root namespace
gw=$(ip -4 -o addr show dev "$TB_NAME-mgmt" | awk '{ sub(/\/.*/, "", $4); print $4 }')

# node cluster role fab0 ext0 mgmt0
mapfile -t rows < <(grep -v '^#' "$nodes")
out=$TB_TMP/reach
mkdir -p "$out"
# Every probe at once: an unanswered one costs its 1 s wait, not the sum.
for src in "${rows[@]}"; do
    read -r s sc _ _ sext _ <<< "$src"
    for dst in "${rows[@]}"; do
        read -r d dc _ dfab dext dmgmt <<< "$dst"
        [[ $s == "$d" ]] && continue
        for kind in fab ext mgmt; do
            case $kind in fab) a=$dfab ;; ext) a=$dext ;; mgmt) a=$dmgmt ;; esac
            [[ $a == - ]] && continue
            case $kind in
                fab) want=$([[ $sc == "$dc" ]] && echo yes || echo no) ;;
                ext) want=$([[ $sext != - ]] && echo yes || echo no) ;;
                mgmt) want=no ;;
            esac
            ( if tb_exec "$s" ping -n -c 2 -i 0.2 -W 1 "$a" >/dev/null 2>&1; then got=yes; else got=no; fi
              echo "$s $d $kind $a $want $got" > "$out/$s-$d-$kind" ) &
        done
    done
    ( if tb_exec "$s" ping -n -c 2 -i 0.2 -W 1 "$gw" >/dev/null 2>&1; then got=yes; else got=no; fi
      echo "$s launch-host mgmt $gw yes $got" > "$out/$s-launch" ) &
done
wait

probes=0 wrong=0 answered=0
while read -r s d kind a want got; do
    probes=$((probes + 1))
    [[ $got == yes ]] && answered=$((answered + 1))
    if [[ $want != "$got" ]]; then
        wrong=$((wrong + 1))
        fail "$s -> $d $kind $a: expected $([[ $want == yes ]] && echo an answer || echo silence), got $([[ $got == yes ]] && echo an answer || echo silence)"
    fi
done < <(cat "$out"/*)
info "$probes probes, $answered answered"
# Both outcomes must occur, or the probes could not tell the topology apart.
check "reachability: $probes probes, every one as the topology allows" test "$wrong" = 0
check "reachability: some probes answered and some did not ($answered of $probes)" \
    test "$answered" -gt 0 -a "$answered" -lt "$probes"
check "reachability: all $(( ${#rows[@]} )) nodes reach the launching host ($gw)" \
    test "$(cat "$out"/*-launch | awk '$6 == "yes"' | wc -l)" = "${#rows[@]}"
tb_finish
