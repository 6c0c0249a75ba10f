"""Router failover across two emulated clusters of four routers each,
icbc-router daemons started as docs/router.md tells a user, the job started
with the testbed's env file, its router file and mpiexec.

failover_stream (test/mpi) sends messages both ways between rank 0 (cluster
a) and rank 1 (cluster b) and checks every byte, the order, and that
nothing arrives twice. Routers are killed with SIGKILL while it runs, at
moments drawn from a seeded generator, and restarted as a user would.

Variables the jobs set: MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 (the daemons are
the routers; an embedded one would take their addresses) and
MPIR_CVAR_CH4_ICBC_POLICY for the static case (one testbed serves both
policies). No UCX device is pinned.
"""
import json
import os
import re
import signal
import threading
import time

import pytest

from conftest import bed
from mpirun import run_mpi, router_stats
from routerkill import Killer, RouterDaemons

ROUTERS = [f"{c}{i}" for c in "ab" for i in range(4)]
JOB_ENV = {"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"}

# The default tier's short set (docs/testsuite.md, TIERS): the striped stream
# under kills, three routers lost for good, all four lost, a restart; the
# static and small-message streams are the full tier's.
DEFAULT_TIER = {
    "test_stream_survives_router_kills": [dict(policy="aggregate", size=64 << 20)],
}


@pytest.fixture(scope="module")
def four_routers(prefix, work, request):
    """Two clusters of four nodes, all four of each a router node, NIC 1
    Gbit/s, WAN 8 Gbit/s (wider than the routers together), 1 ms one way."""
    api = request.config.getoption("--fabric-api")
    with bed(prefix, work, "fo",
             ["--clusters", "2", "--nodes", "4", "--routers", "4", "--nic-rate", "1gbit",
              "--wan-rate", "8gbit", "--delay", "1ms"] + (["--fabric-api", api] if api else []),
             ["a0", "b0", "a1", "b1"], request.config.getoption("--keep")) as b:
        yield b


@pytest.fixture
def routers(four_routers):
    r = RouterDaemons(four_routers.tb)
    for n in ROUTERS:
        r.start(n)
    yield r
    r.stop()


def stream(b, programs, work, name, args, policy=None, timeout=400):
    env = dict(JOB_ENV)
    if policy:
        env["MPIR_CVAR_CH4_ICBC_POLICY"] = policy
    return run_mpi(b.tb.prefix, b.env, programs["failover_stream"], 2, work, name=name,
                   hosts=b.hosts, extra_env=env, args=args, timeout=timeout)


def figures(r):
    """Seconds and longest batch per rank, from failover_stream's lines."""
    return [(float(m.group(1)), float(m.group(2))) for m in re.finditer(
        r"in ([0-9.]+) s \([0-9.]+ MB/s\); longest batch of [0-9]+: ([0-9.]+) s", r.output)]


def baseline_secs(b, programs, work, args, policy=None):
    r = stream(b, programs, work, f"baseline-{policy or 'aggregate'}", args, policy)
    assert r.ok, r.describe()
    return max(s for s, _ in figures(r))


@pytest.mark.parametrize("policy,size,count,window", [
    ("aggregate", 64 << 20, 60, 2),   # striped 64 MiB messages
    ("static", 64 << 20, 60, 2),      # the processes' fixed routers move
    ("aggregate", 64, 500000, 64),    # small messages on the ordered lane
])
def test_stream_survives_router_kills(policy, size, count, window, four_routers, routers,
                                      programs, work, request):
    """Routers killed one at a time (each restarted 1.5 s later), at moments
    drawn from a seeded generator: every message arrives once, intact and in
    order, and the run ends by itself. The time the kills cost is written
    to failover.txt beside the run without kills, which only the full tier
    makes (a figure, no assertion: the default tier saves its time)."""
    args = ("--size", str(size), "--count", str(count), "--window", str(window))
    base = None
    if request.node.get_closest_marker("full"):
        base = baseline_secs(four_routers, programs, work, args, policy)
    killer = Killer(routers, kills=1000, seed=size + len(policy), nodes=ROUTERS)
    killer.start()
    try:
        r = stream(four_routers, programs, work, f"kills-{policy}-{size}", args, policy)
    finally:
        killer.stop_flag.set()
        killer.join()
    assert r.ok, r.describe()
    assert len(killer.done) >= 5, f"only {len(killer.done)} kill(s) fell inside the run"
    secs = max(s for s, _ in figures(r))
    with open(os.path.join(work, "failover.txt"), "a") as f:
        f.write(f"{policy} {size} B x {count}: {len(killer.done)} kills, {secs:.1f} s "
                f"(without kills {f'{base:.1f} s' if base else 'not run'}), longest batch "
                f"{max(l for _, l in figures(r)):.2f} s; killed "
                f"{' '.join(killer.done)}\n")


def test_three_of_four_routers_killed_one_after_another(four_routers, routers, programs, work):
    """Routers a1, a2, a3 die for good, 3 s apart: a0 carries on alone, and
    every message arrives. The stream runs for 20 s (--seconds), longer than
    the kills take (3 s, then 1.5..4.5 s apart) however fast this host
    moves the messages."""
    args = ("--size", str(16 << 20), "--seconds", "20", "--window", "2")
    killer = Killer(routers, kills=3, seed=0, nodes=["a1", "a2", "a3"], start=3.0,
                    period=(1.5, 4.5), restart=None)
    killer.rng.choice = lambda nodes, it=iter(["a1", "a2", "a3"]): next(it)
    killer.start()
    try:
        r = stream(four_routers, programs, work, "three-killed", args)
    finally:
        killer.stop_flag.set()
        killer.join()
    assert r.ok, r.describe()
    assert killer.done == ["a1", "a2", "a3"], killer.done


def test_every_router_killed_gives_an_mpi_error_within_10_s(four_routers, routers, programs,
                                                           work):
    """All four routers of cluster a die at once: both ranks end with an MPI
    error that names the cluster they can no longer reach, within 10 s."""
    args = ("--size", str(16 << 20), "--count", "100000", "--window", "2")
    t_kill = []

    def kill_all():
        time.sleep(4)
        for n in ("a0", "a1", "a2", "a3"):  # all at once, then wait for them to be gone
            os.kill(routers.pids[n], signal.SIGKILL)
        t_kill.append(time.time() - start)
        for n in ("a0", "a1", "a2", "a3"):
            routers.wait_gone(n)

    t = threading.Thread(target=kill_all)
    start = time.time()
    t.start()
    env = dict(JOB_ENV)
    r = run_mpi(four_routers.tb.prefix, four_routers.env, programs["failover_stream"], 2, work,
                name="all-killed", hosts=four_routers.hosts, extra_env=env, args=args,
                timeout=120, watch=r"MPI error after")
    t.join()
    assert r.failed_with(r"MPI error after [0-9.]+ s (.|\n)*(rank 0 is in cluster a|rank 1 is in "
                         r"cluster b)"), r.describe()
    assert r.watched_secs is not None, r.describe()
    after = r.watched_secs - t_kill[0]
    with open(os.path.join(work, "failover.txt"), "a") as f:
        f.write(f"all four routers of a killed: the first MPI error {after:.1f} s later\n")
    # the output is polled every 0.5 s: allow for that
    assert after <= 10.5, f"the first MPI error came {after:.1f} s after the kill\n{r.describe()}"


def first_bytes_after(routers, node, mark, limit=15):
    """Seconds until NODE's stats lines (every half second, past byte MARK of
    its log) count bytes; None when they do not within LIMIT s."""
    log, t0 = routers.log(node), time.time()
    while time.time() - t0 < limit:
        with open(log, errors="replace") as f:
            f.seek(mark)
            for line in f:
                i = line.find("stats-json ")
                if i >= 0:
                    st = json.loads(line[i + len("stats-json "):])
                    if st["bytes_in"] + st["bytes_out"] > 0:
                        return time.time() - t0
        time.sleep(0.25)
    return None


@pytest.mark.full
def test_router_down_at_start_is_taken_when_it_comes(four_routers, routers, programs, work):
    """Router a2 is down when the job starts: the job starts on the other
    three (a warning names a2) and, once a2 is started 4 s later as a user
    would, carries traffic through it within 5 s; every message arrives
    once, intact and in order."""
    args = ("--size", str(16 << 20), "--count", "120", "--window", "2")
    routers.kill("a2")
    seen = []

    def later():
        time.sleep(4)
        log = routers.log("a2")
        mark = os.path.getsize(log) if os.path.exists(log) else 0
        routers.start("a2", ["--stats-interval", "0.5"])
        seen.append(first_bytes_after(routers, "a2", mark))

    t = threading.Thread(target=later)
    t.start()
    r = stream(four_routers, programs, work, "down-at-start", args)
    t.join()
    assert r.ok, r.describe()
    assert re.search(r"router a2 \(fabric [^)]*\) unreachable: .*starting with the other routers",
                     r.output), r.describe()
    assert seen[0] is not None, "router a2, started after the job, forwarded nothing within 15 s"
    assert seen[0] <= 5, f"router a2 carried traffic only {seen[0]:.1f} s after its start"
    with open(os.path.join(work, "failover.txt"), "a") as f:
        f.write(f"down at start: router a2 carried bytes {seen[0]:.1f} s after its start\n")


def test_restarted_router_carries_traffic_again_within_5_s(four_routers, routers, programs,
                                                           work):
    """Router a2 is killed, and restarted 2 s later while the stream runs:
    within 5 s of its start it forwards messages again (its stats line,
    printed every half second, counts bytes)."""
    args = ("--size", str(16 << 20), "--count", "150", "--window", "2")
    seen = []

    def cycle():
        time.sleep(4)
        routers.kill("a2")
        time.sleep(2)
        log = routers.log("a2")
        mark = os.path.getsize(log) if os.path.exists(log) else 0
        routers.start("a2", ["--stats-interval", "0.5"])
        secs = first_bytes_after(routers, "a2", mark)
        if secs is not None:
            seen.append(secs)

    t = threading.Thread(target=cycle)
    t.start()
    r = stream(four_routers, programs, work, "restart", args)
    t.join()
    assert r.ok, r.describe()
    assert seen, "the restarted router forwarded nothing within 15 s"
    assert seen[0] <= 5, f"the restarted router carried traffic only after {seen[0]:.1f} s"
    with open(os.path.join(work, "failover.txt"), "a") as f:
        f.write(f"restart: router a2 carried bytes {seen[0]:.1f} s after its start\n")
    # the stats line at exit: per trunk and per process; b2's trunk to a2
    # went down once (the kill) and carried bytes both ways over the run
    routers.stop()
    b2 = router_stats(routers.log("b2"))
    trunk = [t for t in b2["trunks"] if t["cluster"] == "a" and t["router"] == 2]
    assert len(trunk) == 1 and trunk[0]["downs"] >= 1 and trunk[0]["bytes_out"] > 0 \
        and trunk[0]["bytes_in"] > 0, b2["trunks"]
    a0 = router_stats(routers.log("a0"))
    rank0 = [p for p in a0["processes"] if p["rank"] == 0]
    assert rank0 and rank0[0]["bytes_from"] > 0 and rank0[0]["bytes_to"] > 0, a0["processes"]
