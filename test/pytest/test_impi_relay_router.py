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

from test_impi_clients import finish

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 120
SERVER_PORT, RELAY_PORT = 7400, 7300


@pytest.fixture(scope="module", params=[1, 2], ids=["1-router", "2-routers"])
def private_bed(prefix, request):
    """Clusters a (private: only its router nodes reach the WAN) and b, three
    nodes each, 1 ms one way; one router node per cluster, or two (a trunk
    of two relays, a0 the leader, a1 its follower)."""
    import conftest  # the suite's testbed helper (conftest.py)
    with conftest.bed(prefix, os.path.join(TOP, "_build", "test-pytest"),
                      f"rr{request.param}",
                      ["--clusters", "2", "--nodes", "3", "--routers", str(request.param),
                       "--delay", "1ms", "--private", "a"],
                      ["a1", "a2"], request.config.getoption("--keep")) as b:
        b.nrouters = request.param
        yield b


def node_addrs(bed):
    """node -> (cluster, role, fabric address, external address or '-')."""
    out = {}
    for line in open(os.path.join(bed.tb.state, "nodes")):
        if line.strip() and not line.startswith("#"):
            f = line.split()
            out[f[0]] = (f[1], f[2], f[3], f[4])
    return out


def private_routerfile(bed, work, server, auth=""):
    """Cluster a as its user writes it: hosts, fabric, its routers, the
    relay line (AUTH: its auth= attribute, if any); b as the foreign IMPI
    client behind SERVER."""
    key = os.path.join(bed.tb.state, "routers.key")
    routers = "".join(f"    router {n} fabric={a[2]}:7100 wan={a[3]}:7200\n"
                      for n, a in sorted(node_addrs(bed).items())
                      if a[0] == "a" and a[1] == "router")
    path = os.path.join(work, "private.conf")
    with open(path, "w") as f:
        f.write(f"# cluster a: private; b: another MPI, reached with IMPI\n"
                f"key {key}\n"
                f"cluster a\n"
                f"    hosts a0 a1 a2\n"
                f"    fabric 10.100.0.0/24\n"
                f"{routers}"
                f"    impi-relay server={server} port={RELAY_PORT}{auth}\n"
                f"impi b server={server}\n")
    return path


def start_server(bed, work, b0, job, args=()):
    err = open(os.path.join(work, f"impi-server{job}.err"), "w+")
    p = subprocess.Popen(["ip", "netns", "exec", f"{bed.env['ICBC_TESTBED']}-b0",
                          os.path.join(bed.tb.prefix, "bin", "impi-server"), "-server", "2",
                          "-host", b0, "-listen", b0, "-port", str(SERVER_PORT),
                          "-timeout", str(TIMEOUT)] + list(args),
                         stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline().strip()
    assert line == f"{b0}:{SERVER_PORT}", f"impi-server printed {line!r}: {open(err.name).read()}"
    return p, err


def job(prefix, env, hosts, program, work, name, extra, counts=("2r", "2")):
    """PROGRAM (impi_world) on two processes; COUNTS: the clients as it
    checks them ("2r": two processes behind a relay, "2r2" behind a trunk
    of two)."""
    log = open(os.path.join(work, f"{name}.log"), "w+")
    job_env = dict(env)
    job_env.update(extra)
    p = subprocess.Popen([os.path.join(prefix, "bin", "mpiexec"), "-f", hosts, "-n", "2",
                          program] + list(counts), stdout=log, stderr=subprocess.STDOUT, env=job_env,
                         start_new_session=True)
    return p, log


def hosts_b_file(work):
    """The hosts of the other client's job: b1 and b2."""
    path = os.path.join(work, "hosts-b")
    with open(path, "w") as f:
        f.write("b1\nb2\n")
    return path


def counts_of(bed):
    """impi_world's view of the two clients: cluster a's two processes
    behind its relay (or trunk of relays), b's two."""
    return ("2r" if bed.nrouters == 1 else f"2r{bed.nrouters}", "2")


def check_pair(procs, logs, routers):
    """Waits for job a, job b and impi-server (PROCS; their LOGS as open
    files) and checks that all exit 0 and that impi_world passed on the four
    ranks; returns the report (the logs and the routers' logs)."""
    codes = finish(procs)
    report = "\n".join(f"--- {name}\n{open(fh.name).read()}"
                       for name, fh in zip(("job a", "job b", "impi-server"), logs))
    report += "".join(f"\n--- icbc-router {r}\n{open(log).read()}"
                      for r, (_, _, log) in sorted(routers.items()))
    assert codes == [0, 0, 0], f"job a, job b, impi-server: {codes}\n{report}"
    oks = re.findall(r"impi_world: rank (\d+) of 4 \(client (\d)\): ok", report)
    assert sorted(oks) == [("0", "0"), ("1", "0"), ("2", "1"), ("3", "1")], report
    return report


def start_router(bed, prefix, node, conf, work):
    """icbc-router on NODE with router file CONF, as docs/router.md starts a
    daemon: (pid, pidfile, logfile)."""
    pidfile = os.path.join(work, f"relay-router-{node}.pid")
    log = os.path.join(work, f"relay-router-{node}.log")
    for f in (pidfile, log):
        if os.path.exists(f):
            os.unlink(f)
    r = bed.tb.run_on(node, [os.path.join(prefix, "bin", "icbc-router"), "--routerfile", conf,
                             "--host", node, "--daemon", "--pidfile", pidfile, "--logfile", log,
                             "--log-level", "info"], timeout=60)
    assert r.returncode == 0, r.stderr
    return int(open(pidfile).read()), pidfile, log


def start_routers(bed, prefix, conf, work):
    """icbc-router on every router node of cluster a: {node: (pid, pidfile,
    logfile)}."""
    return {n: start_router(bed, prefix, n, conf, work)
            for n, a in sorted(node_addrs(bed).items()) if a[0] == "a" and a[1] == "router"}


def stop_routers(routers):
    for pid, pidfile, _ in routers.values():
        try:
            os.kill(pid, 15)
        except ProcessLookupError:  # killed by the test: its pid file stays
            os.unlink(pidfile)
    deadline = time.time() + 10
    while any(os.path.exists(p) for _, p, _ in routers.values()) and time.time() < deadline:
        time.sleep(0.1)


def test_private_cluster_through_the_relay_of_its_routers(private_bed, prefix, programs,
                                                          work):
    """Two IMPI jobs, one after the other, through the relays that cluster
    a's router daemons run (one, or a trunk of two): the leader logs that it
    waits at 10.100.0.1:7300, every relay that each job ended; impi_world (a
    ring, IMPI's short, long and synchronous messages both ways, a fan-in,
    collectives from every root) passes on all four ranks of each job, every
    program and server exit 0."""
    bed = private_bed
    k = bed.nrouters
    b0 = node_addrs(bed)["b0"][3]
    server = f"{b0}:{SERVER_PORT}"
    conf = private_routerfile(bed, work, server)
    shown = subprocess.run([os.path.join(prefix, "bin", "icbc-routerfile"), conf],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"impi-relay server={server} port={RELAY_PORT} auth=none (run by its routers; the " \
        f"jobs inside start up at 10.100.0.1:{RELAY_PORT})" in shown.stdout, shown.stdout
    hosts_b = hosts_b_file(work)
    routers = start_routers(bed, prefix, conf, work)
    assert len(routers) == k, routers
    logs = {n: log for n, (_, _, log) in routers.items()}
    try:
        for n in (1, 2):
            srv, srv_err = start_server(bed, work, b0, n)
            counts = counts_of(bed)
            a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, f"a{n}",
                           {"ICBC_ROUTERFILE": conf}, counts)
            b, b_log = job(prefix, bed.env, hosts_b, programs["impi_world"], work, f"b{n}",
                           {"ICBC_IMPI_SERVER": server, "ICBC_IMPI_CLIENT": "1"}, counts)
            report = check_pair([a, b, srv], [a_log, b_log, srv_err], routers)
            for j, r in enumerate(sorted(logs)):
                ended = re.compile(rf"relay {j} of {k} of cluster a: job {n} ended; relayed "
                                   r"(\d+) packet\(s\): (\d+) cut through, (\d+) whole")
                deadline = time.time() + 10  # logged after the hosts' last close
                while not ended.search(open(logs[r]).read()) and time.time() < deadline:
                    time.sleep(0.1)
                m = ended.search(open(logs[r]).read())
                assert m, report
                # every relay of the trunk holds a block of the hosts on both
                # sides: the ring and the collectives pass through each
                assert int(m.group(1)) == int(m.group(2)) + int(m.group(3)) > 0, m.group(0)
        assert f"relay 0 of {k} of cluster a: waiting for job 1 (the job inside starts up at " \
            f"10.100.0.1:{RELAY_PORT})" in open(logs["a0"]).read()
    finally:
        stop_routers(routers)


def test_a_job_whose_impi_entries_name_another_server_is_told(private_bed, prefix, programs,
                                                             work):
    """A private cluster's job reaches IMPI only through its routers' relay:
    impi entries that name another server than the relay line's end MPI_Init
    with both named, and no process starts up."""
    bed = private_bed
    b0 = node_addrs(bed)["b0"][3]
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
        f"through its routers' relay to {b0}:{SERVER_PORT} (impi-relay, line " \
        f"{6 + bed.nrouters})" in out, out


def test_a_server_with_a_key_through_the_relay_of_its_routers(private_bed, prefix, programs,
                                                               work):
    """impi-server -auth key:FILE: the relay line's auth=key:FILE gives the
    routers' relays the key (toward the server, and asked of the job
    inside), and the job inside reads it from the router file too; the
    other client gives it as docs/impi.md says (ICBC_IMPI_KEY). One job,
    every rank ok; then a job inside without the key file's key (a wrong
    ICBC_IMPI_KEY) is refused at the relay, MPI_Init naming the key."""
    bed = private_bed
    b0 = node_addrs(bed)["b0"][3]
    server = f"{b0}:{SERVER_PORT}"
    keyfile = os.path.join(work, "impi.key")
    with open(keyfile, "w") as f:
        f.write("987654321\n")
    conf = private_routerfile(bed, work, server, " auth=key:impi.key")
    hosts_b = hosts_b_file(work)
    routers = start_routers(bed, prefix, conf, work)
    counts = counts_of(bed)
    try:
        srv, srv_err = start_server(bed, work, b0, "key", ["-auth", f"key:{keyfile}"])
        a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, "a-key",
                       {"ICBC_ROUTERFILE": conf}, counts)
        b, b_log = job(prefix, bed.env, hosts_b, programs["impi_world"], work, "b-key",
                       {"ICBC_IMPI_SERVER": server, "ICBC_IMPI_CLIENT": "1",
                        "ICBC_IMPI_KEY": "987654321"}, counts)
        report = check_pair([a, b, srv], [a_log, b_log, srv_err], routers)
        # the relay asks the job inside for the line's key
        a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, "a-wrong-key",
                       {"ICBC_ROUTERFILE": conf, "ICBC_IMPI_KEY": "1"}, counts)
        assert finish([a]) != [0]
        out = open(a_log.name).read()
        assert "IMPI server 10.100.0.1:7300: refused this client's key (it closed the " \
            "connection; is it the key the server was given?)" in out, out
    finally:
        stop_routers(routers)


@pytest.mark.full  # the default tier kills a standalone relay and a follower (test_impi_relay.py)
def test_a_router_that_dies_ends_both_jobs_with_an_error(private_bed, prefix, programs, work):
    """The router daemon whose thread is the relay (the leader a0; with a
    trunk, the follower a1) is killed while rank 0 (inside)
    and rank 1 (outside) wait for each other in MPI_Recv: both jobs end with
    MPI_Recv's error within 10 s, never a hang."""
    bed = private_bed
    b0 = node_addrs(bed)["b0"][3]
    server = f"{b0}:{SERVER_PORT}"
    conf = private_routerfile(bed, work, server)
    hosts_a, hosts_b = os.path.join(work, "hosts-a1"), os.path.join(work, "hosts-b1")
    for path, node in ((hosts_a, "a2"), (hosts_b, "b1")):
        with open(path, "w") as f:
            f.write(node + "\n")
    # the leader alone, or the follower of a trunk (its leader's death is the
    # case of one router)
    for victim in (["a0"] if bed.nrouters == 1 else ["a1"]):
        routers = start_routers(bed, prefix, conf, work)
        try:
            srv, srv_err = start_server(bed, work, b0, f"kill-{victim}")
            procs, logs = [], []
            for name, hosts, extra, src in (
                    ("a", hosts_a, {"ICBC_ROUTERFILE": conf}, "1"),
                    ("b", hosts_b, {"ICBC_IMPI_SERVER": server, "ICBC_IMPI_CLIENT": "1"}, "0")):
                log = open(os.path.join(work, f"recv-{name}-{victim}.log"), "w+")
                env = dict(bed.env)
                env.update(extra)
                procs.append(subprocess.Popen(
                    [os.path.join(prefix, "bin", "mpiexec"), "-f", hosts, "-n", "1",
                     programs["impi_recv"], src], stdout=log, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True))
                logs.append(log)
            started = re.compile(r"relay 0 of \d of cluster a: job 1 started: client 0, "
                                 r"1 inside host\(s\), 1 outside host\(s\)")
            deadline = time.time() + 60
            while not started.search(open(routers["a0"][2]).read()) and \
                    time.time() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.1)
            assert started.search(open(routers["a0"][2]).read()), open(routers["a0"][2]).read()
            time.sleep(1)  # both processes are in MPI_Recv
            os.kill(routers[victim][0], 9)
            killed = time.time()
            codes = finish(procs)
            took = time.time() - killed
            out = "".join(open(f.name).read() for f in logs)
            assert all(c not in (0, "timeout") for c in codes), f"{codes}\n{out}"
            assert took < 10, f"{took:.1f} s after the kill\n{out}"
            assert out.count("MPI_Recv failed") == 2, out
            assert "got" not in out, out
            finish([srv])
        finally:
            stop_routers(routers)


@pytest.fixture(scope="module")
def two_private_bed(prefix, request):
    """Clusters a and b private (only a0 and b0 reach the WAN), c public
    for impi-server; two nodes each, 1 ms one way."""
    import conftest  # the suite's testbed helper (conftest.py)
    with conftest.bed(prefix, os.path.join(TOP, "_build", "test-pytest"), "rp",
                      ["--clusters", "3", "--nodes", "2", "--routers", "1", "--delay", "1ms",
                       "--private", "a,b"],
                      ["a1:2"], request.config.getoption("--keep")) as b:
        yield b


def test_two_private_clusters_through_the_relays_of_their_routers(two_private_bed, prefix,
                                                                    programs, work):
    """P-P: an ICBC job in each private cluster, each started with its own
    router file alone (its cluster, its router, the relay line; the other
    cluster as an impi entry), both routers running their relays, the
    server on c0: a packet between them passes both relays. impi_world on
    all four ranks, every program and the server exit 0, both relays count
    packets."""
    bed = two_private_bed
    addrs = node_addrs(bed)
    c0 = addrs["c0"][3]
    server = f"{c0}:{SERVER_PORT}"
    key = os.path.join(bed.tb.state, "routers.key")
    confs, routers = {}, {}
    for me, other, n in (("a", "b", 100), ("b", "a", 101)):
        confs[me] = os.path.join(work, f"private-{me}.conf")
        with open(confs[me], "w") as f:
            f.write(f"key {key}\n"
                    f"cluster {me}\n"
                    f"    hosts {me}0 {me}1\n"
                    f"    fabric 10.{n}.0.0/24\n"
                    f"    router {me}0 fabric={addrs[me + '0'][2]}:7100 "
                    f"wan={addrs[me + '0'][3]}:7200\n"
                    f"    impi-relay server={server} port={RELAY_PORT}\n"
                    f"impi {other} server={server}\n")
        routers[f"{me}0"] = start_router(bed, prefix, f"{me}0", confs[me], work)
    hosts = {}
    for me in ("a", "b"):
        hosts[me] = os.path.join(work, f"pp-hosts-{me}")
        with open(hosts[me], "w") as f:
            f.write(f"{me}1:2\n")
    try:
        err = open(os.path.join(work, "pp-impi-server.err"), "w+")
        srv = subprocess.Popen(["ip", "netns", "exec", f"{bed.env['ICBC_TESTBED']}-c0",
                                os.path.join(prefix, "bin", "impi-server"), "-server", "2",
                                "-host", c0, "-listen", c0, "-port", str(SERVER_PORT),
                                "-timeout", str(TIMEOUT)],
                               stdout=subprocess.PIPE, stderr=err, text=True)
        assert srv.stdout.readline().strip() == server, open(err.name).read()
        a, a_log = job(prefix, bed.env, hosts["a"], programs["impi_world"], work, "pp-a",
                       {"ICBC_ROUTERFILE": confs["a"]}, ("2r", "2r"))
        b, b_log = job(prefix, bed.env, hosts["b"], programs["impi_world"], work, "pp-b",
                       {"ICBC_ROUTERFILE": confs["b"], "ICBC_IMPI_CLIENT": "1"}, ("2r", "2r"))
        report = check_pair([a, b, srv], [a_log, b_log, err], routers)
        for me in ("a", "b"):
            ended = re.compile(rf"relay 0 of 1 of cluster {me}: job 1 ended; relayed (\d+) "
                               r"packet\(s\)")
            log = routers[f"{me}0"][2]
            deadline = time.time() + 10
            while not ended.search(open(log).read()) and time.time() < deadline:
                time.sleep(0.1)
            m = ended.search(open(log).read())
            assert m and int(m.group(1)) > 0, report
    finally:
        stop_routers(routers)


def test_a_stranger_at_the_routers_relay_port_is_dropped_alone(private_bed, prefix, programs,
                                                              work):
    """Bytes that are no IMPI start-up, sent to the relay's start-up port
    from inside the cluster (a2), are dropped alone with a warning in the
    router's log; the job pair that follows passes, and the routers still
    run."""
    bed = private_bed
    b0 = node_addrs(bed)["b0"][3]
    server = f"{b0}:{SERVER_PORT}"
    conf = private_routerfile(bed, work, server)
    hosts_b = hosts_b_file(work)
    routers = start_routers(bed, prefix, conf, work)
    counts = counts_of(bed)
    try:
        hostile = ("import socket, time; s = socket.create_connection(('10.100.0.1', %d)); "
                   "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n' + bytes(range(256)) * 64); "
                   "time.sleep(0.5); s.close()" % RELAY_PORT)
        r = bed.tb.run_on("a2", ["python3", "-c", hostile], timeout=30)
        assert r.returncode == 0, r.stderr
        leader_log = routers["a0"][2]
        deadline = time.time() + 10
        while "dropped a connection to the inside port" not in open(leader_log).read() and \
                time.time() < deadline:
            time.sleep(0.1)
        assert "dropped a connection to the inside port before it named its client" in \
            open(leader_log).read(), open(leader_log).read()
        srv, srv_err = start_server(bed, work, b0, "stranger")
        a, a_log = job(prefix, bed.env, bed.hosts, programs["impi_world"], work, "a-stranger",
                       {"ICBC_ROUTERFILE": conf}, counts)
        b, b_log = job(prefix, bed.env, hosts_b, programs["impi_world"], work, "b-stranger",
                       {"ICBC_IMPI_SERVER": server, "ICBC_IMPI_CLIENT": "1"}, counts)
        check_pair([a, b, srv], [a_log, b_log, srv_err], routers)
        for pid, _, _ in routers.values():
            os.kill(pid, 0)  # still there
    finally:
        stop_routers(routers)
