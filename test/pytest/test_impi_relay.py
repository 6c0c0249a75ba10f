"""ICBC jobs joining an IMPI job through impi-relay (docs/impi-relay.md), on
this host: impi-server on 127.0.0.1, each relay with an inside and an
outside address of its own (127.0.1K.1 and 127.0.1K.2 for client K), the
client behind it given the relay's printed address as ICBC_IMPI_SERVER,
the others the server's, exactly as a user starts them. LAM/MPI through the
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


def relay_addrs(k):
    return f"127.0.{10 + k}.1", f"127.0.{10 + k}.2"


@pytest.fixture(scope="session")
def relay_exe(request):
    exe = os.path.join(os.path.abspath(request.config.getoption("--build")), "impi-relay")
    if not os.access(exe, os.X_OK):
        pytest.fail(f"no {exe}: build libicbc first (./quickstart.sh build)")
    return exe


def start_relay(relay_exe, server, work, k, args=()):
    """impi-relay for client K: (process, its stdout, the address it printed,
    its stderr file)."""
    inside, outside = relay_addrs(k)
    err = open(os.path.join(work, f"impi-relay{k}.err"), "w+")
    p = subprocess.Popen([relay_exe, "-server", server, "-inside", inside, "-outside", outside,
                          "-timeout", str(TIMEOUT)] + list(args),
                         stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline().strip()
    if not line:
        p.kill()
        pytest.fail("impi-relay printed no address: " + read(err))
    assert line.startswith(inside + ":"), line
    return p, line, err


def run_relayed(prefix, relay_exe, program, work, counts, args=None):
    """An IMPI job of ICBC clients of PROGRAM; COUNTS are strings, "Nr" for a
    client of N processes behind a relay of its own. ARGS (default: COUNTS)
    go to every process. Returns the exit codes (clients in rank order, the
    server, the relays) and the logs."""
    server, addr, server_err = start_server(prefix, len(counts), work)
    relays, clients = {}, {}
    for k, c in enumerate(counts):
        if c.endswith("r"):
            relays[k] = start_relay(relay_exe, addr, work, k)
    for k, c in reversed(list(enumerate(counts))):
        where = relays[k][1] if k in relays else addr
        clients[k] = client(prefix, program, work, k, int(c.rstrip("r")),
                            counts if args is None else args,
                            {"ICBC_IMPI_SERVER": where, "ICBC_IMPI_CLIENT": str(k)})
    order = sorted(clients)
    codes = finish([clients[k][0] for k in order] + [server] + [relays[k][0] for k in relays])
    logs = {f"client{k}": read(clients[k][1]) for k in order}
    logs["impi-server"] = read(server_err)
    for k in relays:
        logs[f"impi-relay{k}"] = read(relays[k][2]) + relays[k][0].stdout.read()
    return codes, logs


@pytest.fixture
def case_dir(work, request):
    d = os.path.join(work, "impi-relay", request.node.name.replace("/", "_"))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.mark.parametrize("counts", [("2", "2r"), ("3r", "1"), ("2r", "2r"), ("1", "2r", "1")],
                         ids=["2+2r", "3r+1", "2r+2r", "1+2r+1"])
def test_icbc_clients_through_relays(prefix, relay_exe, programs, case_dir, counts):
    """impi_world across the clients, some behind relays (P-G, and P-P with
    two relays): size and ranks, the IMPI attributes as the relay makes them
    (one host for a client behind it, seen from outside; one for every other
    client, seen from behind it), a ring, IMPI's short, long and synchronous
    messages of 0 B to 1 MiB both ways, wildcards, every collective of
    impi_world from every root, MPI_Comm_split. Every process, the server
    and every relay exit 0."""
    codes, logs = run_relayed(prefix, relay_exe, programs["impi_world"], case_dir, counts)
    report = report_of(logs)
    assert codes == [0] * len(codes), f"exit codes (clients, server, relays): {codes}\n{report}"
    total = sum(int(c.rstrip("r")) for c in counts)
    oks = re.findall(r"impi_world: rank (\d+) of (\d+) \(client \d+\): ok", report)
    assert sorted(int(r) for r, _ in oks) == list(range(total)), report
    for k, c in enumerate(counts):
        if c.endswith("r"):
            assert f"relaying client {k}: {int(c[:-1])} inside host(s)" in \
                logs[f"impi-relay{k}"], report


def test_one_sided_through_a_relay(prefix, relay_exe, programs, case_dir):
    """Puts, gets and accumulates between an ICBC client behind a relay and
    one outside: ICBC's own packets (IMPI_PK_ICBC) pass the relay as IMPI's
    do, their process ids rewritten."""
    codes, logs = run_relayed(prefix, relay_exe, programs["rma_coll"], case_dir, ("2", "2r"),
                              args=())
    report = report_of(logs)
    assert codes == [0] * len(codes), f"exit codes (clients, server, relay): {codes}\n{report}"
    assert "No Errors" in logs["client0"], report


def test_a_relay_that_dies_ends_both_jobs_with_an_error(prefix, relay_exe, programs, case_dir):
    """Client 0 (rank 0) waits in MPI_Recv for rank 1 and client 1, behind
    the relay, for rank 0; the relay is killed once it relays. Both jobs end
    with MPI_Recv's error within 10 s, never a hang."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err = start_relay(relay_exe, addr, case_dir, 1)
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


def test_hostile_packet_at_the_relay_ends_the_job_with_its_reason(prefix, relay_exe, programs,
                                                                   impi_pingpong, case_dir):
    """A host outside (impi_pingpong as client 0) sends the relay a packet
    of an unknown type for the client behind it: the relay refuses it,
    exits 1 naming the host and the reason, and closes every connection, so
    the ICBC job waiting in MPI_Recv ends with an error, never a hang."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    relay, raddr, relay_err = start_relay(relay_exe, addr, case_dir, 1)
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
    relay, raddr, relay_err = start_relay(relay_exe, addr, case_dir, 1)
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
