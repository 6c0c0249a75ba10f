"""NPB IS across two clusters: the NAS kernel built with our mpicc
(benchmarks/apps/npb.py) runs on the two_clusters testbed under every policy
and must pass NPB's own verification.

The job starts as a user starts it: the testbed's env file (which names the
router file), a hosts file that alternates the clusters, our mpiexec. Under
aggregate (the router file's policy) nothing else is set; the other policies
are set per job with MPIR_CVAR_CH4_ICBC_POLICY so that one testbed serves all
four, as in test_clusters.py.

NPB is not packaged in Debian: its sources are given with --npb DIR or
ICBC_NPB_DIR (benchmarks/README.md, NPB); without them the runs are skipped
with the reason "input: ...", which test/run.py reports and allows.
"""
import os
import sys

import pytest

from mpirun import run_mpi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks", "apps"))
import npb  # noqa: E402

POLICIES = ("aggregate", "static", "alltoall", "tcp")

GOOD = """
 IS Benchmark Completed
 Class           =                        S
 Size            =                    65536
 Iterations      =                       10
 Time in seconds =                     0.01
 Total processes =                        4
 Mop/s total     =                   123.45
 Mop/s/process   =                    30.86
 Operation type  =              keys ranked
 Verification    =               SUCCESSFUL
"""


@pytest.fixture(scope="module")
def is_s(prefix, work, request):
    src = request.config.getoption("--npb")
    if not src:
        # NPB is not packaged in Debian: the user gives its sources.
        pytest.skip("input: " + npb.NOT_FOUND)
    try:
        return npb.build(prefix, "is", "S", os.path.join(work, "npb"), npb=src)
    except npb.NpbError as e:
        pytest.fail(str(e))


def test_report_is_read_and_a_failed_verification_is_seen():
    r = npb.parse(GOOD)
    assert (r["bench"], r["cls"], r["procs"], r["verified"]) == ("IS", "S", 4, True)
    assert r["secs"] == 0.01 and r["mops"] == 123.45
    assert npb.parse(GOOD.replace("SUCCESSFUL", "UNSUCCESSFUL"))["verified"] is False
    with pytest.raises(npb.NpbError, match="no 'verification'"):
        npb.parse(GOOD.split(" Verification")[0])


@pytest.mark.parametrize("policy", POLICIES)
def test_npb_is_class_s_verifies_across_two_clusters(policy, is_s, two_clusters, work, prefix):
    extra = {} if policy == "aggregate" else {"MPIR_CVAR_CH4_ICBC_POLICY": policy}
    os.makedirs(os.path.join(work, "npb"), exist_ok=True)
    r = run_mpi(prefix, two_clusters.env, is_s, 4, os.path.join(work, "npb"),
                name=f"is.S-{policy}", hosts=two_clusters.hosts, extra_env=extra, timeout=300)
    assert r.rc == 0 and not r.timed_out, r.describe()
    rep = npb.parse(r.output)
    assert (rep["bench"], rep["cls"], rep["procs"]) == ("IS", "S", 4), r.describe()
    assert rep["verified"], r.describe()
