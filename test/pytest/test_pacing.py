"""Pacing of inter-cluster sending (docs/pacing.md) across the two_clusters
testbed (two clusters of two nodes, one router each, NIC 1 Gbit/s, WAN
2 Gbit/s): the ICBC_PACING_MATB attribute an application sets, on the routed
path (striped and whole messages) and on the TCP path, and rate-managed
MPI_Alltoall with the WAN rate from the router file.

test/mpi/pacing_rate checks every byte and prints the slowest rank's time.
A paced run must take at least 80 % of the time its bytes need at the rate
(a slower machine only makes it longer); the same run unpaced must take
less than half of that, so the bound tells paced from unpaced.

Variables the jobs set: MPIR_CVAR_CH4_ICBC_POLICY=alltoall for the TCP path
case (one testbed serves every policy), MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL
(the feature under test), and ICBC_ROUTERFILE for a copy of the testbed's
router file whose wan-rate line is edited as a user would (the testbed's
2 Gbit/s WAN is wider than the NICs, so the rate is set below them).
"""
import os
import re

import pytest

from mpirun import run_mpi


def run(b, programs, work, name, np, args, env=None):
    r = run_mpi(b.tb.prefix, b.env, programs["pacing_rate"], np, work, name=name, hosts=b.hosts,
                extra_env=env or {}, args=[str(a) for a in args], timeout=180)
    assert r.ok, r.describe()
    m = re.search(r"^seconds ([0-9.]+)$", r.output, re.M)
    assert m, r.describe()
    return float(m.group(1))


def paced_and_unpaced(b, programs, work, name, np, args, bits, rate, env=None, paced_env=None,
                      matb=None):
    """Seconds of the paced run (checked against the bound) and the unpaced."""
    bound = 0.8 * bits / rate
    paced = run(b, programs, work, f"{name}-paced", np,
                list(args) + (["--matb", matb] if matb else []), dict(env or {}, **(paced_env or {})))
    unpaced = run(b, programs, work, f"{name}-unpaced", np, args, env)
    with open(os.path.join(work, "pacing.txt"), "a") as f:
        f.write(f"{name}: paced {paced:.2f} s, unpaced {unpaced:.2f} s, bound {bound:.2f} s\n")
    assert paced >= bound, f"{name}: paced run took {paced:.2f} s, less than {bound:.2f} s"
    assert unpaced < bound / 2, f"{name}: unpaced run took {unpaced:.2f} s (bound {bound:.2f} s)"


@pytest.mark.parametrize("size", [1 << 20, 4096], ids=["striped", "whole"])
def test_attribute_paces_the_routed_path(two_clusters, programs, work, size):
    """MATB 40 Mbit/s on MPI_COMM_WORLD, messages on its duplicate: 1 MiB
    messages are striped, 4 KiB ones travel whole on the ordered lane."""
    nbytes = 6 << 20 if size > 4096 else 3 << 20
    paced_and_unpaced(two_clusters, programs, work, f"routed-{size}", 2,
                      ["--bytes", nbytes, "--size", size], nbytes * 8, 40e6, matb=40000000)


def test_attribute_paces_the_tcp_path(two_clusters, programs, work):
    """Policy alltoall: the sockets to the other cluster are paced too."""
    nbytes = 6 << 20
    paced_and_unpaced(two_clusters, programs, work, "tcp", 2,
                      ["--bytes", nbytes, "--size", 1 << 20], nbytes * 8, 40e6,
                      env={"MPIR_CVAR_CH4_ICBC_POLICY": "alltoall"}, matb=40000000)


def test_rate_managed_alltoall_takes_the_wan_rate_from_the_router_file(two_clusters, programs,
                                                                        work):
    """wan-rate 50mbit in the router file, two processes per cluster: each
    sends at 25 Mbit/s during MPI_Alltoall."""
    rf = os.path.join(work, "pacing-routers.conf")
    with open(two_clusters.routerfile) as f:
        lines = [l for l in f if not l.startswith("wan-rate ")]
    key = os.path.join(two_clusters.tb.state, "routers.key")
    lines = [f"key {key}\n" if l.startswith("key ") else l for l in lines]
    lines.insert(1, "wan-rate 50mbit\n")
    with open(rf, "w") as f:
        f.writelines(lines)
    nbytes = 4 << 20  # to the other cluster, per process
    paced_and_unpaced(two_clusters, programs, work, "alltoall", 4,
                      ["--alltoall", "--bytes", nbytes, "--size", 256 << 10], nbytes * 8, 25e6,
                      env={"ICBC_ROUTERFILE": rf},
                      paced_env={"MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL": "1"})


def test_a_bad_wan_rate_is_an_error_naming_the_variable(two_clusters, programs, work):
    r = run_mpi(two_clusters.tb.prefix, two_clusters.env, programs["pacing_rate"], 2, work,
                name="bad-wan-rate", hosts=two_clusters.hosts,
                extra_env={"MPIR_CVAR_CH4_ICBC_WAN_RATE": "fast"}, timeout=60)
    assert r.failed_with(r"MPIR_CVAR_CH4_ICBC_WAN_RATE='fast' is not a rate above 0"), \
        r.describe()
