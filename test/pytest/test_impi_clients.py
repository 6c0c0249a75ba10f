"""ICBC jobs as clients of one IMPI job (docs/impi.md): each client its own
mpiexec, started as the docs tell a user, with nothing but ICBC_IMPI_SERVER
and ICBC_IMPI_CLIENT (and ICBC_IMPI_KEY for a server with a key), through
the installed impi-server. One MPI_COMM_WORLD spans the clients in IMPI
order; test/mpi/impi_world.c checks size and ranks, messages across
clients (IMPI's short and long protocols, synchronous sends, a strided
datatype, wildcards) and collectives and MPI_Comm_split on the world.
Start-up errors end MPI_Init with a message naming their cause.

    python3 -m pytest test/pytest/test_impi_clients.py [--prefix DIR]

The clients run on this host; impi-server listens on 127.0.0.1.
"""
import os
import re
import subprocess
import time

import pytest

TIMEOUT = 120
ADDR = "127.0.0.1"


def start_server(prefix, nclients, work, args=()):
    """impi-server -server N on 127.0.0.1: (process, "ADDR:PORT", stderr file)."""
    out = open(os.path.join(work, "impi-server.out"), "w+")
    err = open(os.path.join(work, "impi-server.err"), "w+")
    p = subprocess.Popen([os.path.join(prefix, "bin", "impi-server"), "-server", str(nclients),
                          "-host", ADDR, "-listen", ADDR, "-timeout", str(TIMEOUT)] + list(args),
                         stdout=out, stderr=err)
    for _ in range(200):
        out.seek(0)
        line = out.readline().strip()
        if line:
            return p, line, err
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    pytest.fail("impi-server printed no address")


def client(prefix, program, work, k, np, counts, env_extra):
    """mpiexec -n NP of client K, as a user starts it; its output in a log."""
    log = open(os.path.join(work, f"client{k}.log"), "w+")
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [os.path.join(prefix, "bin", "mpiexec"), "-n", str(np)]
    for name, value in env_extra.items():
        cmd += ["-genv", name, value]
    cmd += [program] + [str(c) for c in counts]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log


def finish(procs, timeout=TIMEOUT):
    end = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, end - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append("timeout")
    return codes


def read(f):
    f.flush()
    f.seek(0)
    return f.read()


def run_clients(prefix, program, work, counts, args=(), server_args=(), env_extra=None):
    """An IMPI job of len(COUNTS) ICBC clients of PROGRAM through a fresh
    impi-server, each client's mpiexec started as a user starts it, the last
    client first (the server waits for every client rank). Returns the exit
    codes (clients in rank order, then the server) and each one's log."""
    server, addr, server_err = start_server(prefix, len(counts), work, server_args)
    clients = {k: client(prefix, program, work, k, n, args,
                         {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": str(k),
                          **(env_extra or {})})
               for k, n in reversed(list(enumerate(counts)))}
    order = sorted(clients)
    codes = finish([clients[k][0] for k in order] + [server])
    logs = {f"client{k}": read(clients[k][1]) for k in order}
    logs["impi-server"] = read(server_err)
    return codes, logs


def report_of(logs):
    return "\n".join(f"--- {n}\n{t}" for n, t in sorted(logs.items()))


@pytest.fixture
def case_dir(work, request):
    d = os.path.join(work, "impi-clients", request.node.name.replace("/", "_"))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.mark.parametrize("counts", [(1, 1), (2, 3), (3, 1, 2)], ids=["1+1", "2+3", "3+1+2"])
@pytest.mark.parametrize("auth", ["none", "key"])
def test_clients_form_one_world(prefix, programs, case_dir, counts, auth):
    args, key_env = [], {}
    if auth == "key":
        keyfile = os.path.join(case_dir, "key")
        with open(keyfile, "w") as f:
            f.write("123456789\n")
        args = ["-auth", f"key:{keyfile}"]
        key_env = {"ICBC_IMPI_KEY": "123456789"}
    codes, logs = run_clients(prefix, programs["impi_world"], case_dir, counts, args=counts,
                              server_args=args, env_extra=key_env)
    report = report_of(logs)
    assert codes == [0] * (len(counts) + 1), f"exit codes (clients, server): {codes}\n{report}"
    total = sum(counts)
    first = 0
    for k, n in enumerate(counts):
        for r in range(first, first + n):
            assert f"impi_world: rank {r} of {total} (client {k}): ok" in logs[f"client{k}"], report
        first += n


@pytest.mark.parametrize("counts", [(2, 3), (3, 1, 2)], ids=["2+3", "3+1+2"])
def test_collectives_across_clients(prefix, programs, case_dir, counts):
    """Gather(v), Scatter(v), Allgather(v), Alltoall(v), Scan, Exscan and
    Reduce_scatter(_block) with IMPI's algorithms, on MPI_COMM_WORLD and on a
    communicator whose ranks alternate between clients (test/mpi/impi_coll.c)."""
    codes, logs = run_clients(prefix, programs["impi_coll"], case_dir, counts)
    report = report_of(logs)
    assert codes == [0] * (len(counts) + 1), f"exit codes (clients, server): {codes}\n{report}"
    total = sum(counts)
    oks = re.findall(r"impi_coll: rank (\d+) of (\d+): ok, (\d+) checks", report)
    assert sorted(int(r) for r, _, _ in oks) == list(range(total)), report
    # every rank reached its checks: a run that skipped them would print fewer
    assert all(int(n) == total and int(c) > 20 * total for _, n, c in oks), report


ONE_SIDED = [
    # large puts, gets and accumulates between every pair (striped over the
    # host connection), fence and lock epochs, then collectives
    ("rma_coll", (2, 2), ()),
    ("rma_coll", (1, 2), ()),
    # MPI_Accumulate and MPI_Fetch_and_op in lock_all epochs, each round's
    # order checked
    ("rma_self_order", (1, 2), ("--rounds", "200", "--deadline", "20")),
    # MPI_Win_complete's notices delivered before the barrier after it
    ("pscw_complete_order", (1, 3), ("--rounds", "100")),
]


@pytest.mark.parametrize("program,counts,args", ONE_SIDED,
                         ids=[f"{p}-{'+'.join(map(str, c))}" for p, c, _ in ONE_SIDED])
def test_one_sided_across_clients(prefix, programs, case_dir, program, counts, args):
    """One-sided operations between ranks of two ICBC clients: IMPI has no
    packet for them, so ICBC's own protocol travels between ICBC clients as
    IMPI_PK_ICBC packets on the host connections (docs/impi.md); every
    value is checked by the program."""
    codes, logs = run_clients(prefix, programs[program], case_dir, counts, args=args)
    report = report_of(logs)
    assert codes == [0] * (len(counts) + 1), f"exit codes (clients, server): {codes}\n{report}"
    assert "No Errors" in logs["client0"], report
    if program == "rma_self_order":
        m = re.search(r"(\d+) checked, (\d+) served", logs["client0"])
        assert m and int(m.group(1)) == 200 * (sum(counts) - 1), report


def test_wrong_key_fails_mpi_init_naming_the_server(prefix, programs, case_dir):
    keyfile = os.path.join(case_dir, "key")
    with open(keyfile, "w") as f:
        f.write("42\n")
    server, addr, server_err = start_server(prefix, 1, case_dir, ["-auth", f"key:{keyfile}"])
    try:
        p, log = client(prefix, programs["impi_world"], case_dir, 0, 2, (2,),
                        {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0",
                         "ICBC_IMPI_KEY": "43"})
        codes = finish([p], timeout=60)
        out = read(log)
        assert codes[0] not in (0, "timeout"), out
        assert "IMPI start-up" in out and addr in out, out
        assert f"IMPI server {addr}: refused this client's key" in out, out
        assert "): ok" not in out, out
    finally:
        server.kill()
        server.wait()
    # the server refused the stranger and went on waiting for a real client
    assert "refus" in read(server_err).lower(), read(server_err)


def test_no_server_fails_mpi_init_naming_it(prefix, programs, case_dir):
    # a port nothing listens on (impi-server's own, once it has gone)
    server, addr, _ = start_server(prefix, 1, case_dir)
    server.kill()
    server.wait()
    p, log = client(prefix, programs["impi_world"], case_dir, 0, 1, (1,),
                    {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "0"})
    codes = finish([p], timeout=60)
    out = read(log)
    assert codes[0] not in (0, "timeout"), out
    assert "IMPI start-up" in out and addr in out, out


@pytest.mark.parametrize("env,promised", [
    ({"ICBC_IMPI_SERVER": "127.0.0.1:9"}, "ICBC_IMPI_SERVER and ICBC_IMPI_CLIENT go together"),
    ({"ICBC_IMPI_CLIENT": "0"}, "ICBC_IMPI_SERVER and ICBC_IMPI_CLIENT go together"),
    ({"ICBC_IMPI_SERVER": "host-without-port", "ICBC_IMPI_CLIENT": "0"}, "is not ADDR:PORT"),
    ({"ICBC_IMPI_SERVER": "127.0.0.1:9", "ICBC_IMPI_CLIENT": "32"}, "is not a client rank"),
], ids=["server-alone", "client-alone", "bad-address", "client-out-of-range"])
def test_bad_settings_fail_mpi_init_with_their_reason(prefix, programs, case_dir, env, promised):
    p, log = client(prefix, programs["impi_world"], case_dir, 0, 1, (1,), env)
    codes = finish([p], timeout=60)
    out = read(log)
    assert codes[0] not in (0, "timeout"), out
    assert promised in out, out


@pytest.fixture(scope="session")
def impi_pingpong(request):
    exe = os.path.join(os.path.abspath(request.config.getoption("--build")), "test", "impi",
                       "impi_pingpong")
    if not os.access(exe, os.X_OK):
        pytest.fail(f"no {exe}: build libicbc first (./quickstart.sh build)")
    return exe


@pytest.mark.parametrize("kind,promised", [
    ("type", "packet of type 99"),
    ("len", "with 65537 payload bytes"),
    ("proc", "packet from process -12345, which is not one of that host's"),
    ("cid", "a message for context 1048576, which no communicator has"),
])
def test_hostile_packet_closes_the_host_and_ends_the_wait(prefix, programs, impi_pingpong,
                                                         case_dir, kind, promised):
    """A host of another client (impi_pingpong, libicbc's IMPI parts, as
    client 0 on 127.0.0.2) sends one packet the IMPI path must refuse. The
    ICBC job (client 1), waiting in MPI_Recv for that host's process, closes
    the connection, and the job ends with the error naming the host and the
    reason instead of waiting for ever."""
    server, addr, server_err = start_server(prefix, 2, case_dir)
    try:
        hlog = open(os.path.join(case_dir, "hostile.log"), "w+")
        h = subprocess.Popen([impi_pingpong, "--server", addr, "--client", "0",
                              "--host", "127.0.0.2", "--peer", "1", "--hostile", kind,
                              "--timeout", "60"], stdout=hlog, stderr=subprocess.STDOUT)
        p, log = client(prefix, programs["impi_recv"], case_dir, 1, 1, (1,),
                        {"ICBC_IMPI_SERVER": addr, "ICBC_IMPI_CLIENT": "1"})
        codes = finish([h, p], timeout=90)
        out, hout = read(log), read(hlog)
        report = f"--- icbc\n{out}\n--- impi_pingpong\n{hout}"
        assert codes[0] == 0 and f"hostile {kind}: closed by the peer" in hout, report
        assert codes[1] not in (0, "timeout"), report
        assert "IMPI host 0 (client 0" in out and promised in out, report
        assert "got" not in out, report
    finally:
        server.kill()
        server.wait()
