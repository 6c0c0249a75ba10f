# Common helpers of the testbed tests (sourced). Each test script:
#   . "$(dirname "$0")/lib.sh"; tb_init NAME; ...checks...; tb_finish
# Checks print "PASS: ..." or "FAIL: ..." lines; tb_finish exits non-zero
# when any check failed. The testbed NAME is removed on exit (trap).
#
# Finds icbc-testbed in the source tree (or $ICBC_TESTBED_BIN) and icbc-wanemu
# in $ICBC_WANEMU, $ICBC_BUILD_DIR, PATH, or builds it from the sources.

TB_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TESTBED=${ICBC_TESTBED_BIN:-$TB_SRCDIR/contrib/testbed/icbc-testbed}
TB_PASS=0
TB_FAIL=0
TB_NAME=
TB_TMP=

pass() { echo "PASS: $*"; TB_PASS=$((TB_PASS + 1)); }
fail() { echo "FAIL: $*"; TB_FAIL=$((TB_FAIL + 1)); }
info() { echo "  $*"; }
quiet() { "$@" >/dev/null 2>&1; }

# check DESCRIPTION CMD...: PASS when CMD succeeds
check() {
    local what=$1; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

tb_find_wanemu() {
    local d
    if [[ -n ${ICBC_WANEMU:-} ]]; then
        [[ -x $ICBC_WANEMU ]] && return 0
        echo "ICBC_WANEMU=$ICBC_WANEMU is not executable" >&2; return 1
    fi
    for d in ${ICBC_BUILD_DIR:-} "$TB_SRCDIR"; do
        if [[ -n $d && -x $d/icbc-wanemu ]]; then export ICBC_WANEMU=$d/icbc-wanemu; return 0; fi
    done
    if command -v icbc-wanemu >/dev/null 2>&1; then
        export ICBC_WANEMU=$(command -v icbc-wanemu); return 0
    fi
    # Last resort: compile it (the same sources the build uses).
    d=${TMPDIR:-/tmp}/icbc-wanemu-build.$UID
    mkdir -p "$d"
    if cc -O2 -Wall -I"$TB_SRCDIR/src/icbc" -o "$d/icbc-wanemu" \
        "$TB_SRCDIR"/contrib/wanemu/{units,frame,link,port,trace,main}.c \
        "$TB_SRCDIR"/src/icbc/{log,status}.c -lm; then
        export ICBC_WANEMU=$d/icbc-wanemu; return 0
    fi
    echo "cannot find or build icbc-wanemu" >&2
    return 1
}

tb_cleanup() {
    if [[ -n $TB_NAME ]]; then
        "$TESTBED" down --name "$TB_NAME" >/dev/null 2>&1
    fi
    [[ -n $TB_TMP ]] && rm -rf "$TB_TMP"
}

tb_init() {
    TB_NAME=$1
    if (( EUID != 0 )); then
        echo "FAIL: $TB_NAME: the testbed tests need root"; exit 1
    fi
    tb_find_wanemu || { echo "FAIL: $TB_NAME: no icbc-wanemu"; exit 1; }
    TB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/icbc-tb-$TB_NAME.XXXXXX")
    trap tb_cleanup EXIT
    trap 'exit 130' INT TERM
    # A leftover from an interrupted earlier run of this test.
    "$TESTBED" down --name "$TB_NAME" >/dev/null 2>&1
}

tb_finish() {
    echo "$TB_NAME: $TB_PASS passed, $TB_FAIL failed"
    (( TB_FAIL == 0 ))
}

# tb_up ARGS...: bring up testbed $TB_NAME; FAIL and exit when it does not come up
tb_up() {
    local out
    "$TESTBED" down --name "$TB_NAME" >/dev/null 2>&1
    if ! out=$(timeout 120 "$TESTBED" up --name "$TB_NAME" "$@" 2>&1); then
        fail "up --name $TB_NAME $*"
        echo "$out" | sed 's/^/    /'
        tb_finish; exit 1
    fi
}

tb_exec() { local n=$1; shift; timeout 60 "$TESTBED" exec --name "$TB_NAME" "$n" -- "$@"; }

tb_state() { echo "/run/icbc-testbed/$TB_NAME"; }

# ext0 address of node $1 (from the nodes file)
tb_ext_ip() { awk -v n="$1" '$1 == n { print $5 }' "$(tb_state)/nodes"; }
tb_fab_ip() { awk -v n="$1" '$1 == n { print $4 }' "$(tb_state)/nodes"; }

# tb_stat DIR KEY: a counter of the emulator's stats file (e.g. a_b drops)
tb_stat() {
    local f i
    f=$(tb_state)/wan.stats
    for i in $(seq 20); do [[ -s $f ]] && break; sleep 0.1; done
    awk -v d="$1" -v k="$2" '$1 == "dir" && $2 == d {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$f"
}

# tb_ping_times NODE DST COUNT INTERVAL: one RTT (ms) per line
tb_ping_times() {
    tb_exec "$1" ping -n -c "$3" -i "$4" -W 2 "$2" 2>/dev/null |
        sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p'
}

# median of numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# fcmp A OP B: floating-point comparison (OP: < <= > >=)
fcmp() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
    r = (op == "<") ? a < b : (op == "<=") ? a <= b : (op == ">") ? a > b : a >= b; exit !r }'; }
