"""MPICH's own test/mpi directories with every test an IMPI job of two ICBC
clients, one on each of two emulated clusters (test/mpich/run-testsuite.sh
--impi "a0;b0": test/mpich/mpiexec_impi.py starts impi-server on a0's WAN
address and one mpiexec per client, the ranks split between them), so
every message between the clients is an IMPI packet on a host connection
across the emulated WAN, and MPICH's collectives and communicator
constructors run over the IMPI path. Each directory's result is a test of
its own. The quick run takes the CI subset (test/mpich/ci-subset-2clusters);
the long one:

    python3 -m pytest test/pytest/test_mpich_impi.py --mpich-list full [--impi-dirs "coll"]

One-sided operations between the clients travel as ICBC packets on the same
host connections (docs/impi.md); the rma directory without the two tests of
test/mpich/long-rma.list, which move gigabytes:

    python3 -m pytest test/pytest/test_mpich_impi.py --mpich-list full --impi-dirs rma \
        --mpich-exclude test/mpich/long-rma.list

With --impi-relay cluster a is private (icbc-testbed --private a) and its
client runs on a1 through impi-relay on its front-end a0
(docs/impi-relay.md): every message between the clients passes the relay.
"""
import csv
import os
import re
import subprocess

import pytest

from conftest import TOP, bed



def pytest_generate_tests(metafunc):
    if "d" in metafunc.fixturenames:
        dirs = metafunc.config.getoption("--impi-dirs").split()
        metafunc.parametrize("d", dirs, ids=dirs)


@pytest.fixture(scope="module")
def impi_clusters(prefix, work, request):
    cfg = request.config
    relay = cfg.getoption("--impi-relay")
    with bed(prefix, work, "pir" if relay else "pim",
             ["--clusters", "2", "--nodes", "2" if relay else "1", "--routers", "1",
              "--nic-rate", "1gbit", "--wan-rate", "2gbit",
              "--delay", cfg.getoption("--mpich-delay")] + (["--private", "a"] if relay else []),
             ["a1", "b0"] if relay else ["a0", "b0"], cfg.getoption("--keep")) as b:
        yield b


@pytest.fixture(scope="module")
def impi_run(impi_clusters, prefix, work, request):
    cfg = request.config
    out = os.path.join(work, "mpich-impi")
    lst = cfg.getoption("--mpich-list")
    sel = ["--retries", "1"]
    if lst == "ci":
        sel += ["--list", os.path.join(TOP, "test/mpich/ci-subset-2clusters")]
    elif lst != "full":
        sel += ["--list", os.path.abspath(lst)]
    # Embedded routers stay off: the clients reach each other by IMPI only,
    # and a router thread in the first process of a0 and b0 would add a
    # busy thread per test on two cores for nothing.
    argv = [os.path.join(TOP, "test/mpich/run-testsuite.sh"), "--mpi", prefix,
            "--label", "icbc", "--timeout", str(cfg.getoption("--mpich-timeout")),
            "--dirs", cfg.getoption("--impi-dirs"), "--testbed", impi_clusters.tb.name,
            "--impi", "a1;b0" if cfg.getoption("--impi-relay") else "a0;b0",
            "--path-if", "ext0",
            "--env", "MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0", "--out", out] + sel
    if cfg.getoption("--impi-relay"):
        argv += ["--impi-relay", "a0"]
    if cfg.getoption("--mpich-exclude"):
        argv += ["--exclude", os.path.abspath(cfg.getoption("--mpich-exclude"))]
    if cfg.getoption("--mpich-shard"):
        argv += ["--shard", cfg.getoption("--mpich-shard")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=4 * 3600)
    with open(out + ".log", "w") as f:
        f.write(r.stdout + r.stderr)
    return out, r.stdout


def test_mpich_directory_over_impi(d, impi_run):
    out, stdout = impi_run
    assert re.search(r"^[0-9]+ passed, [0-9]+ failed", stdout, re.M), \
        f"run-testsuite.sh printed no summary (see {out}.log)\n{stdout[-2000:]}"
    assert "inter-node data crossed ext0" in stdout, \
        f"the clients' data did not cross the WAN (see {out}.log)\n{stdout[-2000:]}"
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
