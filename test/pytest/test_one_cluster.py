"""MPI tests of an ICBC install on one emulated cluster of two nodes, started
as a user does: ". env" of the testbed, then mpiexec with the env file's
host file. No UCX device is pinned: the testbed's router file names the
cluster's fabric network, and the processes open UCX on it.

The matrix lists the ordinary cases (exit 0 and the test's success line);
ERRORS the cases that must end with the MPI error they promise, within their
time limit (--errors-repeat N runs each N times). A variable a case sets is
named in its row, with the reason.
"""
import dataclasses
import os
import re

import pytest

from mpirun import run_mpi


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    program: str
    np: int
    env: tuple = ()         # (name, value) pairs the case exists to test
    args: tuple = ()
    mpiexec_args: tuple = ()
    expect: str = None      # the promised error (a regex); None: success


MATRIX = [
    Case("icbc_demo", "icbc_demo", 4),
    Case("p2p_sizes", "p2p_sizes", 4),
    # the eager limit raised, and zero (every message by rendezvous)
    Case("p2p_sizes-eager64k", "p2p_sizes", 4, (("MPIR_CVAR_CH4_ICBC_EAGER_LIMIT", "65536"),)),
    Case("p2p_sizes-all-rendezvous", "p2p_sizes", 2, (("MPIR_CVAR_CH4_ICBC_EAGER_LIMIT", "0"),)),
    # more ranks than cores, yielding between polls
    Case("p2p_sizes-yield", "p2p_sizes", 6, (("MPIR_CVAR_CH4_ICBC_YIELD", "1"),)),
    Case("rma_coll", "rma_coll", 4),
    Case("rma_coll-3ranks", "rma_coll", 3),
    # an idle rank's CPU use with yielding on and off (the test measures it)
    Case("idle_wait-yield", "idle_wait", 2, (("MPIR_CVAR_CH4_ICBC_YIELD", "1"),),
         ("--max-cpu", "0.25")),
    Case("idle_wait-busy-poll", "idle_wait", 2, (("MPIR_CVAR_CH4_ICBC_YIELD", "0"),),
         ("--min-cpu", "0.6")),
    Case("spawn_error", "spawn_error", 2),
    Case("stress-quick", "stress", 4, args=("--quick",)),
    Case("stress-quick-rendezvous", "stress", 3, (("MPIR_CVAR_CH4_ICBC_EAGER_LIMIT", "0"),),
         ("--quick", "--seed", "2")),
]

ERRORS = [
    Case("p2p_sizes-bad-device", "p2p_sizes", 2,
         (("MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES", "nosuchdev0"),),
         expect=r"icbc netmod: UCX device 'nosuchdev0' \(MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES="
                r"nosuchdev0\) is not a network interface of host a[01]"),
    # a business card corrupted on purpose (the netmod's fault injection)
    Case("p2p_sizes-corrupt-card", "p2p_sizes", 2, (("MPIR_CVAR_CH4_ICBC_FAULT_INJECT", "bcard"),),
         expect=r"business card of rank [0-9]+ is corrupt"),
    # a rank killed: the job ends (hydra's kill message or the netmod's error), never hangs
    Case("peer_death", "peer_death", 2, expect=r"icbc|KILLED|BAD TERMINATION|signal 9"),
    # with peer errors on, the survivor's MPI call fails with the error naming
    # the lost rank; -disable-auto-cleanup (a user's choice when the
    # application handles errors) keeps hydra from killing it first
    Case("peer_death-peer-errors", "peer_death", 2, (("MPIR_CVAR_CH4_ICBC_PEER_ERRORS", "1"),),
         ("--send",), ("-disable-auto-cleanup",),
         expect=r"MPI_Send to the dead rank 1 failed: .*cannot communicate with rank 1"),
    # a whole message larger than MPIDIG can unpack: refused at MPI_Init
    Case("p2p_sizes-stripe-threshold-too-large", "p2p_sizes", 2,
         (("MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD", "1048576"),),
         expect=r"MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD=1048576 is above "
                r"MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE=69632"),
    # one received byte flipped before the payload check
    Case("stress-corrupt", "stress", 2, args=("--quick", "--count", "200", "--corrupt"),
         expect=r"payload mismatch"),
]


def run_case(case, one_cluster, programs, work, prefix, tag):
    return run_mpi(prefix, one_cluster.env, programs[case.program], case.np, work,
                   name=f"one-{case.name}{tag}", extra_env=dict(case.env), args=case.args,
                   mpiexec_args=case.mpiexec_args, timeout=180)


@pytest.mark.parametrize("case", MATRIX, ids=lambda c: c.name)
def test_case(case, one_cluster, programs, work, prefix):
    r = run_case(case, one_cluster, programs, work, prefix, "")
    assert r.ok, r.describe()


def pytest_generate_tests(metafunc):
    if "rep" in metafunc.fixturenames:
        n = metafunc.config.getoption("--errors-repeat")
        metafunc.parametrize("rep", range(1, n + 1), ids=lambda i: f"run{i}")


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c.name)
def test_promised_error(case, rep, one_cluster, programs, work, prefix):
    r = run_case(case, one_cluster, programs, work, prefix, f"-{rep}")
    assert not r.timed_out, f"hung\n{r.describe()}"
    assert r.failed_with(case.expect), \
        f"expected an error matching {case.expect!r}\n{r.describe()}"


@pytest.mark.parametrize("wrapper", ["mpicc", "mpicxx", "mpifort"])
def test_wrapper_compiler_is_plain(wrapper, prefix):
    """The installed compiler wrappers name the compiler itself: a build tool
    used while building MPICH (ccache) must not be needed where users compile."""
    import shutil
    import subprocess
    r = subprocess.run([os.path.join(prefix, "bin", wrapper), "-show"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert r.returncode == 0, r.stdout
    compiler = r.stdout.split()[0]
    assert os.path.basename(compiler) in ("gcc", "g++", "gfortran"), r.stdout
    assert "ccache" not in r.stdout, r.stdout
    assert shutil.which(compiler), f"{wrapper} names {compiler}, which is not on PATH"


@pytest.mark.parametrize("run", [1, 2, 3], ids=lambda i: f"run{i}")
def test_without_a_router_file(run, one_cluster, programs, work, prefix):
    """README's "Running" on the testbed: mpiexec with no router file (the
    env file's launcher, which reaches the namespaces, without its
    ICBC_ROUTERFILE). Each node also has mgmt0, whose network does not
    route between nodes: UCX left to itself offered it and a peer that
    picked it failed at the first message ("No route to host"). MPI_Init's
    trial of the interfaces must give fab0 and never mgmt0 (ext0, which
    also joins the cluster's nodes, may be among them: nothing says it faces
    a WAN), every time (three runs). ICBC_LOG_LEVEL=info makes every
    process print what the trial chose."""
    env = {k: v for k, v in one_cluster.env.items() if k != "ICBC_ROUTERFILE"}
    r = run_mpi(prefix, env, programs["p2p_sizes"], 4, work, name=f"one-no-routerfile-{run}",
                extra_env={"ICBC_LOG_LEVEL": "info"}, timeout=180)
    assert r.ok, r.describe()
    chosen = re.findall(r"UCX devices from the start-up trial with process \d+ on another "
                        r"node: (\S+)$", r.output, re.M)
    assert len(chosen) == 4, r.describe()
    for devs in chosen:
        assert "fab0" in devs.split(",") and "mgmt0" not in devs.split(","), \
            f"{chosen}\n{r.describe()}"
