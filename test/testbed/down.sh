#!/bin/bash
# `down` removes exactly what `up` created: namespaces, root-side links and
# bridges, the emulator and processes left in the nodes -- also after an up
# that failed half-way or was killed -- and leaves other namespaces alone.
. "$(dirname "$0")/lib.sh"
tb_init ttdown

# leftovers NAME: print every trace of testbed NAME still on the host
leftovers() {
    local n=$1
    ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$n-" | grep -v "^$n-keep$" | sed 's/^/netns /'
    ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' | grep "^$n-" | sed 's/^/link /'
    pgrep -af "icbc-testbed/$n/" | sed 's/^/process /'
    [[ -e /run/icbc-testbed/$n ]] && echo "state /run/icbc-testbed/$n"
    true
}

# 1. A full testbed with traffic and stray processes inside the nodes.
ip netns add ttdown-keep 2>/dev/null   # not ours: down must not touch it
tb_up --clusters 2 --nodes 2 --routers 1 --nic-rate 100mbit --wan-rate 200mbit --delay 2ms
# gone PID: the process has exited (a zombie waiting for init counts as gone)
gone() { [[ ! -e /proc/$1/stat ]] || [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]]; }

tb_exec a1 sleep 300 >/dev/null 2>&1 &
tb_exec b0 iperf3 -s -D >/dev/null 2>&1
tb_ping_times a0 "$(tb_ext_ip b1)" 2 0.1 >/dev/null
sleep 0.3
wpid=$(cat "$(tb_state)/wan.pid")
npids=$( (ip netns pids "$TB_NAME-a1"; ip netns pids "$TB_NAME-b0") | tr '\n' ' ')
check "emulator runs before down" test -d "/proc/$wpid"
check "processes run inside nodes before down ($npids)" test -n "${npids// }"
check "down succeeds" quiet timeout 60 "$TESTBED" down --name "$TB_NAME"
left=$(leftovers "$TB_NAME")
if [[ -z $left ]]; then pass "nothing of the testbed is left after down"; else fail "left after down: $(echo $left)"; fi
check "emulator process is gone" gone "$wpid"
alive=''
for p in $npids; do gone "$p" || alive="$alive $p"; done
check "processes started inside the nodes are gone" test -z "$alive"
check "a foreign namespace with the same prefix was left alone" test -e /run/netns/ttdown-keep
ip netns del ttdown-keep 2>/dev/null
check "down of a testbed that is not up succeeds" quiet timeout 30 "$TESTBED" down --name "$TB_NAME"

# 2. An up that fails half-way (the emulator cannot start) cleans up itself.
if ICBC_WANEMU=/bin/false timeout 60 "$TESTBED" up --name "$TB_NAME" --clusters 2 --nodes 2 \
    >/dev/null 2>"$TB_TMP/fail.err"; then
    fail "up with a broken emulator should fail"
else
    pass "up with a broken emulator fails: $(grep -m1 error "$TB_TMP/fail.err")"
fi
left=$(leftovers "$TB_NAME")
if [[ -z $left ]]; then pass "a failed up leaves nothing behind"; else fail "left after failed up: $(echo $left)"; fi

# 3. An up killed half-way: down removes what it had created.
"$TESTBED" up --name "$TB_NAME" --clusters 2 --nodes 8 --nic-rate 50mbit >/dev/null 2>&1 &
upid=$!
for i in $(seq 200); do
    [[ $(ip netns list | grep -c "^$TB_NAME-") -ge 4 ]] && break
    sleep 0.05
done
{ kill -KILL $upid; wait $upid; } 2>/dev/null
check "up was killed before it finished" test ! -e "/run/icbc-testbed/$TB_NAME/complete"
info "killed up with $(ip netns list | grep -c "^$TB_NAME-") namespaces created"
check "down after a killed up succeeds" quiet timeout 60 "$TESTBED" down --name "$TB_NAME"
left=$(leftovers "$TB_NAME")
if [[ -z $left ]]; then pass "down after a killed up leaves nothing behind"; else fail "left after killed up + down: $(echo $left)"; fi

# 4. ... and the same up works afterwards.
tb_up --clusters 2 --nodes 2 --nic-rate 50mbit
check "up after the partial one works (a0 reaches b1)" quiet tb_exec a0 ping -c 1 -W 2 "$(tb_ext_ip b1)"
check "final down succeeds" quiet timeout 60 "$TESTBED" down --name "$TB_NAME"
left=$(leftovers "$TB_NAME")
if [[ -z $left ]]; then pass "nothing left at the end"; else fail "left at the end: $(echo $left)"; fi
tb_finish
