"""Where routers run (docs/routerfile.md, router-bind; docs/router.md,
--bind), on the two_clusters testbed.

The router file of these tests is the testbed's with one line added in
cluster a's section, "router-bind auto", as a user would write it; the job
finds it through ICBC_ROUTERFILE, the variable the env file sets (here to
the copy). ICBC_LOG_LEVEL=info is set to read where each process and
router says it runs. Every node of the testbed has two CPUs and NICs
that hwloc cannot place (veth), so auto chooses the last CPU.
"""
import os
import re
import time

import pytest

from mpirun import run_mpi


def cpus():
    return sorted(os.sched_getaffinity(0))


@pytest.fixture
def bind_routerfile(two_clusters, work):
    src = two_clusters.env["ICBC_ROUTERFILE"]
    text = open(src).read()
    assert "\ncluster a\n" in text
    text = text.replace("\ncluster a\n", "\ncluster a\n    router-bind auto\n", 1)
    # a relative key path is relative to the file: the copy names it absolutely
    key = os.path.join(os.path.dirname(src), "routers.key")
    text = re.sub(r"(?m)^key .*$", f"key {key}", text)
    path = os.path.join(work, "routers-bind.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_embedded_router_and_processes_of_its_host(two_clusters, programs, work, prefix,
                                                   bind_routerfile):
    """Cluster a's embedded router runs on the last CPU of a0; rank 0, on
    a0 and bound by nothing, runs on the other CPUs; cluster b's router
    (no router-bind line) is not bound; the data crosses right."""
    if len(cpus()) < 2:
        pytest.skip("hardware: one CPU")
    last = cpus()[-1]
    r = run_mpi(prefix, dict(two_clusters.env, ICBC_ROUTERFILE=bind_routerfile),
                programs["p2p_sizes"], 4, work, name="bind-embedded",
                extra_env={"ICBC_LOG_LEVEL": "info"}, timeout=180)
    assert r.ok, r.describe()
    m = re.search(r"router a/0: bound to CPU\(s\) (\S+) \(auto: (.*?)\); host: (.*)$", r.output,
                  re.M)
    assert m, r.describe()
    assert m.group(1) == str(last), r.describe()
    assert "core(s)" in m.group(3)
    assert re.search(r"router b/0: not bound \(none", r.output), r.describe()
    placed = re.findall(r"\[icbc rank (\d+)\] info: runs on CPUs (\S+) \(the router's left to it\)"
                        r"; router a0 of this host: router-bind auto", r.output)
    assert len(placed) == 1, r.describe()  # one process runs on a0
    rank, where = placed[0]
    assert str(last) not in where.split(","), r.describe()


def test_router_daemon_bind_option(two_clusters, work, prefix, bind_routerfile):
    """icbc-router --bind 0 binds the daemon to CPU 0 (over the router
    file's auto for cluster a); --bind with a value that is none of auto,
    none and a CPU list is refused with the option named."""
    tb = two_clusters.tb
    pidfile = os.path.join(work, "bind-router-a0.pid")
    log = os.path.join(work, "bind-router-a0.log")
    if os.path.exists(log):
        os.unlink(log)
    r = tb.run_on("a0", [os.path.join(prefix, "bin", "icbc-router"), "--routerfile",
                         bind_routerfile, "--host", "a0", "--bind", "0", "--daemon",
                         "--pidfile", pidfile, "--logfile", log], timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        pid = int(open(pidfile).read())
        allowed = os.sched_getaffinity(pid)
        assert allowed == {0}, allowed
        want = re.compile(r"router a/0: bound to CPU\(s\) 0 \(the CPU list given")
        deadline = time.time() + 10  # the line follows the start line the parent waits for
        while not want.search(text := open(log).read()) and time.time() < deadline:
            time.sleep(0.1)
        assert want.search(text), text
    finally:
        os.kill(pid, 15)
        deadline = time.time() + 10  # its addresses free for the next test
        while os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.1)
    bad = tb.run_on("a0", [os.path.join(prefix, "bin", "icbc-router"), "--routerfile",
                           bind_routerfile, "--host", "a0", "--bind", "fast"], timeout=60)
    assert bad.returncode != 0
    assert "--bind: 'fast' is not auto, none or a CPU list" in bad.stderr, bad.stderr


def test_processes_leave_a_daemons_cpus_to_it(two_clusters, programs, work, prefix):
    """A router daemon bound by its own --bind (the testbed's router file
    has no router-bind line) tells its CPUs when a process registers; rank 0,
    on its host and bound by nothing, moves off them and says so; the other
    ranks, on hosts without a bound router, stay where they were."""
    if len(cpus()) < 2:
        pytest.skip("hardware: one CPU")
    last = cpus()[-1]
    tb = two_clusters.tb
    pidfile = os.path.join(work, "told-router-a0.pid")
    log = os.path.join(work, "told-router-a0.log")
    for f in (pidfile, log):
        if os.path.exists(f):
            os.unlink(f)
    r = tb.run_on("a0", [os.path.join(prefix, "bin", "icbc-router"), "--routerfile",
                         two_clusters.env["ICBC_ROUTERFILE"], "--host", "a0", "--bind", str(last),
                         "--daemon", "--pidfile", pidfile, "--logfile", log], timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(open(pidfile).read())
    try:
        assert os.sched_getaffinity(pid) == {last}
        job = run_mpi(prefix, two_clusters.env, programs["p2p_sizes"], 4, work,
                      name="bind-told", extra_env={"ICBC_LOG_LEVEL": "info"}, timeout=180)
        assert job.ok, job.describe()
        assert "uses the router already listening" in job.output, job.describe()
        placed = re.findall(r"\[icbc rank (\d+)\] info: runs on CPUs (\S+) \(the router's left to "
                            r"it\); router a0 of this host: bound to CPU\(s\) (\S+) \(told by the "
                            r"router\)", job.output)
        assert len(placed) == 1, job.describe()  # one process runs on a0
        rank, where, told = placed[0]
        assert told == str(last), job.describe()
        assert str(last) not in where.split(","), job.describe()
        assert len(re.findall(r"info: runs on CPUs", job.output)) == 1, job.describe()
    finally:
        os.kill(pid, 15)
        deadline = time.time() + 10  # its addresses free for the next test
        while os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.1)
