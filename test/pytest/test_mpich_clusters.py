"""MPICH's own test/mpi directories with their ranks alternating between two
one-node clusters, so every message between ranks crosses the routers
(test/mpich/run-testsuite.sh runs them; this suite gives it the testbed and
the routers and counts its results).

The WAN of this testbed has a one-way delay of 100 us: comm/ctxalloc
duplicates a communicator 200,000 times and pt2pt/sendflood makes 100,000
round trips, which at 1 ms per direction would be 400 s and 200 s of
propagation delay alone, beyond their time limits for any MPI.
"""
import os
import re
import subprocess

import pytest

from conftest import TOP, Daemons, bed

DIRS = "pt2pt coll comm datatype rma part"


@pytest.fixture(scope="module")
def one_node_clusters(prefix, work, request):
    with bed(prefix, work, "pcs",
             ["--clusters", "2", "--nodes", "1", "--routers", "1", "--nic-rate", "1gbit",
              "--wan-rate", "2gbit", "--delay", "100us"],
             ["a0", "b0"], request.config.getoption("--keep")) as b:
        d = Daemons(b, ["a0", "b0"])
        d.start()
        yield b
        d.stop()


@pytest.mark.parametrize("policy", [None])
def test_mpich_ci_subset_across_clusters(policy, one_node_clusters, prefix, work):
    out = os.path.join(work, "mpich-2clusters")
    argv = [os.path.join(TOP, "test/mpich/run-testsuite.sh"), "--mpi", prefix, "--label", "icbc",
            "--list", os.path.join(TOP, "test/mpich/ci-subset-2clusters"), "--retries", "1",
            "--timeout", "120", "--dirs", DIRS, "--testbed", one_node_clusters.tb.name,
            "--path-if", "ext0", "--env", "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0", "--out", out]
    if policy:
        argv += ["--env", f"MPIR_CVAR_CH4_ICBC_POLICY={policy}"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    m = re.findall(r"^([0-9]+) passed, ([0-9]+) failed", r.stdout, re.M)
    assert m, f"run-testsuite.sh printed no summary (rc {r.returncode})\n{r.stdout[-2000:]}"
    passed, failed = map(int, m[-1])
    assert passed > 0 and failed == 0, \
        f"{passed} passed, {failed} failed (see {out})\n" + \
        "\n".join(l for l in r.stdout.splitlines() if l.startswith(("FAIL", "dir ", "all ")))
