"""Placement and pacing with cluster a on UCX and cluster b on libfabric
(the mixed_clusters testbed: two router nodes per cluster, the router
file's fabric-api lines choose each cluster's API).

Placement: icbc-router daemons on the four router nodes, started as
docs/router.md says; under each placement of chunks on routers, 8 MiB each
way between a pair of processes, every byte checked by the program, and
both routers of each cluster carry a share of what the other cluster
receives (read from the daemons' counters before and after the run).

Pacing: the ICBC_PACING_MATB attribute on the routed path through the same
daemons, as test_pacing.py checks it on a UCX-only testbed.

Variables the jobs set: MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT (the feature
under test) and MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0 where daemons are the
routers (the embedded ones would otherwise take their addresses).
"""
import re

import pytest

from conftest import Daemons
from mpirun import run_mpi

MIB = 1 << 20


class MixedDaemons(Daemons):
    # libfabric's tcp;ofi_rxm takes about 20 MB as the router starts
    # (test/router/ofi.sh): the resident bound leaves room for it
    RSS = 96 << 20


@pytest.fixture(scope="module")
def mixed_daemons(mixed_clusters):
    d = MixedDaemons(mixed_clusters, ["a0", "a1", "b0", "b1"])
    d.start()
    yield d
    d.stop()


def trunk_bytes(d):
    """Bytes each daemon has sent on its trunks so far, by node."""
    return {n: sum(t["bytes_out"] for t in d.stats_now(n)["trunks"]) for n in d.nodes}


@pytest.mark.parametrize("placement", ["adaptive", "window", "round-robin"])
def test_striped_messages_take_every_router_of_both_apis(mixed_clusters, mixed_daemons, programs,
                                                        work, placement):
    before = trunk_bytes(mixed_daemons)
    r = run_mpi(mixed_clusters.tb.prefix, mixed_clusters.env, programs["pacing_rate"], 2, work,
                name=f"mixed-placement-{placement}", hosts=mixed_clusters.hosts,
                extra_env={"MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT": placement,
                           "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"},
                args=["--bytes", str(8 * MIB), "--size", str(MIB)], timeout=180)
    assert r.ok, r.describe()
    after = trunk_bytes(mixed_daemons)
    sent = {n: after[n] - before[n] for n in mixed_daemons.nodes}
    for cluster in "ab":
        routers = [n for n in sent if n.startswith(cluster)]
        total = sum(sent[n] for n in routers)
        assert total >= 8 * MIB, f"{placement}: cluster {cluster}'s routers sent {sent}"
        for n in routers:
            # round-robin halves the chunks; the others may favour a router,
            # but a placement that used one router alone fails here
            assert sent[n] >= total // 10, \
                f"{placement}: router {n} carried {sent[n]} of {total} bytes ({sent})"


def test_attribute_paces_the_routed_path_on_both_apis(mixed_clusters, mixed_daemons, programs,
                                                      work):
    """MATB 40 Mbit/s on MPI_COMM_WORLD, 1 MiB messages (striped) both
    ways: at least 80 % of the time the bytes need at that rate; unpaced,
    less than half of it."""
    nbytes = 6 * MIB
    bound = 0.8 * nbytes * 8 / 40e6

    def seconds(name, args):
        r = run_mpi(mixed_clusters.tb.prefix, mixed_clusters.env, programs["pacing_rate"], 2,
                    work, name=name, hosts=mixed_clusters.hosts,
                    extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"},
                    args=["--bytes", str(nbytes), "--size", str(MIB)] + args, timeout=180)
        assert r.ok, r.describe()
        m = re.search(r"^seconds ([0-9.]+)$", r.output, re.M)
        assert m, r.describe()
        return float(m.group(1))

    paced = seconds("mixed-paced", ["--matb", "40000000"])
    unpaced = seconds("mixed-unpaced", [])
    assert paced >= bound, f"paced run took {paced:.2f} s, less than {bound:.2f} s"
    assert unpaced < bound / 2, f"unpaced run took {unpaced:.2f} s (bound {bound:.2f} s)"


def test_libfabric_is_loaded_by_the_ranks_of_its_cluster_only(mixed_clusters, mixed_daemons,
                                                               programs, work):
    """libfabric is opened at run time by the first fabric of that API: the
    ranks of cluster a (UCX) never load it, even after messages to every
    rank of cluster b; the ranks of cluster b (libfabric) have it."""
    r = run_mpi(mixed_clusters.tb.prefix, mixed_clusters.env, programs["fabric_lib"], 4, work,
                name="mixed-fabric-lib", hosts=mixed_clusters.hosts,
                extra_env={"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0"}, timeout=120)
    assert r.ok, r.describe()
    lines = re.findall(r"^rank (\d+) on (\S+): libfabric (loaded|not loaded)$", r.output, re.M)
    assert len(lines) == 4, r.describe()
    for rank, node, lib in lines:
        want = "loaded" if node.startswith("b") else "not loaded"
        assert lib == want, f"rank {rank} on {node}: libfabric {lib}\n{r.output}"
    assert {n[0] for _, n, _ in lines} == {"a", "b"}, lines
