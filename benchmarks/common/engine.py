"""The run engine of the benchmark harnesses (benchmarks/p2p, benchmarks/routed).

A benchmark run is one bounded mpiexec of a program of benchmarks/src, whose
stdout is a CSV and whose stderr carries three lines the engine reads:

    icbc_PROG: ...; device: ch4:icbc; ...          the MPI device that really ran
    icbc_PROG: payload bytes sent by all ranks: N  what must have crossed the network
    icbc_PROG: all sizes done, entering MPI_Finalize

run_try() starts the job in its own session, kills it at its time limit, and
kills it FINALIZE_GRACE seconds after it entered MPI_Finalize (its data is
complete: a "finalize-hang", kept unless a retry is clean). The caller's
check turns what happened into one status: ok, finalize-hang, timeout,
failed, wrong-device, or a traffic check's own (no-network, no-wan). A run
that is not ok is retried once (Runner.run_one); every retry, hang and
failure goes to the events file.
"""
import dataclasses
import datetime
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(REPO, "benchmarks", "src")
sys.path.insert(0, os.path.join(REPO, "test", "harness"))

import testbed as tbmod  # noqa: E402


class UsageError(Exception):
    """Bad options or set-up: exit status 2."""


def note(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return (f"nproc={os.cpu_count()}, kernel={os.uname().release}, cpu={model}, "
            f"mem={mem_kib // (1 << 20)} GiB")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cmdline(prog, argv):
    return " ".join([prog] + [shlex.quote(a) for a in argv])


def parse_size(text):
    m = re.fullmatch(r"([0-9]+)([KMG]?)", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def parse_env_items(text, what):
    """'K=V K=V' -> [(K, V)]; a word without '=' is a usage error."""
    items = []
    for kv in text.split():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", kv):
            raise UsageError(f"{what} item '{kv}' is not KEY=VALUE")
        k, v = kv.split("=", 1)
        items.append((k, v))
    return items


@dataclasses.dataclass
class Install:
    """An MPICH install: its compiler, launcher, device and kind (icbc: our
    netmod; stock: any other MPI, run over UCX's TCP transport)."""
    prefix: str
    mpicc: str
    mpiexec: str
    device: str
    kind: str

    @classmethod
    def find(cls, prefix, kind="auto", what="install"):
        def tool(name):
            for n in (f"{name}.mpich", name):
                p = os.path.join(prefix, "bin", n)
                if os.access(p, os.X_OK):
                    return p
            return None
        mpicc, mpiexec = tool("mpicc"), tool("mpiexec")
        if not mpicc or not mpiexec:
            raise UsageError(f"{what}: no mpicc/mpiexec in {prefix}/bin "
                             "(is the icbc build installed? ./quickstart.sh build)")
        device = "unknown"
        ver = os.path.join(prefix, "bin", "mpichversion")
        if os.access(ver, os.X_OK):
            out = subprocess.run([ver], capture_output=True, text=True).stdout
            m = re.search(r"^MPICH Device:\s*(\S+)", out, re.M)
            device = m.group(1) if m else "unknown"
        if kind == "auto":
            if device == "unknown":
                raise UsageError(f"{what}: cannot tell the MPI device of {prefix} "
                                 "(no mpichversion); name its kind")
            kind = "icbc" if device.startswith("ch4:icbc") else "stock"
        if kind not in ("icbc", "stock"):
            raise UsageError(f"{what}: kind must be icbc, stock or auto")
        return cls(prefix, mpicc, mpiexec, device, kind)

    def compile(self, name, src, outdir, logdir, includes=()):
        os.makedirs(outdir, exist_ok=True)
        exe = os.path.join(outdir, name)
        log = os.path.join(logdir, f"compile_{os.path.basename(outdir)}_{name}.log")
        argv = [self.mpicc, "-O2", "-Wall", "-I" + SRC] + ["-I" + i for i in includes] + \
            ["-o", exe, src]
        with open(log, "w") as f:
            r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.stderr.write(open(log).read())
            raise UsageError(f"compiling {src} with {self.mpicc} failed (log {log})")
        return exe

    def transport_env(self, device):
        """Inter-node traffic must cross the namespace network: UCX's
        shared-memory transports would otherwise reach across namespaces."""
        if self.kind == "stock":
            env = [("UCX_TLS", "tcp,self"), ("UCX_NET_DEVICES", device)]
        else:
            env = [("MPIR_CVAR_CH4_ICBC_UCX_TLS", "tcp"),
                   ("MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES", device),
                   ("UCX_NET_DEVICES", device)]
        if self.prefix != "/usr" and os.path.isdir(os.path.join(self.prefix, "lib")):
            lib = os.path.join(self.prefix, "lib")
            old = os.environ.get("LD_LIBRARY_PATH")
            env.append(("LD_LIBRARY_PATH", f"{lib}:{old}" if old else lib))
        return env


@dataclasses.dataclass
class Try:
    """What one bounded mpiexec did."""
    csv: str
    err: str
    rc: int
    secs: float
    hung: bool          # killed FINALIZE_GRACE s after entering MPI_Finalize
    timed_out: bool
    done: bool          # the program's "all sizes done" line (or the caller's success line)
    device: str         # the device the program reports having run on
    sent: int           # payload bytes the program reports, None if it did not say
    status: str = ""
    detail: str = ""

    @property
    def good(self):
        return self.status in ("ok", "finalize-hang")


def program_lines(err, prog):
    """The device, payload and done lines a benchmark program wrote to stderr."""
    try:
        text = open(err, errors="replace").read()
    except OSError:
        text = ""
    done = f"{prog}: all sizes done, entering MPI_Finalize" in text
    m = re.search(rf"^{re.escape(prog)}: .*; device: ([^;\n]*)", text, re.M)
    device = m.group(1).strip() if m else ""
    m = re.search(rf"^{re.escape(prog)}: payload bytes sent by all ranks: ([0-9]+)", text, re.M)
    sent = int(m.group(1)) if m else None
    return done, device, sent


def tail_text(path, n):
    try:
        lines = [l for l in open(path, errors="replace").read().splitlines() if l.strip()]
    except OSError:
        return ""
    return "|".join(lines[-n:])


class Runner:
    """Bounded runs with one retry, and the events file."""

    def __init__(self, events_path, header, timeout, fin_grace, prog_name):
        self.events_path = events_path
        self.timeout = timeout
        self.fin_grace = fin_grace
        self.prog_name = prog_name
        self.failed_runs = 0
        self.running = None
        self.leftover_killer = None
        with open(events_path, "w") as f:
            f.write(f"# {header}\n")

    def event(self, msg):
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with open(self.events_path, "a") as f:
            f.write(f"{stamp} {msg}\n")
        print(f"{self.prog_name}: {msg}", file=sys.stderr, flush=True)

    def events(self, word=None):
        out = []
        with open(self.events_path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                line = line.rstrip("\n")
                if word is None or f" {word} " in line:
                    out.append(line)
        return out

    def mpiexec(self, argv, csv, err, done_in_csv=None):
        """One bounded mpiexec: stdout to CSV, stderr to ERR (after a line
        with the command). Returns (rc, secs, hung, timed_out)."""
        with open(err, "w") as f:
            f.write("# " + " ".join(shlex.quote(a) for a in argv) + "\n")
        t0 = time.time()
        with open(csv, "w") as out, open(err, "a") as e:
            p = subprocess.Popen(argv, stdout=out, stderr=e, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.running = p
        fin_since = None
        hung = timed_out = False
        while p.poll() is None:
            now = time.time()
            if fin_since is None and self._finalizing(err, csv, done_in_csv):
                fin_since = now
            if fin_since is not None and now - fin_since > self.fin_grace:
                hung = True
                self._kill(p, signal.SIGTERM)
                time.sleep(3)
                self._kill(p, signal.SIGKILL)
                break
            if now - t0 > self.timeout:
                timed_out = True
                self._kill(p, signal.SIGKILL)
                break
            time.sleep(0.5)
        rc = p.wait()
        self.running = None
        if (hung or timed_out) and self.leftover_killer:
            self.leftover_killer()
        return rc, time.time() - t0, hung, timed_out

    @staticmethod
    def _finalizing(err, csv, done_in_csv):
        try:
            if "entering MPI_Finalize" in open(err, errors="replace").read():
                return True
            if done_in_csv and re.search(done_in_csv, open(csv, errors="replace").read(), re.M):
                return True
        except OSError:
            pass
        return False

    @staticmethod
    def _kill(p, sig):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass

    def stop(self):
        """Kills a job still running (the harness is ending)."""
        if self.running and self.running.poll() is None:
            self._kill(self.running, signal.SIGKILL)
            self.running.wait()
            if self.leftover_killer:
                self.leftover_killer()

    def judge(self, t, want_device, what_ran):
        """The common verdict of a try: hang, timeout, failure, wrong device.
        Leaves status empty when the traffic check is the caller's to make."""
        if t.hung or t.timed_out:
            if t.done and t.hung:
                t.status = "finalize-hang"
                t.detail = (f"all sizes measured, then no exit within {self.fin_grace}s of "
                            "entering MPI_Finalize (killed)")
            else:
                t.status = "timeout"
                t.detail = f"no result within {self.timeout}s; last line: {tail_text(t.csv, 1)}"
        elif t.rc != 0 or not t.done:
            t.status = "failed"
            t.detail = f"exit status {t.rc}; stderr: {tail_text(t.err, 3)}"
        elif want_device != "unknown" and t.device != want_device:
            t.status = "wrong-device"
            t.detail = (f"the library that ran reports device '{t.device}', {what_ran} "
                        f"says '{want_device}'")
        return t

    def run_one(self, what, raw, attempt):
        """ATTEMPT(try_no) -> Try, at most twice; the good data goes to RAW.
        Returns RAW or None."""
        if os.path.exists(raw):
            os.unlink(raw)
        kept = None
        for try_no in (1, 2):
            t = attempt(try_no)
            if t.good:
                with open(t.csv) as src, open(raw, "w") as dst:
                    dst.write(src.read())
                kept = try_no
                note(f"{what} try {try_no}: {t.status} in {t.secs:.0f} s ({t.detail})")
                if t.status == "ok":
                    if try_no > 1:
                        self.event(f"{what} try {try_no}: ok: {t.detail} (data kept)")
                    break
                self.event(f"{what} try {try_no}: {t.status}: {t.detail} "
                           "(data complete, kept unless the retry is clean)")
            else:
                note(f"{what} try {try_no}: {t.status} in {t.secs:.0f} s")
                self.event(f"{what} try {try_no}: {t.status}: {t.detail}")
        if kept:
            return raw
        self.failed_runs += 1
        return None


class Bed:
    """A testbed for a benchmark: brought up (and down at the end) unless one
    of that name exists already, which is reused and left up."""

    def __init__(self, name, prefix, args, logdir):
        self.tb = tbmod.Testbed(name, prefix, args, logdir)
        self.name = name
        self.state = self.tb.state
        self.owned = not os.path.isdir(self.state)

    def up(self):
        if not self.owned:
            note(f"testbed {self.name} exists already: reusing it (same arguments required), "
                 "leaving it up")
        note(f"testbed: icbc-testbed up --name {self.name} {' '.join(self.tb.args)}")
        log = os.path.join(self.tb.work, "testbed_up.log")
        with open(log, "w") as f:
            r = subprocess.run([self.tb.tool, "up", "--name", self.name] + self.tb.args,
                               stdout=f, stderr=subprocess.STDOUT, timeout=300)
        if r.returncode != 0:
            sys.stderr.write(open(log).read())
            raise UsageError("icbc-testbed up failed")
        if not os.path.isfile(os.path.join(self.state, "env")):
            raise UsageError(f"icbc-testbed up wrote no {self.state}/env")
        # ". env", as a user does before mpiexec: the launcher into the
        # node namespaces, the host file, the router file
        os.environ.update(self.tb.user_env())

    def down(self):
        if self.owned:
            note(f"testbed {self.name}: down")
            r = subprocess.run([self.tb.tool, "down", "--name", self.name],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode != 0:
                print(f"warning: 'icbc-testbed down --name {self.name}' failed", file=sys.stderr)

    def ns(self, node):
        return f"{self.name}-{node}"

    def read_in(self, node, path):
        r = subprocess.run(["ip", "netns", "exec", self.ns(node), "cat", path],
                           capture_output=True, text=True)
        try:
            return int(r.stdout.strip())
        except ValueError:
            return 0

    def tx_bytes(self, node, dev):
        return self.read_in(node, f"/sys/class/net/{dev}/statistics/tx_bytes")

    def kill_leftovers(self, nodes, exes):
        """Benchmark processes and hydra proxies left in the node namespaces
        after a killed run (mpiexec does not always take its remote processes
        with it); routers stay."""
        names = {os.path.realpath(e) for e in exes}
        for node in nodes:
            r = subprocess.run(["ip", "netns", "pids", self.ns(node)], capture_output=True,
                               text=True)
            for pid in r.stdout.split():
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                if exe in names or "hydra_pmi_proxy" in exe:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                        print(f"killed leftover pid {pid} ({exe}) on {node}", file=sys.stderr)
                    except OSError:
                        pass


def host_ticks():
    """(all, idle) clock ticks of the host's cores since boot (/proc/stat;
    idle with iowait): the namespaces share the kernel, so this is every
    rank, router and the WAN emulator together."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4]


class CpuMeter:
    """What a run cost the machine, from its creation to stop(): the host's
    CPU use in percent of all cores, and the CPU seconds of this process's
    children that ended meanwhile (mpiexec and all it started)."""

    def __init__(self):
        self.ticks = host_ticks()
        self.children = self._children()

    @staticmethod
    def _children():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def stop(self):
        (t0, i0), (t1, i1) = self.ticks, host_ticks()
        pct = 100.0 * ((t1 - t0) - (i1 - i0)) / max(1, t1 - t0)
        return pct, self._children() - self.children


def cpu_busy():
    """Percent of the host's CPU time used in the next second."""
    meter = CpuMeter()
    time.sleep(1)
    return int(meter.stop()[0])


def genv(items):
    """-genv arguments of mpiexec for [(K, V)]."""
    out = []
    for k, v in items:
        out += ["-genv", k, v]
    return out


def compare(argv, summary):
    """benchmarks/common/compare.py in this process, its output printed and
    appended to SUMMARY. Returns its exit status."""
    return _tool(os.path.join(REPO, "benchmarks", "common"), "compare", argv, summary)


def _tool(path, module, argv, summary):
    import contextlib
    import importlib
    import io
    if path not in sys.path:
        sys.path.insert(0, path)
    mod = importlib.import_module(module)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = mod.main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    text = buf.getvalue()
    print(text, end="", flush=True)
    with open(summary, "a") as f:
        f.write(text)
    return rc or 0


def run_main(prog, usage, parse, make, argv):
    """The life of one benchmark run: options (exit 2 when bad, the USAGE text
    for --help), set-up, then BENCH.start(), runs() and report() with
    BENCH.cleanup() whatever happens. Exit status 1 when a run gave no valid
    data after its retry or the report says so, 130 when interrupted."""
    try:
        o = parse(argv)
        if o.help:
            sys.stdout.write(usage)
            return 0
        bench = make(o, argv)
        bench.setup()
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        bench.start()
        bench.runs()
        fail = bench.report()
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        bench.cleanup()
    if bench.runner.failed_runs or fail:
        print(f"{prog}: {bench.runner.failed_runs} run(s) gave no valid data after a retry; "
              f"see {bench.runner.events_path}", file=sys.stderr)
        return 1
    return 0


def tee(summary, text):
    print(text, flush=True)
    with open(summary, "a") as f:
        f.write(text + "\n")
