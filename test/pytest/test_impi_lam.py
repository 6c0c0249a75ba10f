"""IMPI interoperation with LAM/MPI 7.1.4, a real and independent IMPI
implementation (docs/impi.md, "LAM/MPI 7.1.4 as it behaves"), through our
impi-server:

* two LAM clients: LAM's start-up, host connections and messages through
  our server;
* LAM as one client and test/impi/impi_pingpong (libicbc's IMPI start-up,
  host connections, packets and flow control) as the other, each side
  first: ping-pong at 0 B .. 1 MiB (the short protocol, the long one above
  DATALEN = 65536), standard and (from ICBC) synchronous sends, every byte
  checked on both sides, then the barrier IMPI requires of MPI_Finalize;
  LAM with 1, 2 and 4 processes;
* a LAM client whose key impi-server refuses.

LAM is built once (contrib/lam/build-lam.sh, cached in _build/lam); where
its 32-bit build cannot be made every case fails with the reason. LAM refuses to run as root: it runs as the user nobody with its own
HOME and TMPDIR per universe, started as docs/impi.md says ("Running LAM as
an IMPI client": lamboot, then mpirun -client RANK ADDR:PORT,
IMPI_AUTH_NONE=1, IMPI_HOST_NAME set to the address the client advertises).

    python3 -m pytest test/pytest/test_impi_lam.py [--build DIR]
"""
import os
import pwd
import re
import shutil
import stat
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))

SIZES = "0,4,1000,65536,100000,1048576"
ITERS = 3
# LAM advertises 127.0.0.1 and connects from it (it does not bind); our
# client advertises 127.0.0.2 and binds to it before it connects, so each
# side recognises the other's connections by their source address.
LAM_ADDR = "127.0.0.1"
ICBC_ADDR = "127.0.0.2"
TIMEOUT = 120

# The default tier's representative subset (docs/testsuite.md, TIERS): each
# kind of exchange with each client order once, 1, 2 and 4 LAM processes
# among them, both send modes; the full tier runs every combination.
DEFAULT_TIER = {
    "test_icbc_client_with_lam": [dict(lam_first=True, np=4, sync=0),
                                  dict(lam_first=False, np=2, sync=1)],
    "test_icbc_job_with_lam": [dict(lam_first=True, np=2, sync=1, icbc_np=4),
                               dict(lam_first=False, np=4, sync=0, icbc_np=2)],
    "test_icbc_job_collectives_with_lam": [dict(lam_first=True, np=4, icbc_np=1),
                                           dict(lam_first=False, np=1, icbc_np=4)],
    "test_icbc_job_every_collective_with_lam": [dict(lam_first=True, np=2, icbc_np=2),
                                                dict(lam_first=False, np=4, icbc_np=4)],
    "test_collectives_with_lam": [dict(lam_first=True, np=1),
                                  dict(lam_first=False, np=2)],
    "test_two_lam_clients_through_our_server": [dict(auth="key")],
    "test_icbc_nodes_with_lam_across_the_wan": [dict(lam_first=False)],
    "test_icbc_job_with_lam_through_a_keyed_server": [dict(lam_first=True)],
    "test_lam_and_icbc_through_a_relay": [dict(np=2, icbc_np=2, behind="lam", lam_first=True),
                                          dict(np=2, icbc_np=2, behind="icbc",
                                               lam_first=False)],
    "test_lam_and_icbc_through_a_trunk_of_relays": [dict(lam_first=True, behind="lam")],
    "test_pingpong_through_a_relay": [dict(lam_first=False, behind="icbc", trunks=2)],
    "test_lam_with_two_other_clients": [dict(through="relay")],
}


@pytest.fixture(scope="session")
def build_dir(request):
    d = os.path.abspath(request.config.getoption("--build"))
    for exe in ("impi-server", "test/impi/impi_pingpong"):
        if not os.access(os.path.join(d, exe), os.X_OK):
            pytest.fail(f"no {exe} in {d}: build libicbc first (./quickstart.sh build)")
    return d


def reachable_by_others(path):
    """Whether a user other than root can reach PATH (every directory on the
    way searchable by others): LAM runs as nobody."""
    path = os.path.abspath(path)
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


# LAM's build, its programs and universes where nobody can reach them: in
# the build directory, or under /var/tmp when the checkout is private
# (e.g. under /root).
SHARED = "/var/tmp/icbc-lam"


def nobody_dir(build_dir):
    return build_dir if reachable_by_others(build_dir) else SHARED


def lam_build_command(build_dir):
    """build-lam.sh with the directories this suite uses for BUILD_DIR."""
    cmd = [os.path.join(TOP, "contrib", "lam", "build-lam.sh")]
    if nobody_dir(build_dir) == SHARED:
        os.makedirs(SHARED, exist_ok=True)
        os.chmod(SHARED, 0o755)
        cmd += ["--builddir", os.path.join(SHARED, "build"),
                "--prefix", os.path.join(SHARED, "install")]
    return cmd


@pytest.fixture(scope="session")
def lam(build_dir):
    """LAM/MPI's prefix, built once."""
    log = os.path.join(build_dir, "lam-build.log")
    cmd = lam_build_command(build_dir)
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, timeout=3600)
    if r.returncode != 0:
        if subprocess.run(["bash", "-c", "echo 'int main(void){return 0;}' | "
                           "gcc -m32 -x c - -o /dev/null"], capture_output=True).returncode:
            pytest.fail("32-bit programs cannot be built here (gcc -m32 fails), so LAM/MPI "
                        f"7.1.4 cannot be built; see {log}")
        pytest.fail(f"contrib/lam/build-lam.sh failed; see {log}")
    return r.stdout.strip().splitlines()[-1]


class Universe:
    """A LAM universe of the user nobody on this host, or in the network
    namespace NETNS (a testbed's node) advertising ADDR."""

    def __init__(self, lam, work, name, netns=None, addr=LAM_ADDR):
        self.lam = lam
        self.dir = os.path.join(work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "tmp"))
        nobody = pwd.getpwnam("nobody")
        self.uid, self.gid = nobody.pw_uid, nobody.pw_gid
        for root, dirs, files in os.walk(self.dir):
            os.chown(root, self.uid, self.gid)
        os.chmod(os.path.dirname(self.dir), 0o755)
        with open(os.path.join(self.dir, "hosts"), "w") as f:
            f.write("localhost\n")
        self.env = {"PATH": os.path.join(lam, "bin") + ":/usr/bin:/bin",
                    "HOME": self.dir, "TMPDIR": os.path.join(self.dir, "tmp"),
                    "LAMRSH": "ssh -x", "IMPI_AUTH_NONE": "1", "IMPI_HOST_NAME": addr}
        self.netns = netns

    def run(self, args, **kw):
        if self.netns:  # entering the namespace needs root: nobody after that
            return subprocess.Popen(["ip", "netns", "exec", self.netns, "setpriv",
                                     f"--reuid={self.uid}", f"--regid={self.gid}",
                                     "--clear-groups", *args],
                                    env=self.env, cwd=self.dir, **kw)
        return subprocess.Popen(args, env=self.env, cwd=self.dir, user=self.uid, group=self.gid,
                                extra_groups=[], **kw)

    def boot(self):
        # lamboot's daemon keeps its stdout open: a file, never a pipe
        with open(os.path.join(self.dir, "lamboot.log"), "w") as log:
            p = self.run(["lamboot", "hosts"], stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
            assert p.wait(timeout=60) == 0, open(os.path.join(self.dir, "lamboot.log")).read()

    def halt(self):
        for cmd in (["lamhalt"], ["lamwipe", "hosts"]):
            try:
                self.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL).wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass


def lam_mpicc(lam, build_dir, name):
    """test/impi/NAME.c built with LAM's mpicc, where nobody can run it."""
    d = os.path.join(nobody_dir(build_dir), "test-impi-lam")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    exe = os.path.join(d, name)
    r = subprocess.run([os.path.join(lam, "bin", "mpicc"), "-O2", "-o", exe,
                        os.path.join(TOP, "test", "impi", name + ".c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


@pytest.fixture(scope="session")
def lam_prog(lam, build_dir):
    return lam_mpicc(lam, build_dir, "lam_pingpong")


@pytest.fixture(scope="session")
def lam_coll(lam, build_dir):
    return lam_mpicc(lam, build_dir, "lam_coll")


def start_server(build_dir, nclients, work, args=()):
    out = open(os.path.join(work, "impi-server.out"), "w+")
    err = open(os.path.join(work, "impi-server.err"), "w+")
    p = subprocess.Popen([os.path.join(build_dir, "impi-server"), "-server", str(nclients),
                          "-host", LAM_ADDR, "-timeout", str(TIMEOUT)] + list(args),
                         stdout=out, stderr=err)
    for _ in range(100):
        out.seek(0)
        line = out.readline().strip()
        if line:
            return p, line, err
        time.sleep(0.05)
    p.kill()
    pytest.fail("impi-server printed no address")


# impi-relay's two addresses in the tests where a client joins through it
# (docs/impi-relay.md): inside, where the client behind it reaches it, and
# outside, where the other clients do. Each differs from both clients', as
# a front-end node's addresses would.
RELAY_INSIDE = "127.0.0.3"
RELAY_OUTSIDE = "127.0.0.4"


def start_relay(build_dir, server, work, args=(), trunks=1, relay_args=lambda j: []):
    """impi-relay -server SERVER started as docs/impi-relay.md says (with
    TRUNKS > 1: -trunks and -followers, and its followers with -leader and
    -rank, each on the next two addresses; RELAY_ARGS(J): relay J's own options):
    ([processes], the "ADDR:PORT" the leader printed for the client inside, [stderr
    files])."""
    procs, errs, leader = [], [], None
    for j in range(trunks):
        inside = RELAY_INSIDE if j == 0 else f"127.0.0.{3 + 2 * j}"
        outside = RELAY_OUTSIDE if j == 0 else f"127.0.0.{4 + 2 * j}"
        err = open(os.path.join(work, f"impi-relay{j}.err"), "w+")
        followers = ",".join(f"127.0.0.{3 + 2 * i}" for i in range(1, trunks))
        extra = (["-trunks", str(trunks), "-followers", followers] if trunks > 1 else []) \
            if j == 0 else ["-leader", leader, "-rank", str(j)]
        p = subprocess.Popen([os.path.join(build_dir, "impi-relay"), "-server", server,
                              "-inside", inside, "-outside", outside,
                              "-timeout", str(TIMEOUT)] + extra + list(args) + relay_args(j),
                             stdout=subprocess.PIPE, stderr=err, text=True)
        line = p.stdout.readline().strip()
        if not line:
            p.kill()
            err.seek(0)
            pytest.fail("impi-relay printed nothing: " + err.read())
        if j == 0:
            leader = line
        procs.append(p)
        errs.append(err)
    return procs, leader, errs


def finish(procs, timeout=TIMEOUT):
    """Waits for every process; kills what is left at the time limit."""
    end = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, end - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append("timeout")
    return codes


@pytest.fixture
def work(build_dir, request):
    w = os.path.join(nobody_dir(build_dir), "test-impi-lam", request.node.name.replace("/", "_"))
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    os.chmod(w, 0o755)
    return w


def coll_all_args(nprocs):
    """coll_all's block sizes for a world of NPROCS: 3 ints and up to 1500,
    as large as LAM 7.1.4 receives correctly on a communicator after one of
    its composed collectives (messages of at most DATALEN, 64 KiB; docs/impi.md):
    Reduce_scatter reduces a vector of (r % 3 + 1) blocks per rank r."""
    blocks = sum(r % 3 + 1 for r in range(nprocs))
    return ("-a", "3", str(min(1500, 65536 // (4 * blocks))))


def lam_mpirun(u, client, server, np, prog, me, peer, sync, work):
    out = open(os.path.join(work, f"lam-client{client}.log"), "w")
    return u.run(["mpirun", "-client", str(client), server, "-np", str(np), prog,
                  str(me), str(peer), SIZES, str(ITERS), str(sync)],
                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), out.name


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np", [1, 2, 4])
@pytest.mark.parametrize("sync", [0, 1], ids=["send", "ssend"])
def test_icbc_client_with_lam(build_dir, lam, lam_prog, work, lam_first, np, sync):
    """ICBC's IMPI parts and LAM ping-pong through our impi-server; the lower
    world rank sends first, so each order of the clients tests one
    direction first. SYNC makes ICBC's sends synchronous (DATASYNC, which
    LAM answers with SYNCACK once matched). LAM's own MPI_Ssend to another
    client never completes in LAM 7.1.4, even between two LAM clients (its
    impid receives the SYNCACK but the sending process stays blocked;
    measured with lam_pingpong at 0, 4 and 100000 bytes), so LAM's side
    always uses MPI_Send."""
    u = Universe(lam, work, "lam")
    u.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work)
        lam_client = 0 if lam_first else 1
        icbc_client = 1 - lam_client
        # world ranks: client 0's processes first
        lam_me = 0 if lam_first else 1
        icbc_rank = np if lam_first else 0
        pl, lam_log = lam_mpirun(u, lam_client, addr, np, lam_prog, lam_me, icbc_rank, 0, work)
        icbc_log = os.path.join(work, "icbc.log")
        with open(icbc_log, "w") as f:
            pi = subprocess.Popen([os.path.join(build_dir, "test", "impi", "impi_pingpong"),
                                   "--server", addr, "--client", str(icbc_client),
                                   "--host", ICBC_ADDR, "--peer", str(lam_me),
                                   "--sizes", SIZES, "--iters", str(ITERS),
                                   "--timeout", str(TIMEOUT)] + (["--sync"] if sync else []),
                                  stdout=f, stderr=subprocess.STDOUT)
            codes = finish([pi, pl, server])
        logs = {n: open(p).read() for n, p in
                (("icbc", icbc_log), ("lam", lam_log), ("server", server_err.name))}
        report = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
        assert codes == [0, 0, 0], f"exit codes icbc, lam, impi-server: {codes}\n{report}"
        # every size went both ways and was checked on both sides
        for n in SIZES.split(","):
            assert f"\n{n} bytes {ITERS} iterations" in "\n" + logs["icbc"], report
            assert f"rank {lam_me}: {n} bytes x {ITERS} with rank {icbc_rank}: ok" \
                in logs["lam"], report
    finally:
        u.halt()


@pytest.fixture(scope="session")
def icbc_pingpong(prefix, build_dir):
    """test/impi/lam_pingpong.c built with ICBC's mpicc: the same program on
    both sides of the IMPI job."""
    d = os.path.join(build_dir, "test-impi-lam")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "icbc_pingpong")
    r = subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exe,
                        os.path.join(TOP, "test", "impi", "lam_pingpong.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np", [1, 2, 4])
@pytest.mark.parametrize("icbc_np", [1, 2, 4], ids=["icbc1", "icbc2", "icbc4"])
@pytest.mark.parametrize("sync", [0, 1], ids=["send", "ssend"])
def test_icbc_job_with_lam(prefix, build_dir, lam, lam_prog, icbc_pingpong, work, lam_first, np,
                           icbc_np, sync):
    """An ICBC job (our mpiexec, the netmod's IMPI path) of ICBC_NP processes
    on one node and a LAM client of NP processes ping-pong through our
    impi-server with the same program on both sides (lam_pingpong.c): every
    pair of an ICBC and a LAM process at once (min(NP, ICBC_NP) pairs), every
    size of IMPI's short and long protocols both ways, every byte checked
    on both sides, then MPI_Finalize's IMPI barrier and FINI. The ICBC node
    is one IMPI host of ICBC_NP processes, as LAM's own client is one host
    of NP. SYNC: the ICBC side's first send of each iteration is MPI_Ssend
    (LAM's own MPI_Ssend across clients never completes in 7.1.4, see
    test_icbc_client_with_lam). The ICBC job advertises 127.0.0.2
    (MPIR_CVAR_CH4_ICBC_IMPI_HOST): on one host LAM tells the clients' hosts
    apart only by address, and it has 127.0.0.1."""
    run_pingpong(prefix, build_dir, lam, lam_prog, icbc_pingpong, work, lam_first, np, icbc_np,
                 sync)


def run_pingpong(prefix, build_dir, lam, lam_prog, icbc_pingpong, work, lam_first, np, icbc_np,
                 sync, behind=None, trunks=1):
    """test_icbc_job_with_lam's exchange; BEHIND ("icbc" or "lam"): that
    client joins through impi-relay (a trunk of TRUNKS relays)."""
    u = Universe(lam, work, "lam")
    u.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work)
        lam_addr = icbc_addr = addr
        relay = []
        if behind:
            relay, raddr, relay_errs = start_relay(build_dir, addr, work, (), trunks)
            lam_addr, icbc_addr = (raddr, addr) if behind == "lam" else (addr, raddr)
        lam_client = 0 if lam_first else 1
        icbc_client = 1 - lam_client
        lam_first_rank = 0 if lam_first else icbc_np
        icbc_first_rank = np if lam_first else 0
        pairs = min(np, icbc_np)
        lam_ranks = [lam_first_rank + i for i in range(pairs)]
        icbc_ranks = [icbc_first_rank + i for i in range(pairs)]
        lam_list = ",".join(map(str, lam_ranks))
        icbc_list = ",".join(map(str, icbc_ranks))
        pl, lam_log = lam_mpirun(u, lam_client, lam_addr, np, lam_prog, lam_list, icbc_list, 0,
                                 work)
        icbc_log = os.path.join(work, "icbc.log")
        with open(icbc_log, "w") as f:
            pi = subprocess.Popen([os.path.join(prefix, "bin", "mpiexec"), "-n", str(icbc_np),
                                   "-genv", "ICBC_IMPI_SERVER", icbc_addr,
                                   "-genv", "ICBC_IMPI_CLIENT", str(icbc_client),
                                   "-genv", "MPIR_CVAR_CH4_ICBC_IMPI_HOST", ICBC_ADDR,
                                   icbc_pingpong, icbc_list, lam_list, SIZES, str(ITERS),
                                   str(sync)],
                                  stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            codes = finish([pi, pl, server] + relay)
        files = [("icbc", icbc_log), ("lam", lam_log), ("server", server_err.name)]
        if behind:
            files += [(f"relay{j}", e.name) for j, e in enumerate(relay_errs)]
        logs = {n: open(p).read() for n, p in files}
        for j, p in enumerate(relay):
            logs[f"relay{j}"] += p.stdout.read()
        report = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
        assert codes == [0] * (3 + len(relay)), \
            f"exit codes icbc, lam, impi-server (, relays): {codes}\n{report}"
        for n in SIZES.split(","):
            for i, l in zip(icbc_ranks, lam_ranks):
                assert f"rank {i}: {n} bytes x {ITERS} with rank {l}: ok" in logs["icbc"], report
                assert f"rank {l}: {n} bytes x {ITERS} with rank {i}: ok" in logs["lam"], report
        for j in range(len(relay)):
            m = re.search(r"^relayed (\d+) packet\(s\): (\d+) cut through, (\d+) whole",
                          logs[f"relay{j}"], re.M)
            assert m, f"relay {j} did not count its packets\n{report}"
            print(f"relay {j}: {m.group(0)}")
            assert int(m.group(1)) == int(m.group(2)) + int(m.group(3)), m.group(0)
            # alone, the relay has every packet of the 1 MiB messages, which
            # go in packets too long for one of its reads: some go on cut
            # through (about two thirds of all here)
            assert len(relay) > 1 or int(m.group(2)) >= 1, m.group(0)
    finally:
        u.halt()


@pytest.mark.parametrize("behind,trunks", [("icbc", 1), ("lam", 1), ("icbc", 2)],
                         ids=["icbc-behind-relay", "lam-behind-relay", "icbc-behind-trunk"])
@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
def test_pingpong_through_a_relay(prefix, build_dir, lam, lam_prog, icbc_pingpong, work, behind,
                                  trunks, lam_first):
    """test_icbc_job_with_lam's ping-pong (2 LAM and 2 ICBC processes, every
    size of the short and long protocols both ways, the ICBC side's first
    send of each iteration synchronous) with the ICBC job or LAM behind
    impi-relay, or the ICBC job behind a trunk of two relays."""
    run_pingpong(prefix, build_dir, lam, lam_prog, icbc_pingpong, work, lam_first, 2, 2, 1,
                 behind=behind, trunks=trunks)


@pytest.fixture(scope="session")
def icbc_coll(prefix, build_dir):
    """test/impi/lam_coll.c built with ICBC's mpicc."""
    d = os.path.join(build_dir, "test-impi-lam")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "icbc_coll")
    r = subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exe,
                        os.path.join(TOP, "test", "impi", "lam_coll.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


def run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, np, icbc_np, lam_exe, icbc_exe,
                          ok_text, args=(), key=None, behind=None, trunks=1):
    """An ICBC job of ICBC_NP processes on 127.0.0.2 (our mpiexec; one IMPI
    host) and a LAM/MPI client of NP processes, each running its build of
    the same program, through our impi-server (with KEY: started with
    -auth key:FILE, LAM given IMPI_AUTH_KEY and the ICBC job ICBC_IMPI_KEY, as
    docs/impi.md says); both must exit 0 and every rank print "rank R:
    OK_TEXT". BEHIND ("icbc" or "lam"): that client joins through
    impi-relay (a trunk of TRUNKS relays), given the relay's address as its
    server (and the relay the key too)."""
    u = Universe(lam, work, "lam")
    server_args, icbc_env = [], []
    if key is not None:
        keyfile = os.path.join(work, "impi.key")
        with open(keyfile, "w") as f:
            f.write(f"{key}\n")
        os.chmod(keyfile, 0o600)
        server_args = ["-auth", "key:" + keyfile]
        del u.env["IMPI_AUTH_NONE"]
        u.env["IMPI_AUTH_KEY"] = str(key)
        icbc_env = ["-genv", "ICBC_IMPI_KEY", str(key)]
    u.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work, server_args)
        lam_addr = icbc_addr = addr
        relay = []
        if behind:
            relay, raddr, relay_errs = start_relay(build_dir, addr, work, server_args, trunks)
            lam_addr, icbc_addr = (raddr, addr) if behind == "lam" else (addr, raddr)
        lam_client = 0 if lam_first else 1
        lam_log = os.path.join(work, "lam.log")
        with open(lam_log, "w") as out:
            pl = u.run(["mpirun", "-client", str(lam_client), lam_addr, "-np", str(np), lam_exe,
                        *args],
                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        icbc_log = os.path.join(work, "icbc.log")
        with open(icbc_log, "w") as f:
            pi = subprocess.Popen([os.path.join(prefix, "bin", "mpiexec"), "-n", str(icbc_np),
                                   "-genv", "ICBC_IMPI_SERVER", icbc_addr,
                                   "-genv", "ICBC_IMPI_CLIENT", str(1 - lam_client),
                                   "-genv", "MPIR_CVAR_CH4_ICBC_IMPI_HOST", ICBC_ADDR, *icbc_env,
                                   icbc_exe, *args],
                                  stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            codes = finish([pi, pl, server] + relay)
        files = [("icbc", icbc_log), ("lam", lam_log), ("server", server_err.name)]
        if behind:
            files += [(f"relay{j}", e.name) for j, e in enumerate(relay_errs)]
        logs = {n: open(p).read() for n, p in files}
        report = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
        assert codes == [0] * (3 + len(relay)), \
            f"exit codes icbc, lam, impi-server (, impi-relay): {codes}\n{report}"
        icbc_ranks = range(np, np + icbc_np) if lam_first else range(icbc_np)
        lam_ranks = range(np) if lam_first else range(icbc_np, icbc_np + np)
        for r in icbc_ranks:
            assert f"rank {r}: {ok_text}" in logs["icbc"], report
        for r in lam_ranks:
            assert f"rank {r}: {ok_text}" in logs["lam"], report
    finally:
        u.halt()


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np", [1, 2, 4])
@pytest.mark.parametrize("icbc_np", [1, 2, 4], ids=["icbc1", "icbc2", "icbc4"])
def test_icbc_job_collectives_with_lam(prefix, build_dir, lam, lam_coll, icbc_coll, work,
                                       lam_first, np, icbc_np):
    """MPI_Barrier, MPI_Bcast and MPI_Reduce from every root and
    MPI_Allreduce on MPI_COMM_WORLD between an ICBC job (our mpiexec; the
    netmod's IMPI collectives) and a LAM/MPI 7.1.4 client of 1, 2 and 4
    processes, the same program (lam_coll.c) on both sides, every result
    checked on every rank. ICBC_NP ICBC processes on 127.0.0.2, one IMPI
    host, as in test_icbc_job_with_lam."""
    run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, np, icbc_np, lam_coll,
                          icbc_coll, "coll ok")


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
def test_icbc_job_with_lam_through_a_keyed_server(prefix, build_dir, lam, lam_coll_all,
                                                  icbc_coll_all, work, lam_first):
    """The collectives of coll_all.c between an ICBC job of 2 processes and
    LAM with 2, through impi-server started with a key (-auth key:FILE):
    LAM's IMPI_AUTH_KEY and the ICBC job's ICBC_IMPI_KEY."""
    run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, 2, 2, lam_coll_all,
                          icbc_coll_all, "coll_all ok", args=coll_all_args(4),
                          key=98765432109876)


@pytest.mark.parametrize("behind", ["icbc", "lam"], ids=["icbc-behind-relay", "lam-behind-relay"])
@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np,icbc_np", [(2, 2), (4, 1), (1, 4)], ids=["2+2", "4+1", "1+4"])
def test_lam_and_icbc_through_a_relay(prefix, build_dir, lam, lam_coll_all, icbc_coll_all, work,
                                      behind, lam_first, np, icbc_np):
    """A cluster with private addresses in an IMPI job with LAM/MPI 7.1.4
    (docs/impi-relay.md): the ICBC job, or the LAM client, is given
    impi-relay's address as its server, the other impi-server's; every
    collective of coll_all.c that LAM can run across clients, every result
    checked on every rank. The relay stands in as one host for the client
    behind it and for the other client; LAM knows a host by its address, so
    this also checks that the relay connects from the address it
    advertised on each side."""
    run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, np, icbc_np, lam_coll_all,
                          icbc_coll_all, "coll_all ok", args=coll_all_args(np + icbc_np),
                          behind=behind)


@pytest.mark.parametrize("behind", ["icbc", "lam"], ids=["icbc-behind-trunk", "lam-behind-trunk"])
@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
def test_lam_and_icbc_through_a_trunk_of_relays(prefix, build_dir, lam, lam_coll_all,
                                                icbc_coll_all, work, behind, lam_first):
    """As test_lam_and_icbc_through_a_relay, with a trunk of two relays
    (-trunks 2, the second -leader and -rank 1) and 2 LAM and 3 ICBC
    processes: behind the trunk the ICBC job's three hosts are two relay
    hosts outside, and LAM's one host one relay host; in front of it LAM
    sees the ICBC job as two hosts at the two relays' outside addresses,
    and from behind it LAM sees the ICBC job's processes as two personas at
    the relays' two inside addresses (LAM tells hosts apart by address)."""
    run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, 2, 3, lam_coll_all,
                          icbc_coll_all, "coll_all ok", args=coll_all_args(5), behind=behind,
                          trunks=2)


@pytest.mark.parametrize("through", ["relay", "trunk", "server"])
def test_lam_with_two_other_clients(prefix, build_dir, lam, lam_coll_all, icbc_coll_all, work,
                                    through):
    """A job of three clients: LAM/MPI 7.1.4's two processes (client 0),
    given impi-relay's address as its server (THROUGH relay), the leader's
    of a trunk of two relays (trunk), or impi-server's, and two ICBC jobs of two processes (clients 1 and 2, IMPI
    hosts 127.0.0.2 and 127.0.0.9); the collectives of coll_all.c but the
    reductions (-x: LAM 7.1.4 reduces to a LAM root across three clients
    wrongly, coll_all.c says why), every value checked on every rank.
    Behind the relay, each outside client is a persona of the relay; LAM
    tells hosts apart by address, so the relay is started with one inside
    address per persona (-persona-addrs, docs/impi-relay.md), each relay of a
    trunk its own. (Each ICBC client is one host here, a node's: its persona
    is relay 0's; the follower's persona addresses reach the leader, unused.)"""
    u = Universe(lam, work, "lam")
    u.boot()
    icbc_hosts = [ICBC_ADDR, "127.0.0.9"]
    args = ("-x",) + coll_all_args(6)
    try:
        server, addr, server_err = start_server(build_dir, 3, work)
        relay, raddr, relay_errs = [], addr, []
        if through != "server":
            # each relay its own addresses: 127.0.0.21, .22 (relay 0), .31, .32 (relay 1)
            relay, raddr, relay_errs = start_relay(
                build_dir, addr, work, trunks=2 if through == "trunk" else 1,
                relay_args=lambda j: ["-persona-addrs",
                                      ",".join(f"127.0.0.{21 + 10 * j + i}" for i in range(2))])
        lam_log = os.path.join(work, "lam.log")
        with open(lam_log, "w") as out:
            pl = u.run(["mpirun", "-client", "0", raddr, "-np", "2", lam_coll_all, *args],
                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        jobs, logs = [], [("lam", lam_log), ("server", server_err.name)] + \
            [("relay", e.name) for e in relay_errs]
        for k, host in enumerate(icbc_hosts):
            log = os.path.join(work, f"icbc{k + 1}.log")
            with open(log, "w") as f:
                jobs.append(subprocess.Popen(
                    [os.path.join(prefix, "bin", "mpiexec"), "-n", "2",
                     "-genv", "ICBC_IMPI_SERVER", addr, "-genv", "ICBC_IMPI_CLIENT", str(k + 1),
                     "-genv", "MPIR_CVAR_CH4_ICBC_IMPI_HOST", host, icbc_coll_all, *args],
                    stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            logs.append((f"icbc{k + 1}", log))
        codes = finish(jobs + [pl, server] + relay)
        text = {n: open(f).read() for n, f in logs}
        report = "\n".join(f"--- {n}\n{t}" for n, t in text.items())
        assert codes == [0] * (4 + len(relay)), \
            f"exit codes icbc1, icbc2, lam, impi-server (, relay): {codes}\n" + report
        for r, who in [(0, "lam"), (1, "lam"), (2, "icbc1"), (3, "icbc1"), (4, "icbc2"),
                       (5, "icbc2")]:
            assert f"rank {r}: coll_all ok" in text[who], report
    finally:
        u.halt()


@pytest.fixture(scope="session")
def lam_coll_all(lam, build_dir):
    return lam_mpicc(lam, build_dir, "coll_all")


@pytest.fixture(scope="session")
def icbc_coll_all(prefix, build_dir):
    """test/impi/coll_all.c built with ICBC's mpicc."""
    d = os.path.join(build_dir, "test-impi-lam")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "icbc_coll_all")
    r = subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exe,
                        os.path.join(TOP, "test", "impi", "coll_all.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np", [1, 2, 4])
@pytest.mark.parametrize("icbc_np", [1, 2, 4], ids=["icbc1", "icbc2", "icbc4"])
def test_icbc_job_every_collective_with_lam(prefix, build_dir, lam, lam_coll_all, icbc_coll_all,
                                            work, lam_first, np, icbc_np):
    """The MPI-1 collectives and MPI_Exscan on MPI_COMM_WORLD between an
    ICBC job and a LAM/MPI 7.1.4 client of 1, 2 and 4 processes
    (coll_all.c on both sides): Barrier; Bcast, Reduce, Gather(v) and
    Scatter(v) from every root; Allreduce, Allgather(v), Scan, Exscan and
    Reduce_scatter; every value checked on every rank. LAM composes all but
    Barrier, Bcast and Reduce from point-to-point on its own context; the
    netmod composes them the same way when a client of the communicator is
    LAM (icbc_impi_lam.c), and follows LAM onto that context for the rest
    of the communicator's life (icbc_path_impi.c).

    What LAM 7.1.4 itself cannot do across IMPI clients, between two LAM
    clients as well, is left out (docs/impi.md, LAM/MPI 7.1.4 as it
    behaves): Alltoall and Alltoallv (-a: its persistent receives never
    complete), and messages above IMPI's DATALEN (64 KiB) once a composed
    collective ran on the communicator: blocks of 3 and up to 1500 ints, so
    that Reduce_scatter's vector stays within 64 KiB (coll_all_args)."""
    run_icbc_job_with_lam(prefix, build_dir, lam, work, lam_first, np, icbc_np, lam_coll_all,
                          icbc_coll_all, "coll_all ok", args=coll_all_args(np + icbc_np))


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
@pytest.mark.parametrize("np", [1, 2, 4])
def test_collectives_with_lam(build_dir, lam, lam_coll, work, lam_first, np):
    """Barrier, Bcast and Reduce (MPI_SUM of ints) from every root, and
    Allreduce, on MPI_COMM_WORLD across a LAM client and libicbc's IMPI
    parts (impi_coll's global phase), results checked on every rank."""
    u = Universe(lam, work, "lam")
    u.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work)
        lam_client = 0 if lam_first else 1
        lam_log = os.path.join(work, "lam.log")
        with open(lam_log, "w") as out:
            pl = u.run(["mpirun", "-client", str(lam_client), addr, "-np", str(np), lam_coll],
                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        icbc_log = os.path.join(work, "icbc.log")
        with open(icbc_log, "w") as f:
            pi = subprocess.Popen([os.path.join(build_dir, "test", "impi", "impi_pingpong"),
                                   "--server", addr, "--client", str(1 - lam_client),
                                   "--host", ICBC_ADDR, "--coll", "--sizes", "",
                                   "--timeout", str(TIMEOUT)],
                                  stdout=f, stderr=subprocess.STDOUT)
            codes = finish([pi, pl, server])
        logs = {n: open(p).read() for n, p in
                (("icbc", icbc_log), ("lam", lam_log), ("server", server_err.name))}
        report = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
        assert codes == [0, 0, 0], f"exit codes icbc, lam, impi-server: {codes}\n{report}"
        icbc_rank = np if lam_first else 0
        lam_ranks = range(np) if lam_first else range(1, np + 1)
        assert f"rank {icbc_rank}: coll ok" in logs["icbc"], report
        for r in lam_ranks:
            assert f"rank {r}: coll ok" in logs["lam"], report
    finally:
        u.halt()


@pytest.mark.parametrize("auth", ["none", "key"])
def test_two_lam_clients_through_our_server(build_dir, lam, lam_prog, work, auth):
    """LAM's own start-up, host connections and messages, with our server
    in the middle: two universes, one per client, each advertising its own
    address. LAM recognises an accepted connection by its source address and
    connects without binding, so from 127.0.0.1 here: the connecting client
    (1) advertises 127.0.0.1, the accepting one (0) 127.0.0.2."""
    u0 = Universe(lam, work, "lam0")
    u1 = Universe(lam, work, "lam1")
    u0.env["IMPI_HOST_NAME"] = ICBC_ADDR
    args = []
    if auth == "key":
        # LAM's IMPI_AUTH_KEY, a decimal number, in the server's key file
        key = os.path.join(work, "impi.key")
        with open(key, "w") as f:
            f.write("1234567890123\n")
        os.chmod(key, 0o600)
        args = ["-auth", "key:" + key]
        for u in (u0, u1):
            del u.env["IMPI_AUTH_NONE"]
            u.env["IMPI_AUTH_KEY"] = "1234567890123"
    u0.boot()
    u1.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work, args)
        p0, log0 = lam_mpirun(u0, 0, addr, 1, lam_prog, 0, 1, 0, work)
        p1, log1 = lam_mpirun(u1, 1, addr, 1, lam_prog, 1, 0, 0, work)
        codes = finish([p0, p1, server])
        logs = {n: open(p).read() for n, p in
                (("client0", log0), ("client1", log1), ("server", server_err.name))}
        report = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
        assert codes == [0, 0, 0], f"exit codes client 0, client 1, impi-server: {codes}\n{report}"
        for n in SIZES.split(","):
            assert f"rank 0: {n} bytes x {ITERS} with rank 1: ok" in logs["client0"], report
            assert f"rank 1: {n} bytes x {ITERS} with rank 0: ok" in logs["client1"], report
    finally:
        u0.halt()
        u1.halt()


def test_lam_refuses_communicator_constructors_across_clients(build_dir, lam, work):
    """Why no communicator made from MPI_COMM_WORLD spans LAM and another
    client (docs/impi.md): LAM 7.1.4's own MPI_Comm_split, MPI_Comm_dup and
    MPI_Comm_create refuse a communicator that spans IMPI clients with
    MPI_ERR_COMM, between two LAM clients, before any message."""
    prog = lam_mpicc(lam, build_dir, "lam_constructors")
    u0 = Universe(lam, work, "lam0")
    u1 = Universe(lam, work, "lam1")
    u0.env["IMPI_HOST_NAME"] = ICBC_ADDR
    u0.boot()
    u1.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work)
        logs, procs = {}, []
        for k, u in enumerate((u0, u1)):
            out = open(os.path.join(work, f"lam-client{k}.log"), "w")
            procs.append(u.run(["mpirun", "-client", str(k), addr, "-np", "2", prog],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            logs[f"client{k}"] = out.name
        codes = finish(procs + [server])
        text = {n: open(p).read() for n, p in logs.items()}
        report = "\n".join(f"--- {n}\n{t}" for n, t in text.items())
        assert codes == [0, 0, 0], f"exit codes client 0, client 1, impi-server: {codes}\n{report}"
        for k, r0 in ((0, 0), (1, 2)):
            for r in (r0, r0 + 1):
                for name in ("MPI_Comm_split", "MPI_Comm_dup", "MPI_Comm_create"):
                    assert f"rank {r}: {name}: refused (MPI_ERR_COMM: " in text[f"client{k}"], \
                        report
    finally:
        u0.halt()
        u1.halt()


def test_lam_with_the_wrong_key_is_refused(build_dir, lam, lam_prog, work):
    """impi-server -auth key:FILE refuses a LAM client with another key,
    names it, and goes on waiting (a stranger cannot end a start-up)."""
    u = Universe(lam, work, "lam")
    key = os.path.join(work, "impi.key")
    with open(key, "w") as f:
        f.write("42\n")
    os.chmod(key, 0o600)
    del u.env["IMPI_AUTH_NONE"]
    u.env["IMPI_AUTH_KEY"] = "43"
    u.boot()
    try:
        server, addr, server_err = start_server(build_dir, 2, work, ["-auth", "key:" + key])
        p, log = lam_mpirun(u, 0, addr, 1, lam_prog, 0, 1, 0, work)
        code = finish([p], timeout=60)[0]
        time.sleep(0.5)
        alive = server.poll() is None
        server.kill()
        server.wait()
        lam_out = open(log).read()
        report = f"--- lam\n{lam_out}\n--- server\n{open(server_err.name).read()}"
        assert code != "timeout", report
        # LAM's mpirun does not always pass on the status of a process that
        # died in MPI_Init (seen exiting 0 after "MPI_Recv: process in local
        # group is dead ... MPI_Init()"): the promise is that the program never
        # got past MPI_Init, and that LAM said so or failed
        assert ": ok" not in lam_out and "in a world of" not in lam_out, report
        assert code != 0 or "MPI_Init" in lam_out, report
        assert "sent the wrong key" in open(server_err.name).read(), report
        assert alive, "impi-server ended at a stranger's wrong key\n" + report
    finally:
        u.halt()


if __name__ == "__main__":
    # python3 test/pytest/test_impi_lam.py --build-only BUILD_DIR: build LAM
    # where this suite looks for it (test/run.py's preparation step)
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "--build-only":
        sys.exit("usage: test_impi_lam.py --build-only BUILD_DIR")
    sys.exit(subprocess.call(lam_build_command(os.path.abspath(sys.argv[2]))))


@pytest.fixture(scope="session")
def lam_wan(prefix, request):
    """Two clusters of two nodes (the testbed's defaults otherwise, 1 ms one
    way): the ICBC job on a0 and a1, LAM on b0."""
    import conftest  # the suite's testbed helper (conftest.py)
    with conftest.bed(prefix, os.path.join(TOP, "_build", "test-pytest"), "lw",
                      ["--clusters", "2", "--nodes", "2", "--routers", "1", "--delay", "1ms"],
                      ["a0", "a1"], request.config.getoption("--keep")) as b:
        yield b


@pytest.mark.parametrize("lam_first", [True, False], ids=["lam-client0", "icbc-client0"])
def test_icbc_nodes_with_lam_across_the_wan(prefix, build_dir, lam, lam_prog, icbc_pingpong,
                                            lam_coll_all, icbc_coll_all, lam_wan, work,
                                            lam_first):
    """An ICBC job on two emulated nodes of cluster a, two processes each
    (two IMPI hosts of two processes), started as docs/impi.md tells a user
    (the testbed's env file, mpiexec with a hosts file, ICBC_IMPI_SERVER and
    ICBC_IMPI_CLIENT), and a LAM/MPI client of 2 processes on node b0 across
    the emulated WAN, through impi-server on b0. First every LAM process
    ping-pongs with the second process of one ICBC node (which reaches its
    host through the node's local link), both pairs at once, every size both
    ways; then coll_all, every collective from every root."""
    from mpirun import run_mpi  # test/harness, on the path conftest.py sets
    two_clusters = lam_wan
    tb = two_clusters.tb
    ns = f"{two_clusters.env['ICBC_TESTBED']}-b0"
    addr = {n.split()[0]: n.split()[4] for n in open(os.path.join(tb.state, "nodes"))
            if not n.startswith("#") and n.strip()}
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("a0:2\na1:2\n")
    u = Universe(lam, work, "lam", netns=ns, addr=addr["b0"])
    u.boot()
    try:
        lam_client = 0 if lam_first else 1
        lam_base, icbc_base = (0, 2) if lam_first else (4, 0)
        lam_list = f"{lam_base},{lam_base + 1}"
        icbc_list = f"{icbc_base + 1},{icbc_base + 3}"
        for name, lam_args, icbc_exe, icbc_args, ok in (
                ("pingpong", [lam_prog, lam_list, icbc_list, SIZES, str(ITERS), "0"],
                 icbc_pingpong, [icbc_list, lam_list, SIZES, str(ITERS), "1"], None),
                ("coll_all", [lam_coll_all, *coll_all_args(6)], icbc_coll_all,
                 list(coll_all_args(6)), "coll_all ok")):
            err = open(os.path.join(work, f"{name}-impi-server.err"), "w+")
            server = subprocess.Popen(["ip", "netns", "exec", ns,
                                       os.path.join(build_dir, "impi-server"), "-server", "2",
                                       "-host", addr["b0"], "-listen", addr["b0"],
                                       "-timeout", str(TIMEOUT)],
                                      stdout=subprocess.PIPE, stderr=err, text=True)
            server_addr = server.stdout.readline().strip()
            assert server_addr, "impi-server printed no address"
            lam_log = os.path.join(work, f"{name}-lam.log")
            with open(lam_log, "w") as out:
                pl = u.run(["mpirun", "-client", str(lam_client), server_addr, "-np", "2",
                            *lam_args], stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
            r = run_mpi(prefix, two_clusters.env, icbc_exe, 4, work, name=f"{name}-icbc",
                        hosts=hosts, args=icbc_args, timeout=TIMEOUT,
                        extra_env={"ICBC_IMPI_SERVER": server_addr,
                                   "ICBC_IMPI_CLIENT": str(1 - lam_client)})
            codes = finish([pl, server])
            err.seek(0)
            report = (f"{r.describe()}\n--- lam\n{open(lam_log).read()}\n"
                      f"--- impi-server\n{err.read()}")
            assert r.rc == 0 and not r.timed_out and codes == [0, 0], \
                f"icbc rc {r.rc}, lam and impi-server: {codes}\n{report}"
            if ok is None:
                for n in SIZES.split(","):
                    for i, l in zip(icbc_list.split(","), lam_list.split(",")):
                        assert f"rank {i}: {n} bytes x {ITERS} with rank {l}: ok" in r.output, \
                            report
                        assert f"rank {l}: {n} bytes x {ITERS} with rank {i}: ok" \
                            in open(lam_log).read(), report
            else:
                for rank in range(icbc_base, icbc_base + 4):
                    assert f"rank {rank}: {ok}" in r.output, report
                for rank in range(lam_base, lam_base + 2):
                    assert f"rank {rank}: {ok}" in open(lam_log).read(), report
    finally:
        u.halt()


@pytest.fixture(scope="session")
def lam_private(prefix, request):
    """Cluster a with private addresses (--private a: only its front-end a0
    reaches the WAN; a1 and a2 have fabric addresses alone) and cluster b,
    1 ms one way: the ICBC job on a1 and a2, impi-relay on a0, LAM and
    impi-server on b0."""
    import conftest  # the suite's testbed helper (conftest.py)
    with conftest.bed(prefix, os.path.join(TOP, "_build", "test-pytest"), "lp",
                      ["--clusters", "2", "--nodes", "3", "--routers", "1", "--delay", "1ms",
                       "--private", "a"],
                      ["a1", "a2"], request.config.getoption("--keep")) as b:
        yield b


def test_private_icbc_cluster_with_lam_through_a_relay(prefix, build_dir, lam, icbc_coll_all,
                                                       lam_coll_all, lam_private, work):
    """A cluster whose compute nodes have private addresses joins an IMPI
    job with LAM/MPI across the emulated WAN, started as docs/impi-relay.md
    tells a user: impi-server on b0; impi-relay on the front-end a0, given
    the server and its fabric address; the ICBC job on a1 and a2 (two
    processes each) through the testbed's env file and mpiexec with
    ICBC_IMPI_SERVER set to what the relay printed; LAM on b0 with the
    server's address. coll_all, every collective from every root, checked on
    every rank; every program and the relay and server exit 0."""
    from mpirun import run_mpi  # test/harness, on the path conftest.py sets
    bed = lam_private
    tb_name = bed.env["ICBC_TESTBED"]
    addr = {n.split()[0]: n.split()[4] for n in open(os.path.join(bed.tb.state, "nodes"))
            if not n.startswith("#") and n.strip()}
    fabric_a0 = "10.100.0.1"  # docs/testbed.md, address plan
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("a1:2\na2:2\n")
    u = Universe(lam, work, "lam", netns=f"{tb_name}-b0", addr=addr["b0"])
    u.boot()
    try:
        err = open(os.path.join(work, "impi-server.err"), "w+")
        server = subprocess.Popen(["ip", "netns", "exec", f"{tb_name}-b0",
                                   os.path.join(build_dir, "impi-server"), "-server", "2",
                                   "-host", addr["b0"], "-listen", addr["b0"],
                                   "-timeout", str(TIMEOUT)],
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        server_addr = server.stdout.readline().strip()
        assert server_addr, "impi-server printed no address"
        rerr = open(os.path.join(work, "impi-relay.err"), "w+")
        relay = subprocess.Popen(["ip", "netns", "exec", f"{tb_name}-a0",
                                  os.path.join(build_dir, "impi-relay"), "-server", server_addr,
                                  "-inside", fabric_a0, "-timeout", str(TIMEOUT)],
                                 stdout=subprocess.PIPE, stderr=rerr, text=True)
        relay_addr = relay.stdout.readline().strip()
        assert relay_addr.startswith(fabric_a0 + ":"), \
            f"impi-relay printed {relay_addr!r}; {open(rerr.name).read()}"
        lam_log = os.path.join(work, "lam.log")
        with open(lam_log, "w") as out:
            pl = u.run(["mpirun", "-client", "1", server_addr, "-np", "2", lam_coll_all,
                        *coll_all_args(6)], stdout=out, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
        r = run_mpi(prefix, bed.env, icbc_coll_all, 4, work, name="icbc", hosts=hosts,
                    args=list(coll_all_args(6)), timeout=TIMEOUT,
                    extra_env={"ICBC_IMPI_SERVER": relay_addr, "ICBC_IMPI_CLIENT": "0"})
        codes = finish([pl, server, relay])
        report = (f"{r.describe()}\n--- lam\n{open(lam_log).read()}\n"
                  f"--- impi-server\n{open(err.name).read()}\n"
                  f"--- impi-relay\n{open(rerr.name).read()}")
        assert r.rc == 0 and not r.timed_out and codes == [0, 0, 0], \
            f"icbc rc {r.rc}, lam, impi-server and impi-relay: {codes}\n{report}"
        for rank in range(4):
            assert f"rank {rank}: coll_all ok" in r.output, report
        for rank in range(4, 6):
            assert f"rank {rank}: coll_all ok" in open(lam_log).read(), report
    finally:
        u.halt()


def test_private_icbc_cluster_with_lam_through_its_routers_relay(prefix, build_dir, lam,
                                                                 icbc_coll_all, lam_coll_all,
                                                                 lam_private, work):
    """The same private cluster, its relay run by its router instead
    (docs/impi-relay.md, "In the router file"): the user's router file for
    cluster a has the line impi-relay server=B0:7400 port=7300 and LAM as
    impi entry b; icbc-router runs on a0 with that file; the ICBC job on a1
    and a2 is started with the file alone (no IMPI variable); LAM on b0 with
    the server's address. coll_all checked on every rank; the programs and
    the server exit 0; the router logs the job's end."""
    from mpirun import run_mpi  # test/harness, on the path conftest.py sets
    bed = lam_private
    tb_name = bed.env["ICBC_TESTBED"]
    addr = {n.split()[0]: n.split()[4] for n in open(os.path.join(bed.tb.state, "nodes"))
            if not n.startswith("#") and n.strip()}
    server_addr = f"{addr['b0']}:7400"
    conf = os.path.join(work, "private-lam.conf")
    with open(conf, "w") as f:
        f.write(f"key {os.path.join(bed.tb.state, 'routers.key')}\n"
                "cluster a\n"
                "    hosts a0 a1 a2\n"
                "    fabric 10.100.0.0/24\n"
                "    router a0 fabric=10.100.0.1:7100 wan=10.200.0.1:7200\n"
                f"    impi-relay server={server_addr} port=7300\n"
                f"impi b server={server_addr}\n")
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("a1:2\na2:2\n")
    pidfile, rlog = os.path.join(work, "lam-router-a0.pid"), os.path.join(work, "lam-router-a0.log")
    for p in (pidfile, rlog):
        if os.path.exists(p):
            os.unlink(p)
    r = bed.tb.run_on("a0", [os.path.join(prefix, "bin", "icbc-router"), "--routerfile", conf,
                             "--host", "a0", "--daemon", "--pidfile", pidfile, "--logfile", rlog,
                             "--log-level", "info"], timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(open(pidfile).read())
    u = Universe(lam, work, "lam", netns=f"{tb_name}-b0", addr=addr["b0"])
    u.boot()
    try:
        err = open(os.path.join(work, "impi-server.err"), "w+")
        server = subprocess.Popen(["ip", "netns", "exec", f"{tb_name}-b0",
                                   os.path.join(build_dir, "impi-server"), "-server", "2",
                                   "-host", addr["b0"], "-listen", addr["b0"], "-port", "7400",
                                   "-timeout", str(TIMEOUT)],
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        assert server.stdout.readline().strip() == server_addr, open(err.name).read()
        lam_log = os.path.join(work, "lam.log")
        with open(lam_log, "w") as out:
            pl = u.run(["mpirun", "-client", "1", server_addr, "-np", "2", lam_coll_all,
                        *coll_all_args(6)], stdout=out, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
        r = run_mpi(prefix, dict(bed.env, ICBC_ROUTERFILE=conf), icbc_coll_all, 4, work,
                    name="icbc", hosts=hosts, args=list(coll_all_args(6)), timeout=TIMEOUT)
        codes = finish([pl, server])
        deadline = time.time() + 10  # logged after the hosts' last close
        while "job 1 ended;" not in open(rlog).read() and time.time() < deadline:
            time.sleep(0.1)
        report = (f"{r.describe()}\n--- lam\n{open(lam_log).read()}\n"
                  f"--- impi-server\n{open(err.name).read()}\n"
                  f"--- icbc-router a0\n{open(rlog).read()}")
        assert r.rc == 0 and not r.timed_out and codes == [0, 0], \
            f"icbc rc {r.rc}, lam and impi-server: {codes}\n{report}"
        for rank in range(4):
            assert f"rank {rank}: coll_all ok" in r.output, report
        for rank in range(4, 6):
            assert f"rank {rank}: coll_all ok" in open(lam_log).read(), report
        m = re.search(r"impi relay 0 of 1 of cluster a: job 1 ended; relayed (\d+) packet",
                      open(rlog).read())
        assert m and int(m.group(1)) > 0, report
    finally:
        u.halt()
        os.kill(pid, 15)
        deadline = time.time() + 10
        while os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.1)
