#!/bin/bash
# Argument handling of icbc-testbed: accepted spellings, clear errors for
# malformed values, non-root use and name collisions; idempotent up.
. "$(dirname "$0")/lib.sh"
tb_init ttargs

# rejects DESC PATTERN ARGS...: the command fails and stderr matches PATTERN
rejects() {
    local what=$1 pat=$2 err rc; shift 2
    err=$(timeout 30 "$@" 2>&1 >/dev/null); rc=$?
    if (( rc != 0 )) && grep -qiE -e "$pat" <<< "$err"; then
        pass "$what: $(head -1 <<< "$err")"
    else
        fail "$what: exit $rc, stderr '$err' (expected failure matching '$pat')"
    fi
}

dry=("$TESTBED" up --dry-run --name "$TB_NAME")

# Accepted spellings, in canonical form.
check "rates 100mbit / 400Mbit / 1gbit are accepted and converted" \
    bash -c "'$TESTBED' up --dry-run --clusters 2 --nodes 1 --nic-rate 100mbit --wan-rate 400Mbit | grep -q 'nic_bps=100000000 wan_bps=400000000' &&
             '$TESTBED' up --dry-run --clusters 2 --nodes 1 --wan-rate 1gbit | grep -q 'wan_bps=1000000000'"
check "delays 5ms / 0ms / 250us are accepted" \
    bash -c "'$TESTBED' up --dry-run --clusters 2 --nodes 1 --delay 5ms | grep -q 'delay_us=5000' &&
             '$TESTBED' up --dry-run --clusters 2 --nodes 1 --delay 0ms | grep -q 'delay_us=0' &&
             '$TESTBED' up --dry-run --clusters 2 --nodes 1 --delay 250us | grep -q 'delay_us=250 '"
check "sizes 256KiB / 1MiB are accepted" \
    bash -c "'$TESTBED' up --dry-run --clusters 2 --nodes 1 --buffer 256KiB | grep -q 'buffer_bytes=262144' &&
             '$TESTBED' up --dry-run --clusters 2 --nodes 1 --buffer 1MiB | grep -q 'buffer_bytes=1048576'"
check "--nic-queue is 10ms by default, 240ms is accepted" \
    bash -c "'$TESTBED' up --dry-run --clusters 2 --nodes 1 | grep -q 'nic_queue_us=10000 ' &&
             '$TESTBED' up --dry-run --clusters 2 --nodes 1 --nic-queue 240ms | grep -q 'nic_queue_us=240000 '"
check "--nic-rate 0 means unshaped" bash -c "'$TESTBED' up --dry-run --clusters 1 --nodes 2 --nic-rate 0 | grep -q 'nic_bps=0'"

# Malformed values.
rejects "malformed --nic-rate 100mbits" "malformed --nic-rate" "${dry[@]}" --clusters 2 --nodes 1 --nic-rate 100mbits
rejects "malformed --wan-rate fast" "malformed --wan-rate" "${dry[@]}" --clusters 2 --nodes 1 --wan-rate fast
rejects "bare --wan-rate 400 (no unit)" "malformed --wan-rate" "${dry[@]}" --clusters 2 --nodes 1 --wan-rate 400
rejects "negative --nic-rate" "malformed --nic-rate" "${dry[@]}" --clusters 2 --nodes 1 --nic-rate -5mbit
rejects "malformed --delay 5" "malformed --delay" "${dry[@]}" --clusters 2 --nodes 1 --delay 5
rejects "malformed --nic-queue deep" "malformed --nic-queue 'deep'" "${dry[@]}" --clusters 2 --nodes 1 --nic-queue deep
rejects "--nic-queue 0 (every frame dropped)" "--nic-queue must be from 1ms to 10s" "${dry[@]}" --clusters 2 --nodes 1 --nic-queue 0
rejects "malformed --delay 5sec" "malformed --delay" "${dry[@]}" --clusters 2 --nodes 1 --delay 5sec
rejects "malformed --buffer 1XiB" "malformed --buffer" "${dry[@]}" --clusters 2 --nodes 1 --buffer 1XiB
rejects "malformed --buffer big" "malformed --buffer" "${dry[@]}" --clusters 2 --nodes 1 --buffer big
rejects "--clusters 0" "--clusters must be" "${dry[@]}" --clusters 0 --nodes 1
rejects "--nodes missing" "--nodes must be" "${dry[@]}" --clusters 2
rejects "--routers above --nodes" "--routers must be" "${dry[@]}" --clusters 2 --nodes 2 --routers 3
rejects "--private names an unknown cluster" "no cluster 'c'" "${dry[@]}" --clusters 2 --nodes 2 --private c
rejects "--fabric-api names an unknown cluster" "no cluster 'c'" "${dry[@]}" --clusters 2 --nodes 2 --fabric-api c=ofi
rejects "--fabric-api with an unknown API" "malformed --fabric-api" "${dry[@]}" --clusters 2 --nodes 2 --fabric-api b=verbs
rejects "--fabric-api names a cluster twice" "named twice" "${dry[@]}" --clusters 2 --nodes 2 --fabric-api b=ofi,b=ucx
check "--fabric-api b=ofi,a=ucx is accepted in canonical order" \
    bash -c "'$TESTBED' up --dry-run --clusters 2 --nodes 1 --fabric-api b=ofi,a=ucx | grep -q 'fabric_api=a=ucx,b=ofi'"
rejects "malformed --tcp-cc" "malformed --tcp-cc" "${dry[@]}" --clusters 1 --nodes 1 --tcp-cc 'cu bic'
check "--tcp-cc cubic is in the canonical arguments" \
    bash -c "'$TESTBED' up --dry-run --clusters 1 --nodes 1 --tcp-cc cubic | grep -q 'tcp_cc=cubic'"
rejects "invalid testbed name" "invalid testbed name" "$TESTBED" up --dry-run --name 'Tb!' --clusters 1 --nodes 1
rejects "testbed name too long" "invalid testbed name" "$TESTBED" up --dry-run --name abcdefghij --clusters 1 --nodes 1
rejects "unknown option" "unknown argument" "${dry[@]}" --clusters 1 --nodes 1 --colour blue
rejects "unknown command" "unknown command" "$TESTBED" launch
rejects "not root" "must be run as root" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$TESTBED" up --name "$TB_NAME" --clusters 1 --nodes 2

# Idempotent up, collisions.
tb_up --clusters 1 --nodes 2
n1=$(ip netns list | grep -c "^$TB_NAME-")
check "up with the same arguments again succeeds" \
    quiet timeout 60 "$TESTBED" up --name "$TB_NAME" --clusters 1 --nodes 2
n2=$(ip netns list | grep -c "^$TB_NAME-")
check "up again creates no duplicates ($n1 namespaces before, $n2 after)" test "$n1" = "$n2"
check "up again keeps the mgmt bridge single" test "$(ip -o link show | grep -c " $TB_NAME-mgmt:")" = 1
rejects "up with different arguments under the same name" "already exists with different arguments" \
    "$TESTBED" up --name "$TB_NAME" --clusters 1 --nodes 3
"$TESTBED" down --name "$TB_NAME" >/dev/null

# --tcp-cc: every node's namespace gets it (reno: neither this host's default
# nor a new namespace's)
tb_up --clusters 1 --nodes 2 --tcp-cc reno
check "--tcp-cc reno is every node's congestion control" \
    bash -c "for n in a0 a1; do '$TESTBED' exec --name '$TB_NAME' \$n -- sysctl -n net.ipv4.tcp_congestion_control | grep -qx reno || exit 1; done"
"$TESTBED" down --name "$TB_NAME" >/dev/null
ip netns add "ttcoll-a0"
rejects "name collision with a foreign namespace" "exists but is not part of a testbed" \
    "$TESTBED" up --name ttcoll --clusters 1 --nodes 2
check "the foreign namespace survives" test -e /run/netns/ttcoll-a0
check "nothing else of the refused testbed was created" \
    test "$(ip netns list | grep -c '^ttcoll-')" = 1 -a ! -e /run/icbc-testbed/ttcoll/created
ip netns del ttcoll-a0
rejects "exec on a testbed that is not up" "does not exist" "$TESTBED" exec --name ttnone a0 -- true
tb_finish
