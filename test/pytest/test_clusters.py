"""MPI tests across two emulated clusters (the two_clusters testbed), under
every policy, with embedded routers and with icbc-router daemons, and the
failure paths: a process with the wrong key, two jobs through the same
routers, a router killed mid-transfer, a router stopped without a
connection error.

The matrix below is the whole list of ordinary cases; each row runs once
per policy it names and per router mode. Variables a case sets are named in
its row: the policy (what a user writes in the router file's policy line,
set here per job with its CVAR so that one testbed serves every policy),
MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 when daemons are the routers (the
embedded router would otherwise take their addresses), and a test's own
tunable (the small chunk size).
"""
import dataclasses
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from mpirun import run_mpi, vm_kib

POLICIES = ("aggregate", "static", "alltoall", "tcp")


@dataclasses.dataclass(frozen=True)
class Case:
    program: str
    np: int
    args: tuple = ()
    policies: tuple = ("aggregate",)
    routers: str = "embedded"  # or "daemons"
    env: tuple = ()             # (name, value) pairs the case needs
    full: bool = False          # the full tier only (-m full; docs/testsuite.md, TIERS)


MATRIX = [
    Case("p2p_sizes", 4, policies=POLICIES),
    # an update of a process's own window never overtakes a later one that
    # another process makes because of it (the step MCS locks rely on)
    Case("rma_self_order", 4, ("--rounds", "500", "--deadline", "10"), policies=POLICIES),
    # a target's MPI_Win_test after a barrier that followed MPI_Win_complete
    # finds the epoch over (the notice does not trail the barrier)
    Case("pscw_complete_order", 4, ("--rounds", "300"), policies=POLICIES),
    Case("rma_coll", 4),
    Case("stress", 4, ("--quick",)),
    Case("rma_coll", 4, policies=("alltoall",), full=True),
    Case("stress", 4, ("--quick", "--seed", "3"), policies=("static",), full=True),
    Case("stress", 4, ("--quick", "--seed", "4"), policies=("alltoall",), full=True),
    Case("stress", 4, ("--quick", "--seed", "5"), policies=("tcp",), full=True),
    Case("p2p_sizes", 4, env=(("MPIR_CVAR_CH4_ICBC_CHUNK_SIZE", "4096"),), full=True),
    # every placement of chunks on routers carries striped messages whole
    Case("p2p_sizes", 4, env=(("MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT", "adaptive"),)),
    Case("p2p_sizes", 4, env=(("MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT", "round-robin"),),
         full=True),
    Case("p2p_sizes", 4, routers="daemons", policies=(None,)),
    Case("stress", 4, ("--quick", "--seed", "6"), routers="daemons", policies=(None,)),
]


def expand(matrix):
    for c in matrix:
        for pol in c.policies:
            marks = [pytest.mark.full] if c.full else []
            cid = "-".join(x for x in (c.program, pol or "router-file", c.routers) if x)
            if c.env:
                cid += "-" + "-".join(f"{k.split('_')[-1].lower()}{v}" for k, v in c.env)
            yield pytest.param(c, pol, id=cid, marks=marks)


@pytest.mark.parametrize("case,policy", list(expand(MATRIX)))
def test_case(case, policy, two_clusters, programs, work, prefix, request):
    extra = dict(case.env)
    if policy:
        extra["MPIR_CVAR_CH4_ICBC_POLICY"] = policy
    if case.routers == "daemons":
        request.getfixturevalue("daemons")
        extra["MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER"] = "0"
    r = run_mpi(prefix, two_clusters.env, programs[case.program], case.np, work,
                name=request.node.name.replace("/", "_"), hosts=two_clusters.hosts,
                extra_env=extra, args=case.args)
    assert r.ok, r.describe()


def test_wrong_key_is_refused(two_clusters, programs, work, prefix, daemons, tmp_path):
    """A process whose router file names another key is refused by the
    routers, with an error saying so."""
    key = tmp_path / "routers.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    with open(two_clusters.routerfile) as f:
        lines = [f"key {key}\n" if l.startswith("key ") else l for l in f]
    rf = tmp_path / "routers.conf"
    rf.write_text("".join(lines))
    r = run_mpi(prefix, two_clusters.env, programs["p2p_sizes"], 2, work, name="wrong-key",
                hosts=two_clusters.hosts,
                extra_env={"ICBC_ROUTERFILE": str(rf), "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"})
    assert r.failed_with(r"refused|REGISTER|authenticat"), r.describe()


def test_unknown_stripe_placement_fails_mpi_init(two_clusters, programs, work, prefix):
    """A placement name the netmod does not know ends MPI_Init with the names
    it takes, before any message."""
    r = run_mpi(prefix, two_clusters.env, programs["p2p_sizes"], 2, work, name="bad-placement",
                hosts=two_clusters.hosts,
                extra_env={"MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT": "fastest"})
    assert r.failed_with(r"MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT=fastest is not one of window, "
                         r"round-robin, adaptive"), r.describe()


def impi_clients_in_testbed(bed, prefix, node, jobs):
    """impi-server for len(JOBS) clients on NODE's WAN address (in its
    namespace), then every job at once, each a function given the server's
    ADDR:PORT; returns the server's exit status and messages."""
    ns = f"{bed.env['ICBC_TESTBED']}-{node}"
    addr = {n.split()[0]: n.split()[4] for n in open(os.path.join(bed.tb.state, "nodes"))
            if not n.startswith("#") and n.strip()}[node]
    server = subprocess.Popen(["ip", "netns", "exec", ns, os.path.join(prefix, "bin", "impi-server"),
                               "-server", str(len(jobs)), "-host", addr, "-listen", addr,
                               "-timeout", "200"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server_addr = server.stdout.readline().strip()
        assert server_addr, f"impi-server printed no address: {server.stderr.read()}"
        threads = [threading.Thread(target=j, args=(server_addr,)) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return server.returncode, server.stderr.read()


def test_routerfile_impi_entry_makes_the_job_an_impi_client(two_clusters, programs, work,
                                                            prefix, tmp_path):
    """A job across both clusters whose router file has an `impi` line joins
    that IMPI job as client 0, started as docs/routerfile.md tells a user:
    the router file and mpiexec, no IMPI variable. The foreign cluster is a
    second ICBC job on a1 (client 1, started with ICBC_IMPI_SERVER and
    ICBC_IMPI_CLIENT as docs/impi.md says); impi-server runs on b1's WAN
    address. impi_world on both sides checks the world of three: a0 and b0
    talk through the routers, each of them to a1 by IMPI (b0 across the WAN)."""
    tb = two_clusters.tb
    (tmp_path / "hosts0").write_text("a0\nb0\n")
    (tmp_path / "hosts1").write_text("a1\n")
    results = {}

    def client0(server_addr):
        # the testbed's router file with the foreign cluster added (its key
        # path made absolute, since the copy lives elsewhere)
        with open(two_clusters.routerfile) as f:
            lines = [f"key {os.path.join(tb.state, l.split()[1])}\n" if l.startswith("key ") else l
                     for l in f]
        rf = tmp_path / "routers.conf"
        rf.write_text("".join(lines) + f"impi other server={server_addr}\n")
        results[0] = run_mpi(prefix, two_clusters.env, programs["impi_world"], 2, work,
                             name="routerfile-impi-client0", hosts=str(tmp_path / "hosts0"),
                             extra_env={"ICBC_ROUTERFILE": str(rf)}, args=("2", "1"),
                             timeout=180)

    def client1(server_addr):
        results[1] = run_mpi(prefix, two_clusters.env, programs["impi_world"], 1, work,
                             name="routerfile-impi-client1", hosts=str(tmp_path / "hosts1"),
                             extra_env={"ICBC_IMPI_SERVER": server_addr, "ICBC_IMPI_CLIENT": "1"},
                             args=("2", "1"), timeout=180)

    rc, server_err = impi_clients_in_testbed(two_clusters, prefix, "b1", [client0, client1])
    assert sorted(results) == [0, 1], f"a client did not run: {server_err}"
    for k, r in results.items():
        assert r.rc == 0 and not r.timed_out, r.describe()
    for rank, k in ((0, 0), (1, 0), (2, 1)):
        assert f"impi_world: rank {rank} of 3 (client {k}): ok" in results[k].output, \
            results[k].describe()
    assert rc == 0, server_err


@pytest.mark.parametrize("routerfile", [True, False], ids=["env-file", "no-routerfile"])
def test_impi_clients_of_two_nodes_each(two_clusters, programs, work, prefix, tmp_path,
                                        routerfile):
    """Two ICBC jobs, one per cluster, each of two nodes with two processes,
    as docs/impi.md tells a user: the testbed's env file, mpiexec with a
    hosts file, ICBC_IMPI_SERVER and ICBC_IMPI_CLIENT; impi-server on b1's
    WAN address. With the env file's router file the fabric device comes
    from it; without (a site that runs only IMPI) from MPI_Init's trial of
    the interfaces, which must give fab0 (ICBC_LOG_LEVEL=info prints it).
    impi_world checks the world of 8, IMPI's host attributes and messages
    between every pair of neighbours, inside each client over UCX and across
    by IMPI."""
    env = dict(two_clusters.env)
    if not routerfile:
        del env["ICBC_ROUTERFILE"]
    (tmp_path / "hosts0").write_text("a0:2\na1:2\n")
    (tmp_path / "hosts1").write_text("b0:2\nb1:2\n")
    results = {}

    def client(k):
        def run(server_addr):
            results[k] = run_mpi(prefix, env, programs["impi_world"], 4, work,
                                 name=f"impi-2x2-{'rf' if routerfile else 'norf'}-client{k}",
                                 hosts=str(tmp_path / f"hosts{k}"), args=("4", "4"),
                                 extra_env={"ICBC_LOG_LEVEL": "info",
                                            "ICBC_IMPI_SERVER": server_addr,
                                            "ICBC_IMPI_CLIENT": str(k)}, timeout=180)
        return run

    rc, server_err = impi_clients_in_testbed(two_clusters, prefix, "b1", [client(0), client(1)])
    assert sorted(results) == [0, 1], f"a client did not run: {server_err}"
    for k, r in results.items():
        assert r.rc == 0 and not r.timed_out, r.describe()
        for rank in range(4 * k, 4 * k + 4):
            assert f"impi_world: rank {rank} of 8 (client {k}): ok" in r.output, r.describe()
        if not routerfile:
            chosen = re.findall(r"UCX devices from the start-up trial with process \d+ on "
                                r"another node: (\S+)$", r.output, re.M)
            assert chosen == ["fab0"] * 4, f"{chosen}\n{r.describe()}"
    assert rc == 0, server_err


def test_routerfile_impi_entries_of_two_servers_fail_mpi_init(two_clusters, programs, work,
                                                              prefix, tmp_path):
    """impi entries are the foreign clients of one IMPI job: two servers in
    one router file end MPI_Init with both entries named."""
    tb = two_clusters.tb
    with open(two_clusters.routerfile) as f:
        lines = [f"key {os.path.join(tb.state, l.split()[1])}\n" if l.startswith("key ") else l
                 for l in f]
    rf = tmp_path / "routers.conf"
    rf.write_text("".join(lines) + "impi c server=10.200.9.1:9000\nimpi d server=10.200.9.2:9000\n")
    r = run_mpi(prefix, two_clusters.env, programs["impi_world"], 2, work,
                name="routerfile-impi-two-servers", hosts=two_clusters.hosts,
                extra_env={"ICBC_ROUTERFILE": str(rf)}, args=("2",), timeout=60)
    assert r.failed_with(r"impi 'c' \(line \d+\) and impi 'd' \(line \d+\) name different "
                         r"servers"), r.describe()


def test_two_jobs_through_the_same_routers(two_clusters, programs, work, prefix, daemons):
    """Same ranks, same nodes, different job ids: the routers keep the (job,
    rank) registrations apart, and stress checksums every payload."""
    results = {}

    def job(seed):
        results[seed] = run_mpi(prefix, two_clusters.env, programs["stress"], 4, work,
                                name=f"two-jobs-{seed}", hosts=two_clusters.hosts,
                                extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"},
                                args=("--quick", "--seed", str(seed)))

    threads = [threading.Thread(target=job, args=(s,)) for s in (8, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed, r in results.items():
        assert r.ok, r.describe()
    for node in ("a0", "b0"):
        st = daemons.stats_now(node)
        assert st["unreachable"] == 0 and st["msgs_out"] > 0 and st["msgs_in"] > 0, st


def signal_router_later(daemons, node, sig, after):
    def go():
        time.sleep(after)
        os.kill(daemons.pids[node], sig)
    t = threading.Thread(target=go)
    t.start()
    return t


def test_router_killed_mid_transfer_ends_the_job(two_clusters, programs, work, prefix, daemons):
    """Router a0 is killed 4 s into a striped run: rank 0 loses its router
    and ends the job with an MPI error naming it; rank 1 learns from b0 that
    cluster a is unreachable. The job must be over within 30 s of the kill."""
    killer = signal_router_later(daemons, "a0", signal.SIGKILL, 4)
    r = run_mpi(prefix, two_clusters.env, programs["stress"], 2, work, name="router-killed",
                hosts=two_clusters.hosts, extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"},
                args=("--seed", "7"), timeout=90)
    killer.join()
    assert r.failed_with(r"icbc|router|unreachable|lost"), r.describe()
    assert r.secs - 4 <= 30, f"ended {r.secs - 4:.0f} s after the kill\n{r.describe()}"


def test_router_stopped_gives_the_silence_error(two_clusters, programs, work, prefix, daemons):
    """Router a0 is stopped (SIGSTOP) 4 s into the run: its connections stay
    open, so no endpoint fails; rank 0 hears nothing from it for
    MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT (20 s, the default) and raises the MPI
    error naming the silence. Whether the whole job ends by itself is not
    required (b0 keeps its trunk to the stopped a0 open; hydra does not
    always reach rank 1's proxy); it is killed 2 s after rank 0's abort, or
    after 64 s."""
    stopper = signal_router_later(daemons, "a0", signal.SIGSTOP, 4)
    # 20 s of silence, the 5 s grace, margin: the error within 45 s of the stop
    try:
        r = run_mpi(prefix, two_clusters.env, programs["stress"], 2, work,
                    name="router-stopped", hosts=two_clusters.hosts,
                    extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"},
                    args=("--seed", "12"), timeout=64, watch=r"lost: silent for [0-9]+ s",
                    until=r"^Abort\(")
    finally:
        stopper.join()
        os.kill(daemons.pids["a0"], signal.SIGCONT)
    assert r.watched_secs is not None, f"no 'silent' error\n{r.describe()}"
    assert r.watched_secs - 4 <= 45, f"the error came {r.watched_secs - 4:.0f} s after the stop"
    assert "Abort" in r.output, r.describe()


@pytest.mark.full
@pytest.mark.parametrize("policy", POLICIES)
def test_stress_full_through_bounded_routers(policy, two_clusters, programs, work, prefix,
                                             daemons):
    """The stress test's full profile (10,000 messages of 0 B - 16 MiB,
    random datatypes, MPI_ANY_SOURCE, 1 GiB, every payload checksummed)
    through daemons bounded to --max-memory 16Mi and --max-rss 24Mi: the
    data arrives intact, and no router's peak resident size exceeds the
    bound."""
    seed = 11 + POLICIES.index(policy)
    r = run_mpi(prefix, two_clusters.env, programs["stress"], 4, work,
                name=f"stress-full-{policy}", hosts=two_clusters.hosts,
                extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0",
                           "MPIR_CVAR_CH4_ICBC_POLICY": policy},
                args=("--seed", str(seed)), timeout=1200)
    hwm = {n: vm_kib(daemons.pids[n], "VmHWM") for n in daemons.nodes}
    daemons.stop()
    with open(os.path.join(work, "stress-full.txt"), "a") as f:
        for n in daemons.nodes:
            st = daemons.stats(n) or {}
            f.write(f"policy {policy} router {n}: peak buffered {st.get('peak_buffered')} B "
                    f"(--max-memory {daemons.MEMORY}), VmRSS after start "
                    f"{daemons.rss_at_start.get(n)} KiB, VmHWM {hwm[n]} KiB "
                    f"(--max-rss {daemons.RSS} B)\n")
    assert r.ok, r.describe()
    for n in daemons.nodes:
        assert hwm[n] is not None and hwm[n] * 1024 <= daemons.RSS, \
            f"router {n}: VmHWM {hwm[n]} KiB over --max-rss {daemons.RSS} B"
