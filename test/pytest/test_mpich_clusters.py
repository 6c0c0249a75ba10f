"""MPICH's own test/mpi directories with their ranks alternating between two
one-node clusters, so every message between ranks crosses the routers
(test/mpich/run-testsuite.sh runs them; this suite gives it the testbed and
the routers, and gives each directory's result as a test of its own).

The suite runs once per policy (--mpich-policies, default the router file's
policy) into _build/test-pytest/mpich-2clusters[-POLICY]/, where
test/mpich/compare-clusters.sh finds it (--from _build/test-pytest). The
quick run takes the CI subset (test/mpich/ci-subset-2clusters); the long one:

    python3 -m pytest test/pytest/test_mpich_clusters.py --mpich-list full \\
        --mpich-policies "aggregate static alltoall tcp"

The WAN of this testbed has a one-way delay of 100 us: comm/ctxalloc
duplicates a communicator 200,000 times and pt2pt/sendflood makes 100,000
round trips, which at 1 ms per direction would be 400 s and 200 s of
propagation delay alone, beyond their time limits for any MPI.
"""
import csv
import os
import re
import subprocess

import pytest

from conftest import TOP, Daemons, bed


def pytest_generate_tests(metafunc):
    if "mpich_case" in metafunc.fixturenames:
        cfg = metafunc.config
        pols = cfg.getoption("--mpich-policies").split() or [None]
        dirs = cfg.getoption("--mpich-dirs").split()
        metafunc.parametrize("mpich_case", [(p, d) for p in pols for d in dirs],
                             ids=[f"{p or 'router-file'}-{d}" for p in pols for d in dirs])


@pytest.fixture(scope="module")
def one_node_clusters(prefix, work, request):
    cfg = request.config
    with bed(prefix, work, "pcs",
             ["--clusters", "2", "--nodes", "1", "--routers", "1", "--nic-rate", "1gbit",
              "--wan-rate", "2gbit", "--delay", cfg.getoption("--mpich-delay")],
             ["a0", "b0"], cfg.getoption("--keep")) as b:
        d = Daemons(b, ["a0", "b0"])
        d.start()
        yield b
        d.stop()


@pytest.fixture(scope="module")
def mpich_runs(one_node_clusters, prefix, work, request):
    """policy -> (output directory, run-testsuite.sh's stdout); each policy's
    run is made once, by the first of its directories' tests."""
    cfg = request.config
    runs = {}

    def run(policy):
        if policy in runs:
            return runs[policy]
        out = os.path.join(work, "mpich-2clusters" + (f"-{policy}" if policy else ""))
        lst = cfg.getoption("--mpich-list")
        sel = ["--retries", "1"]
        if lst == "ci":
            sel += ["--list", os.path.join(TOP, "test/mpich/ci-subset-2clusters")]
        elif lst != "full":
            sel += ["--list", os.path.abspath(lst)]
        argv = [os.path.join(TOP, "test/mpich/run-testsuite.sh"), "--mpi", prefix,
                "--label", "icbc", "--timeout", str(cfg.getoption("--mpich-timeout")),
                "--dirs", cfg.getoption("--mpich-dirs"), "--testbed", one_node_clusters.tb.name,
                "--path-if", "ext0", "--env", "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0",
                "--out", out] + sel
        if policy:
            argv += ["--env", f"MPIR_CVAR_CH4_ICBC_POLICY={policy}"]
        if cfg.getoption("--mpich-exclude"):
            argv += ["--exclude", os.path.abspath(cfg.getoption("--mpich-exclude"))]
        if cfg.getoption("--mpich-shard"):
            argv += ["--shard", cfg.getoption("--mpich-shard")]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=4 * 3600)
        with open(out + ".log", "w") as f:
            f.write(r.stdout + r.stderr)
        runs[policy] = (out, r.stdout)
        return runs[policy]

    return run


def test_mpich_directory_across_clusters(mpich_case, mpich_runs):
    policy, d = mpich_case
    out, stdout = mpich_runs(policy)
    assert re.search(r"^[0-9]+ passed, [0-9]+ failed", stdout, re.M), \
        f"run-testsuite.sh printed no summary (see {out}.log)\n{stdout[-2000:]}"
    tsv = os.path.join(out, "tests.tsv")
    assert os.path.exists(tsv), f"no {tsv} (see {out}.log)"
    with open(tsv) as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
                if r["dir"] == d]
    ran = [r for r in rows if r["status"] != "skip"]
    bad = [f"{r['test']}: {r['status']}" for r in rows if r["status"] in ("fail", "timeout")]
    assert ran, f"{d}: no test ran (see {out}.log)"
    assert not bad, f"{d}: {len(bad)} of {len(ran)} failed (see {out}/failures.txt)\n" + \
        "\n".join(bad)
