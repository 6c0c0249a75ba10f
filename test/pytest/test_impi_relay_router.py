"""The IMPI relay run by a private cluster's routers (docs/impi-relay.md,
"In the router file"; docs/routerfile.md, impi-relay), on an emulated
testbed whose cluster a is private (icbc-testbed --private a: only its
router node a0 reaches the WAN).

The user's router file for cluster a names its router and the line
`impi-relay server=B0:7400 port=7300`, and the foreign client as an `impi`
entry with the same server. icbc-router is started on a0 with that file, as
docs/router.md starts a daemon; the job inside is started with mpiexec and
the router file alone (ICBC_ROUTERFILE, no IMPI variable): it finds the
relay from the file. The other client is an ICBC job on b1 and b2 in the
place of another MPI, started with ICBC_IMPI_SERVER and ICBC_IMPI_CLIENT as
docs/impi.md tells a foreign client's user; impi-server runs on b0.
"""
import os
import re
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 120
SERVER_PORT, RELAY_PORT = 7400, 7300


@pytest.fixture(scope="module")
def private_bed(prefix, request):
    """Clusters a (private: a1 and a2 have fabric addresses only) and b,
    three nodes each, one router node each, 1 ms one way."""
    import conftest  # the suite's testbed helper (conftest.py)
    with conftest.bed(prefix, os.path.join(TOP, "_build", "test-pytest"), "rr",
                      ["--clusters", "2", "--nodes", "3", "--routers", "1", "--delay", "1ms",
                       "--private", "a"],
                      ["a1", "a2"], request.config.getoption("--keep")) as b:
        yield b


def node_addrs(bed):
    """node -> (fabric address, external address or '-')."""
    out = {}
    for line in open(os.path.join(bed.tb.state, "nodes")):
        if line.strip() and not line.startswith("#"):
            f = line.split()
            out[f[0]] = (f[3], f[4])
    return out


def private_routerfile(bed, work, server):
    """Cluster a as its user writes it: hosts, fabric, router, the relay
    line; b as the foreign IMPI client behind SERVER."""
    key = os.path.join(bed.tb.state, "routers.key")
    path = os.path.join(work, "private.conf")
    with open(path, "w") as f:
        f.write(f"# cluster a: private; b: another MPI, reached with IMPI\n"
                f"key {key}\n"
                f"cluster a\n"
                f"    hosts a0 a1 a2\n"
                f"    fabric 10.100.0.0/24\n"
                f"    router a0 fabric=10.100.0.1:7100 wan=10.200.0.1:7200\n"
                f"    impi-relay server={server} port={RELAY_PORT}\n"
                f"impi b server={server}\n")
    return path


def start_server(bed, work, b0, job):
    err = open(os.path.join(work, f"impi-server{job}.err"), "w+")
    p = subprocess.Popen(["ip", "netns", "exec", f"{bed.env['ICBC_TESTBED']}-b0",
                          os.path.join(bed.tb.prefix, "bin", "impi-server"), "-server", "2",
                          "-host", b0, "-listen", b0, "-port", str(SERVER_PORT),
                          "-timeout", str(TIMEOUT)],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline().strip()
    assert line == f"{b0}:{SERVER_PORT}", f"impi-server printed {line!r}: {open(err.name).read()}"
    return p, err


def job(prefix, env, hosts, program, work, name, extra):
    log = open(os.path.join(work, f"{name}.log"), "w+")
    job_env = dict(env)
    job_env.update(extra)
    p = subprocess.Popen([os.path.join(prefix, "bin", "mpiexec"), "-f", hosts, "-n", "2",
                          program, "2r", "2"], stdout=log, stderr=subprocess.STDOUT, env=job_env,
                         start_new_session=True)
    return p, log


def finish(procs):
    end = time.time() + TIMEOUT
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, end - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append("timeout")
    return codes


def test_private_cluster_through_the_relay_of_its_routers(private_bed, prefix, programs,
                                                          work):
    """Two IMPI jobs, one after the other, through one icbc-router daemon:
    the router logs that its relay waits at 10.100.0.1:7300 and that each
    job ended; impi_world (a ring, IMPI's short, long and synchronous
    messages both ways, a fan-in, collectives from every root) passes on
    all four ranks of each, every program and server exit 0."""
    bed = private_bed
    addrs = node_addrs(bed)
    b0 = addrs["b0"][1]
    server = f"{b0}:{SERVER_PORT}"
    conf = private_routerfile(bed, work, server)
    shown = subprocess.run([os.path.join(prefix, "bin", "icbc-routerfile"), conf],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"impi-relay server={server} port={RELAY_PORT} (run by its routers; the jobs inside " \
        f"start up at 10.100.0.1:{RELAY_PORT})" in shown.stdout, shown.stdout
    hosts_b = os.path.join(work, "hosts-b")
    with open(hosts_b, "w") as f:
        f.write("b1\nb2\n")
    pidfile = os.path.join(work, "relay-router-a0.pid")
    log = os.path.join(work, "relay-router-a0.log")
    for f in (pidfile, log):
        if os.path.exists(f):
            os.unlink(f)
    r = bed.tb.run_on("a0", [os.path.join(prefix, "bin", "icbc-router"), "--routerfile", conf,
                             "--host", "a0", "--daemon", "--pidfile", pidfile, "--logfile", log,
                             "--log-level", "info"], timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(open(pidfile).read())
    try:
        for n in (1, 2):
            srv, srv_err = start_server(bed, work, b0, n)
            a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, f"a{n}",
                           {"ICBC_ROUTERFILE": conf})
            b, b_log = job(prefix, bed.env, hosts_b, programs["impi_world"], work, f"b{n}",
                           {"ICBC_IMPI_SERVER": server, "ICBC_IMPI_CLIENT": "1"})
            codes = finish([a, b, srv])
            report = "\n".join(f"--- {name}\n{open(fh.name).read()}" for name, fh in
                               (("job a", a_log), ("job b", b_log), ("impi-server", srv_err)))
            report += f"\n--- icbc-router a0\n{open(log).read()}"
            assert codes == [0, 0, 0], f"job a, job b, impi-server: {codes}\n{report}"
            oks = re.findall(r"impi_world: rank (\d+) of 4 \(client (\d)\): ok", report)
            assert sorted(oks) == [("0", "0"), ("1", "0"), ("2", "1"), ("3", "1")], report
            deadline = time.time() + 10  # the relay logs the end after the last close
            while f"relay 0 of 1 of cluster a: job {n} ended\n" not in open(log).read() and \
                    time.time() < deadline:
                time.sleep(0.1)
            assert f"relay 0 of 1 of cluster a: job {n} ended\n" in open(log).read(), report
        assert "waiting for job 1 (the job inside starts up at " \
            f"10.100.0.1:{RELAY_PORT})" in open(log).read()
    finally:
        os.kill(pid, 15)
        deadline = time.time() + 10
        while os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.1)


def test_a_job_whose_impi_entries_name_another_server_is_told(private_bed, prefix, programs,
                                                             work):
    """A private cluster's job reaches IMPI only through its routers' relay:
    impi entries that name another server than the relay line's end MPI_Init
    with both named, and no process starts up."""
    bed = private_bed
    b0 = node_addrs(bed)["b0"][1]
    conf = private_routerfile(bed, work, f"{b0}:{SERVER_PORT}")
    text = open(conf).read().replace(f"impi b server={b0}:{SERVER_PORT}",
                                     f"impi b server={b0}:{SERVER_PORT + 1}")
    with open(conf, "w") as f:
        f.write(text)
    a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, "a-other",
                   {"ICBC_ROUTERFILE": conf})
    assert finish([a]) != [0]
    out = open(a_log.name).read()
    assert f"the impi entries name server {b0}:{SERVER_PORT + 1}, but cluster 'a' reaches IMPI " \
        f"through its routers' relay to {b0}:{SERVER_PORT} (impi-relay, line 7)" in out, out
