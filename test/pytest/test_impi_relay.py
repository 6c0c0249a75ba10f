"""ICBC jobs joining an IMPI job through impi-relay (docs/impi-relay.md), on
this host: impi-server on 127.0.0.1, each relay with an inside and an
outside address of its own (relay J of client K: 127.0.1K.(2J+1) and
127.0.1K.(2J+2)), the client behind it given the leader's printed address
as ICBC_IMPI_SERVER, the others the server's, exactly as a user starts
them; a trunk's other relays started with -leader and -rank. LAM/MPI through the
relay, and a private testbed cluster, are in test_impi_lam.py.

    python3 -m pytest test/pytest/test_impi_relay.py [--prefix DIR] [--build DIR]
"""
import os
import re
import signal
import subprocess
import time

import pytest

from test_impi_clients import client, finish, impi_pingpong, read, report_of, start_server  # noqa: F401 (a fixture)

TIMEOUT = 120


def relay_addrs(k, j=0):
    return f"127.0.{10 + k}.{2 * j + 1}", f"127.0.{10 + k}.{2 * j + 2}"


@pytest.fixture(scope="session")
def relay_exe(request):
    exe = os.path.join(os.path.abspath(request.config.getoption("--build")), "impi-relay")
    if not os.access(exe, os.X_OK):
        pytest.fail(f"no {exe}: build libicbc first (./quickstart.sh build)")
    return exe


def start_relay(relay_exe, server, work, k, args=(), trunks=1):
    """impi-relay for client K (with TRUNKS > 1 the leader of a trunk, told its
    followers' inside addresses as the docs advise, and its followers):
    (leader process, the address it printed, its stderr file, the followers'
    processes)."""
    inside, outside = relay_addrs(k)
    err = open(os.path.join(work, f"impi-relay{k}.err"), "w+")
    extra = ["-trunks", str(trunks), "-followers",
             ",".join(relay_addrs(k, j)[0] for j in range(1, trunks))] if trunks > 1 else []
    p = subprocess.Popen([relay_exe, "-server", server, "-inside", inside, "-outside", outside,
                          "-timeout", str(TIMEOUT)] + extra + list(args),
                         stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline().strip()
    if not line:
        p.kill()
        pytest.fail("impi-relay printed no address: " + read(err))
    assert line.startswith(inside + ":"), line
    followers = []
    for j in range(1, trunks):
        fin, fout = relay_addrs(k, j)
        ferr = open(os.path.join(work, f"impi-relay{k}.{j}.err"), "w+")
        f = subprocess.Popen([relay_exe, "-server", server, "-inside", fin, "-outside", fout,
                              "-leader", line, "-rank", str(j), "-timeout", str(TIMEOUT)],
                             stdout=subprocess.PIPE, stderr=ferr, text=True)
        joined = f.stdout.readline()
        assert joined.startswith(f"relay {j} of the trunk led by {line}"), joined + read(ferr)
        followers.append((f, ferr))
    return p, line, err, followers


def run_relayed(prefix, relay_exe, program, work, counts, args=None):
    """An IMPI job of ICBC clients of PROGRAM; COUNTS are strings, "N" for a
    client of N processes, "Nr" for one behind a relay of its own, "NrT"
    behind a trunk of T relays. ARGS (default: COUNTS) go to every process.
    Returns the exit codes (clients in rank order, the server, the relays)
    and the logs."""
    server, addr, server_err = start_server(prefix, len(counts), work)
    relays, clients = {}, {}
    for k, c in enumerate(counts):
        if "r" in c:
            t = c.split("r")[1]
            relays[k] = start_relay(relay_exe, addr, work, k, trunks=int(t) if t else 1)
    for k, c in reversed(list(enumerate(counts))):
        where = relays[k][1] if k in relays else addr
        clients[k] = client(prefix, program, work, k, int(c.split("r")[0]),
                            counts if args is None else args,
                            {"ICBC_IMPI_SERVER": where, "ICBC_IMPI_CLIENT": str(k)})
    order = sorted(clients)
    procs = [relays[k][0] for k in relays] + [f for k in relays for f, _ in relays[k][3]]
    codes = finish([clients[k][0] for k in order] + [server] + procs)
    logs = {f"client{k}": read(clients[k][1]) for k in order}
    logs["impi-server"] = read(server_err)
    for k in relays:
        logs[f"impi-relay{k}"] = read(relays[k][2]) + relays[k][0].stdout.read()
        for j, (f, ferr) in enumerate(relays[k][3], 1):
            logs[f"impi-relay{k}.{j}"] = read(ferr) + f.stdout.read()
    return codes, logs


@pytest.fixture
def case_dir(work, request):
    d = os.path.join(work, "impi-relay", request.node.name.replace("/", "_"))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.mark.parametrize("counts", [("2", "2r"), ("3r", "1"), ("2r", "2r"), ("1", "2r", "1"),
                                    ("3", "4r2"), ("5r4", "2"), ("2r2", "3r3"), ("1", "3r2", "2")],
                         ids=["2+2r", "3r+1", "2r+2r", "1+2r+1", "3+4r2", "5r4+2", "2r2+3r3",
                              "1+3r2+2"])
def test_icbc_clients_through_relays(prefix, relay_exe, programs, case_dir, counts):
    """impi_world across the clients, some behind relays (P-G, and P-P with
    two relays): size and ranks, the IMPI attributes as the relay makes them
    (one host for a client behind it, seen from outside; one for every other
    client, seen from behind it), a ring, IMPI's short, long and synchronous
    messages of 0 B to 1 MiB both ways, a fan-in of several packets from
    every rank to the first and to the last (packets of several hosts for
    one connection of a relay, some cut through, the others behind them),
    wildcards, every collective of
    impi_world from every root, MPI_Comm_split. "NrT": a trunk of T relays,
    each holding a block of the processes on each side, so that packets
    cross between the relays of the trunk too. Every process, the server
    and every relay exit 0."""
    codes, logs = run_relayed(prefix, relay_exe, programs["impi_world"], case_dir, counts)
    report = report_of(logs)
    assert codes == [0] * len(codes), f"exit codes (clients, server, relays): {codes}\n{report}"
    total = sum(int(c.split("r")[0]) for c in counts)
    oks = re.findall(r"impi_world: rank (\d+) of (\d+) \(client \d+\): ok", report)
    assert sorted(int(r) for r, _ in oks) == list(range(total)), report
    for k, c in enumerate(counts):
        if "r" in c:
            assert f"relaying client {k}: {int(c.split('r')[0])} inside host(s)" in \
                logs[f"impi-relay{k}"], report
            trunk = int(c.split("r")[1] or 1)
            for name in [f"impi-relay{k}"] + [f"impi-relay{k}.{j}" for j in range(1, trunk)]:
                m = re.search(r"^relayed (\d+) packet\(s\): (\d+) cut through, (\d+) whole "
                              r"\((\d+) of them behind a packet in progress\)$", logs[name], re.M)
                assert m, f"{name} did not count its packets\n{report}"
                print(f"{name}: {m.group(0)}")
                assert int(m.group(1)) == int(m.group(2)) + int(m.group(3)) and \
                    int(m.group(4)) <= int(m.group(3)), m.group(0)
                # a relay alone on the way of the 1 MiB ping-pong (the first
                # and the last rank) has its packets from the hosts: 64 KiB of
                # payload each (DATALEN), longer than one read of the relay
                # (64 KiB with the header), so each is still arriving when
                # its first read ends and goes on then
                if trunk == 1 and k in (0, len(counts) - 1):
                    assert int(m.group(2)) >= 16, m.group(0)


@pytest.mark.parametrize("counts", [("2", "2r"), ("2", "3r2")], ids=["2+2r", "2+3r2"])
def test_one_sided_through_a_relay(prefix, relay_exe, programs, case_dir, counts):
    """Puts, gets and accumulates between an ICBC client behind a relay (or
    a trunk of two) and one outside: ICBC's own packets (IMPI_PK_ICBC) pass
    the relays as IMPI's do, their process ids rewritten."""
    codes, logs = run_relayed(prefix, relay_exe, programs["rma_coll"], case_dir, counts, args=())
    report = report_of(logs)
    assert codes == [0] * len(codes), f"exit codes (clients, server, relay): {codes}\n{report}"
    assert "No Errors" in logs["client0"], report


def test_a_relay_that_dies_ends_both_jobs_with_an_error(prefix, relay_exe, programs, case_dir):
    """Client 0 (rank 0) waits in MPI_Recv for rank 1 and client 1, behind
    the relay, for rank 0; the relay is killed once it relays. Both jobs end
    with MPI_Recv's error within 10 s, never a hang."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err, _ = start_relay(relay_exe, addr, case_dir, 1)
    try:
        p1, log1 = client(prefix, programs["impi_recv"], case_dir, 1, 1, ("0",),
                          {"ICBC_IMPI_SERVER": raddr, "ICBC_IMPI_CLIENT": "1"})
        p0, log0 = client(prefix, programs["impi_recv"], case_dir, 0, 1, ("1",),
                          {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0"})
        line = relay.stdout.readline()
        assert line.startswith("relaying client 1"), line + read(relay_err)
        time.sleep(1)  # both processes are in MPI_Recv
        relay.send_signal(signal.SIGKILL)
        killed = time.time()
        codes = finish([p0, p1], timeout=30)
        took = time.time() - killed
        out = read(log0) + read(log1)
        assert all(c not in (0, "timeout") for c in codes), f"{codes}\n{out}"
        assert took < 10, f"{took:.1f} s after the kill\n{out}"
        assert out.count("MPI_Recv failed") == 2, out
        assert "got" not in out, out
    finally:
        for p in (relay, server):
            p.kill()
            p.wait()


def test_a_follower_relay_that_dies_ends_both_jobs_with_an_error(prefix, relay_exe, programs,
                                                                 case_dir):
    """Client 1 (two processes, two hosts) behind a trunk of two relays,
    client 0 outside; every process waits in MPI_Recv for a process of the
    other client. The second relay of the trunk is killed once it relays:
    the leader sees its link close and ends too, and both jobs end with
    MPI_Recv's error within 10 s."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err, followers = start_relay(relay_exe, addr, case_dir, 1, trunks=2)
    follower = followers[0][0]
    try:
        p1, log1 = client(prefix, programs["impi_recv"], case_dir, 1, 2, ("0",),
                          {"ICBC_IMPI_SERVER": raddr, "ICBC_IMPI_CLIENT": "1"})
        p0, log0 = client(prefix, programs["impi_recv"], case_dir, 0, 1, ("2",),
                          {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0"})
        line = follower.stdout.readline()
        assert line.startswith("relaying client 1"), line + read(followers[0][1])
        time.sleep(1)  # every process is in MPI_Recv
        follower.send_signal(signal.SIGKILL)
        killed = time.time()
        codes = finish([p0, p1, relay], timeout=30)
        took = time.time() - killed
        out = read(log0) + read(log1)
        assert all(c not in (0, "timeout") for c in codes[:2]), f"{codes}\n{out}"
        assert took < 10, f"{took:.1f} s after the kill\n{out}"
        assert out.count("MPI_Recv failed") == 3, out
        assert codes[2] == 1 and "relay 1" in read(relay_err), read(relay_err)
    finally:
        for p in (relay, follower, server):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_hostile_packet_at_the_relay_ends_the_job_with_its_reason(prefix, relay_exe, programs,
                                                                   impi_pingpong, case_dir):
    """A host outside (impi_pingpong as client 0) sends the relay a packet
    of an unknown type for the client behind it: the relay refuses it,
    exits 1 naming the host and the reason, and closes every connection, so
    the ICBC job waiting in MPI_Recv ends with an error, never a hang."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err, _ = start_relay(relay_exe, addr, case_dir, 1)
    try:
        hlog = open(os.path.join(case_dir, "hostile.log"), "w+")
        h = subprocess.Popen([impi_pingpong, "--server", addr, "--client", "0",
                              "--host", "127.0.0.2", "--peer", "1", "--hostile", "type",
                              "--timeout", "60"], stdout=hlog, stderr=subprocess.STDOUT)
        p, log = client(prefix, programs["impi_recv"], case_dir, 1, 1, ("0",),
                        {"ICBC_IMPI_SERVER": raddr, "ICBC_IMPI_CLIENT": "1"})
        codes = finish([h, p, relay], timeout=90)
        out, hout, rout = read(log), read(hlog), read(relay_err)
        report = f"--- icbc\n{out}\n--- impi_pingpong\n{hout}\n--- impi-relay\n{rout}"
        assert codes[0] == 0 and "hostile type: closed by the peer" in hout, report
        assert codes[1] not in (0, "timeout") and "MPI_Recv failed" in out, report
        assert codes[2] == 1 and "outside host 0" in rout and "type 99" in rout, report
    finally:
        server.kill()
        server.wait()


def test_a_stranger_at_the_relays_port_is_dropped_alone(prefix, relay_exe, programs, case_dir):
    """Before the client behind it connects, a stranger sends the relay's
    start-up port a command that is not AUTH and closes: the relay drops it
    with a warning and the job then starts and runs as usual."""
    import socket
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err, _ = start_relay(relay_exe, addr, case_dir, 1)
    try:
        host, port = raddr.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"COLL\x00\x00\x00\x04\x00\x00\x10\x00")
            s.recv(1)  # the relay closes it
        p1, log1 = client(prefix, programs["impi_world"], case_dir, 1, 2, ("1", "2r"),
                          {"ICBC_IMPI_SERVER": raddr, "ICBC_IMPI_CLIENT": "1"})
        p0, log0 = client(prefix, programs["impi_world"], case_dir, 0, 1, ("1", "2r"),
                          {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0"})
        codes = finish([p0, p1, server, relay])
        report = f"{read(log0)}\n{read(log1)}\n--- relay\n{read(relay_err)}"
        assert codes == [0, 0, 0, 0], f"{codes}\n{report}"
        assert "dropped a connection to the inside port" in read(relay_err), report
    finally:
        for p in (relay, server):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_follower_from_another_address_than_followers_gives_is_dropped(prefix, relay_exe,
                                                                         programs, case_dir):
    """The leader of a trunk of two, told with -followers that relay 1 is
    at 127.0.11.5: a relay 1 started at 127.0.11.3 is dropped with a warning
    naming both addresses (and ends with an error), the one at 127.0.11.5
    joins, and the job runs through the trunk."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    inside, outside = relay_addrs(1)
    lerr = open(os.path.join(case_dir, "leader.err"), "w+")
    leader = subprocess.Popen([relay_exe, "-server", addr, "-inside", inside, "-outside", outside,
                               "-timeout", str(TIMEOUT), "-trunks", "2", "-followers",
                               relay_addrs(1, 2)[0]],
                              stdout=subprocess.PIPE, stderr=lerr, text=True)
    procs = [leader, server]
    try:
        line = leader.stdout.readline().strip()
        assert line.startswith(inside + ":"), line + read(lerr)

        def follower(j):
            fin, fout = relay_addrs(1, j)
            ferr = open(os.path.join(case_dir, f"follower{j}.err"), "w+")
            f = subprocess.Popen([relay_exe, "-server", addr, "-inside", fin, "-outside", fout,
                                  "-leader", line, "-rank", "1", "-timeout", str(TIMEOUT)],
                                 stdout=subprocess.PIPE, stderr=ferr, text=True)
            procs.append(f)
            return f, ferr

        wrong, wrong_err = follower(1)
        assert wrong.wait(timeout=30) == 1, read(wrong_err)
        assert "dropped relay 1 joining from 127.0.11.3: -followers gives it 127.0.11.5" in \
            read(lerr), read(lerr)
        right, right_err = follower(2)
        joined = right.stdout.readline()
        assert joined.startswith(f"relay 1 of the trunk led by {line}"), joined + read(right_err)
        p1, log1 = client(prefix, programs["impi_world"], case_dir, 1, 2, ("1", "2r2"),
                          {"ICBC_IMPI_SERVER": line, "ICBC_IMPI_CLIENT": "1"})
        p0, log0 = client(prefix, programs["impi_world"], case_dir, 0, 1, ("1", "2r2"),
                          {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0"})
        codes = finish([p0, p1, server, leader, right])
        report = f"{read(log0)}\n{read(log1)}\n--- leader\n{read(lerr)}"
        assert codes == [0, 0, 0, 0, 0], f"{codes}\n{report}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
