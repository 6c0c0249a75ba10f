"""Fixtures of the pytest suites: an installed prefix, emulated testbeds
started and torn down as a user does it (icbc-testbed up, ". env"), the
test programs built with the prefix's mpicc, and icbc-router daemons.

    python3 -m pytest test/pytest [--prefix DIR] [--keep] [-k EXPR]

The run ends with "SKIP: TEST: REASON" for every skipped test and the line
"N passed, N failed, N skipped" that test/run.py counts (an expected
failure is a failure: no test here may be marked xfail).
"""
import contextlib
import glob
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "test", "harness"))

from testbed import Testbed, mpicc  # noqa: E402
from mpirun import router_stats, router_stats_now, vm_kib  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--prefix", default=os.path.join(TOP, "_install"),
                     help="installed ICBC (default ./_install)")
    parser.addoption("--keep", action="store_true", help="leave the testbeds up")
    parser.addoption("--fabric-api", default="", metavar="C=API,...",
                     help="the clusters' fabric APIs on the failover testbed (icbc-testbed's "
                          "option, e.g. a=ofi,b=ofi)")
    parser.addoption("--build", default=os.path.join(TOP, "_build"),
                     help="the build directory of libicbc and its tools (default ./_build)")
    g = parser.getgroup("mpich", "MPICH's test suite across two clusters (test_mpich_clusters.py)")
    g.addoption("--mpich-dirs", default="pt2pt coll comm datatype rma part",
                help="its test/mpi directories (default: %(default)s)")
    g.addoption("--mpich-list", default="ci",
                help="ci (test/mpich/ci-subset-2clusters), full (each directory's testlist) "
                     "or a file of 'DIR/prog np ...' lines")
    g.addoption("--impi-dirs", default="pt2pt coll comm datatype rma",
                help="the directories test_mpich_impi.py runs over IMPI (default: %(default)s)")
    g.addoption("--impi-relay", action="store_true",
                help="test_mpich_impi.py: cluster a private (icbc-testbed --private a), its "
                     "client on a1 through impi-relay on a0 (docs/impi-relay.md)")
    g.addoption("--mpich-shard", default="", metavar="K/N",
                help="of each directory's list only the lines K, K+N, ... (run-testsuite.sh "
                     "--shard), so that N runs cover it")
    g.addoption("--mpich-exclude", default="", metavar="FILE",
                help="leave out the list lines FILE names (run-testsuite.sh --exclude): "
                     "the long tests that run on their own (test/mpich/long-rma.list)")
    g.addoption("--mpich-policies", default="",
                help="policies to run it under (default: the router file's, aggregate)")
    g.addoption("--mpich-delay", default="100us", help="the WAN's one-way delay")
    g.addoption("--mpich-timeout", type=int, default=120, help="each test's time limit, s")
    parser.addoption("--npb", default=os.environ.get("ICBC_NPB_DIR", ""),
                     help="NPB 3.4-MPI sources for test_npb.py (default $ICBC_NPB_DIR; "
                          "benchmarks/README.md, NPB)")
    parser.addoption("--errors-repeat", type=int, default=1, metavar="N",
                     help="run each test that expects an MPI error N times (each time it "
                          "must give the promised error)")


@pytest.fixture(scope="session")
def prefix(request):
    p = os.path.abspath(request.config.getoption("--prefix"))
    if not os.access(os.path.join(p, "bin", "mpiexec"), os.X_OK):
        pytest.exit(f"no mpiexec in {p}/bin: build and install first (./quickstart.sh build)", 2)
    return p


@pytest.fixture(scope="session")
def work():
    w = os.path.join(TOP, "_build", "test-pytest")
    os.makedirs(w, exist_ok=True)
    return w


@pytest.fixture(scope="session")
def programs(prefix, work):
    """test/mpi/*.c and the demo built with the prefix's mpicc: name -> executable."""
    exes = {}
    for src in sorted(glob.glob(os.path.join(TOP, "test", "mpi", "*.c"))) + \
            [os.path.join(TOP, "examples", "icbc_demo.c")]:
        name = os.path.splitext(os.path.basename(src))[0]
        exe = os.path.join(work, name)
        if not mpicc(prefix, src, exe, exe + ".build.log"):
            pytest.fail(f"{name} does not build (see {exe}.build.log)")
        exes[name] = exe
    return exes


class Bed:
    """A testbed that is up: its Testbed, the user's environment after
    ". env", and a hosts file that alternates the clusters."""

    def __init__(self, tb, env, hosts):
        self.tb, self.env, self.hosts = tb, env, hosts

    @property
    def routerfile(self):
        return os.path.join(self.tb.state, "routers.conf")


@contextlib.contextmanager
def bed(prefix, work, name, args, hosts, keep):
    tb = Testbed(name, prefix, args, os.path.join(work, name))
    tb.up()
    try:
        path = os.path.join(tb.work, "hosts")
        with open(path, "w") as f:
            f.write("\n".join(hosts) + "\n")
        yield Bed(tb, tb.user_env(), path)
    finally:
        if keep:
            tb.stop_daemons()
        else:
            tb.down()


@pytest.fixture(scope="session")
def one_cluster(prefix, work, request):
    """One cluster of two nodes (icbc-testbed's defaults); the ranks go round
    robin over a0 and a1, so neighbouring ranks talk over the fabric."""
    with bed(prefix, work, "mt", ["--clusters", "1", "--nodes", "2"], ["a0", "a1"],
             request.config.getoption("--keep")) as b:
        yield b


@pytest.fixture(scope="session")
def two_clusters(prefix, work, request):
    """Two clusters of two nodes, one router each, NIC 1 Gbit/s, WAN 2 Gbit/s,
    1 ms one way; ranks alternate a0 b0 a1 b1, so every pair i, i^1 crosses
    the WAN."""
    with bed(prefix, work, "pc",
             ["--clusters", "2", "--nodes", "2", "--routers", "1", "--nic-rate", "1gbit",
              "--wan-rate", "2gbit", "--delay", "1ms"],
             ["a0", "b0", "a1", "b1"], request.config.getoption("--keep")) as b:
        yield b


@pytest.fixture(scope="session")
def mixed_clusters(prefix, work, request):
    """Two clusters of two nodes, both router nodes: cluster a on UCX, b on
    libfabric (the router file's fabric-api lines, which icbc-testbed writes
    from --fabric-api); NIC 1 Gbit/s, WAN 2 Gbit/s, 1 ms one way; ranks
    alternate a0 b0 a1 b1."""
    with bed(prefix, work, "pm",
             ["--clusters", "2", "--nodes", "2", "--routers", "2", "--fabric-api", "b=ofi",
              "--nic-rate", "1gbit", "--wan-rate", "2gbit", "--delay", "1ms"],
             ["a0", "b0", "a1", "b1"], request.config.getoption("--keep")) as b:
        yield b


class Daemons:
    """icbc-router daemons on the router nodes, started as docs/router.md
    says, bounded to 16 MiB of payload and 24 MiB resident."""
    MEMORY = 16 << 20
    RSS = 24 << 20

    def __init__(self, b, nodes):
        self.bed = b
        self.nodes = nodes
        self.pids = {}
        self.rss_at_start = {}

    def start(self):
        for n in self.nodes:
            self.pids[n] = self.bed.tb.start_router(
                n, ["--max-memory", str(self.MEMORY), "--max-rss", str(self.RSS)])
            self.rss_at_start[n] = vm_kib(self.pids[n], "VmRSS")

    def log(self, node):
        return os.path.join(self.bed.tb.work, f"router-{node}.log")

    def stats(self, node):
        """The counters the router logged last (at exit, once stopped)."""
        return router_stats(self.log(node))

    def stats_now(self, node):
        """The running router's counters, asked for now (SIGUSR1)."""
        return router_stats_now(self.pids[node], self.log(node))

    def stop(self):
        self.bed.tb.stop_daemons()


@pytest.fixture
def daemons(two_clusters):
    d = Daemons(two_clusters, ["a0", "b0"])
    d.start()
    yield d
    d.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A module's DEFAULT_TIER names, per test function, the parameter sets
    the default tier runs (a list of dicts, each matching a case when every
    key has that value); its other cases get the mark full. Runs before
    -m selects."""
    for item in items:
        subset = getattr(item.module, "DEFAULT_TIER", {}).get(item.originalname)
        if subset is None:
            continue
        params = item.callspec.params if hasattr(item, "callspec") else {}
        if not any(all(params.get(k) == v for k, v in want.items()) for want in subset):
            item.add_marker(pytest.mark.full)


def pytest_terminal_summary(terminalreporter):
    """The skips by name and reason, and the summary line test/run.py counts."""
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = sum(len(stats.get(k, [])) for k in ("failed", "error", "xfailed", "xpassed"))
    skipped = stats.get("skipped", [])
    for rep in skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        terminalreporter.write_line(f"SKIP: {rep.nodeid}: {reason}")
    terminalreporter.write_line(f"{passed} passed, {failed} failed, {len(skipped)} skipped")
