#!/usr/bin/python3
"""Point-to-point latency and bandwidth of two MPI installs (by default
MPICH+icbc and stock MPICH ch4:ucx), side by side, between two emulated nodes.

Brings up its own testbed (icbc-testbed, 1 cluster x 2 nodes), compiles the
benchmarks with each install's own mpicc, runs them alternately (A then B on
odd reps, B then A on even ones), checks every run (exit status, all sizes
done, payload check, the MPI device that really ran, and that the payload
crossed the fab0 interfaces), and writes per-size medians and ratios as CSV +
PNG with a verdict per target. benchmarks/p2p/run.sh is its command; see
benchmarks/README.md.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))

import engine  # noqa: E402
from engine import REPO, SRC, UsageError, note, tee  # noqa: E402

PROG = "run.sh"
NET_DEV = "fab0"

USAGE = """\
Usage: benchmarks/p2p/run.sh [options]

Compares the point-to-point latency (icbc_latency) and bandwidth (icbc_bw) of two MPI
installs between two emulated nodes (network namespaces of icbc-testbed), side by side.
Side A defaults to our MPICH+icbc build, side B to Debian's stock MPICH (ch4:ucx).

Options:
  --icbc PREFIX, --a PREFIX   install of side A (default: <repo>/_install)
  --stock PREFIX, --b PREFIX  install of side B (default: /usr)
  --label-a NAME              column name of side A (default: icbc)
  --label-b NAME              column name of side B (default: stock)
  --kind-a K, --kind-b K      icbc | stock | auto (default auto: from the install's
                              mpichversion, ch4:icbc -> icbc, anything else -> stock);
                              selects the transport environment below
  --env-a "K=V ...", --env-b "K=V ..."
                              extra environment for that side's ranks (added last)
  --reps N                    repetitions per side and benchmark (default 3)
  --out DIR                   results directory (default: benchmarks/results)
  --build DIR                 binaries and logs (default: <repo>/_build/bench-p2p)
  --only latency|bw           run one benchmark only
  --stat mean|median|best     statistic over the timed iterations of one run, passed to
                              both programs (default median: a preempted iteration on a
                              busy host does not move it; mean is OSU's definition)
  --latency-opts "..."        extra options for icbc_latency (e.g. "--max 1M")
  --bw-opts "..."             extra options for icbc_bw (e.g. "--window 32")
  --timeout SEC               bound of one mpiexec run (default 900)
  --finalize-grace SEC        time allowed between "entering MPI_Finalize" and the exit of
                              mpiexec; past it the run is killed and recorded as a
                              finalize hang (its data is kept, the run retried once)
                              (default 20)
  --quiet-wait SEC            before each run, wait up to SEC seconds for the CPU use of
                              other processes to fall to --quiet-max percent of the host
                              (default 0: do not wait; the use is recorded either way)
  --quiet-max PCT             (default 15)
  --testbed-name NAME         icbc-testbed name (default bench)
  --pin yes|no                pin rank r to CPU r mod nproc with taskset, on both sides
                              (default yes): the two namespace nodes share the host's
                              cores, and an unpinned pair sometimes shares one core or
                              migrates, which moves a latency by 20-30% between runs
  --lat-target R              latency target: A/B <= R at every size (default 1.10)
  --bw-target R               bandwidth target: A/B >= R (default 0.95) ...
  --bw-target-from SIZE       ... for sizes >= SIZE (default 64K)
  --help                      this text

Transport environment (inter-node traffic must cross the namespace network; UCX's
shared-memory transports would otherwise reach across namespaces):
  stock: UCX_TLS=tcp,self UCX_NET_DEVICES=fab0
  icbc:  MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=fab0
         UCX_NET_DEVICES=fab0
Each run is also checked against the fab0 byte counters of both namespaces: they must
have carried at least the payload the benchmark reports having sent.

Output (in --out): p2p_latency.csv, p2p_bw.csv (size,A,B,ratio with # metadata lines:
command, date, machine, installs, events), p2p_latency.png, p2p_bw.png, p2p_summary.txt
(tables and verdicts), p2p_events.txt (failed or retried runs), raw/ (one CSV per run).
Exit status: 0 when every run gave valid data (whatever the verdicts), 1 when some run
failed even after its retry, 2 on bad usage or set-up.
"""


class Usage(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def options(argv):
    p = Usage(prog=PROG, add_help=False)
    a = p.add_argument
    a("-h", "--help", action="store_true")
    a("--icbc", "--a", dest="a_prefix", default=os.path.join(REPO, "_install"))
    a("--stock", "--b", dest="b_prefix", default="/usr")
    a("--label-a", default="icbc")
    a("--label-b", default="stock")
    a("--kind-a", default="auto")
    a("--kind-b", default="auto")
    a("--env-a", default="")
    a("--env-b", default="")
    a("--reps", default="3")
    a("--out", default=os.path.join(REPO, "benchmarks", "results"))
    a("--build", default=os.path.join(REPO, "_build", "bench-p2p"))
    a("--only", default="latency bw")
    a("--stat", default="median")
    a("--latency-opts", default="")
    a("--bw-opts", default="")
    a("--timeout", default="900")
    a("--finalize-grace", default="20")
    a("--quiet-wait", default="0")
    a("--quiet-max", default="15")
    a("--testbed-name", default="bench")
    a("--pin", default="yes")
    a("--lat-target", type=float, default=1.10)
    a("--bw-target", type=float, default=0.95)
    a("--bw-target-from", default="64K")
    o = p.parse_args(argv)
    if o.help:
        return o
    for name, v in (("--reps", o.reps), ("--timeout", o.timeout),
                    ("--finalize-grace", o.finalize_grace)):
        if not re.fullmatch(r"[1-9][0-9]*", v):
            raise UsageError(f"{name} must be a positive number")
    o.reps, o.timeout, o.finalize_grace = int(o.reps), int(o.timeout), int(o.finalize_grace)
    if o.pin not in ("yes", "no"):
        raise UsageError("--pin takes yes or no")
    if not re.fullmatch(r"[0-9]+", o.quiet_wait):
        raise UsageError("--quiet-wait must be a number of seconds")
    if not re.fullmatch(r"[0-9]+", o.quiet_max) or int(o.quiet_max) > 100:
        raise UsageError("--quiet-max must be 0..100")
    o.quiet_wait, o.quiet_max = int(o.quiet_wait), int(o.quiet_max)
    for lab in (o.label_a, o.label_b):
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", lab):
            raise UsageError("labels must be a letter then letters, digits, _ . -")
    if o.label_a == o.label_b:
        raise UsageError("--label-a and --label-b must differ")
    o.benches = o.only.split()
    if not o.benches or any(b not in ("latency", "bw") for b in o.benches):
        raise UsageError("--only takes latency or bw")
    if o.stat not in ("mean", "median", "best"):
        raise UsageError("--stat takes mean, median or best")
    o.latency_opts = f"--stat {o.stat}" + (f" {o.latency_opts}" if o.latency_opts else "")
    o.bw_opts = f"--stat {o.stat}" + (f" {o.bw_opts}" if o.bw_opts else "")
    o.a_env = engine.parse_env_items(o.env_a, "environment")
    o.b_env = engine.parse_env_items(o.env_b, "environment")
    return o


class Side:
    def __init__(self, x, prefix, label, kind, extra):
        if not os.path.isdir(prefix):
            raise UsageError(f"side {x}: no directory {prefix} (is the icbc build installed? "
                             "for a stock-vs-stock check use --icbc /usr --label-a stock2)")
        self.x, self.label = x, label
        self.inst = engine.Install.find(prefix, kind, f"side {x}")
        self.env = self.inst.transport_env(NET_DEV) + extra
        self.bins = {}


class P2P:
    def __init__(self, o, argv):
        self.o = o
        self.cmdline = engine.cmdline("benchmarks/p2p/run.sh", argv)
        self.good = {}
        self.busy_all = []
        self.busy = None

    def setup(self):
        o = self.o
        if os.getuid() != 0:
            raise UsageError("needs root (network namespaces)")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("matplotlib missing (apt-get install python3-matplotlib)")
        self.sides = [Side("A", o.a_prefix, o.label_a, o.kind_a, o.a_env),
                      Side("B", o.b_prefix, o.label_b, o.kind_b, o.b_env)]
        os.makedirs(os.path.join(o.out, "raw"), exist_ok=True)
        os.makedirs(os.path.join(o.build, "logs"), exist_ok=True)
        o.out, o.build = os.path.abspath(o.out), os.path.abspath(o.build)
        self.logs = os.path.join(o.build, "logs")
        self.summary = os.path.join(o.out, "p2p_summary.txt")
        self.start_date = engine.utc_now()
        self.machine = engine.machine()
        self.load_start = engine.loadavg()
        self.runner = engine.Runner(os.path.join(o.out, "p2p_events.txt"),
                                    f"p2p runner events, run started {self.start_date}: "
                                    f"{self.cmdline}", o.timeout, o.finalize_grace, PROG)
        libs = []
        for s in self.sides:
            outdir = os.path.join(o.build, s.label)
            for b in ("latency", "bw"):
                src = os.path.join(SRC, f"icbc_{b}.c")
                note(f"compile {s.label}: {s.inst.mpicc} -O2 -Wall -I{SRC} -o "
                     f"{outdir}/icbc_{b} {src}")
                exe = s.inst.compile(f"icbc_{b}", src, outdir, self.logs)
                s.bins[b] = exe
                if o.pin == "yes":
                    # rank r on CPU r mod nproc, whatever launcher set the rank
                    with open(exe + ".pinned", "w") as f:
                        f.write("#!/bin/sh\nr=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}\n"
                                f"exec taskset -c $((r % {os.cpu_count()})) \"{exe}\" \"$@\"\n")
                    os.chmod(exe + ".pinned", 0o755)
                    s.bins[b] = exe + ".pinned"
            ldd = subprocess.run(["ldd", os.path.join(outdir, "icbc_latency")],
                                 capture_output=True, text=True).stdout
            libs.append(f"{s.label}: " + " ".join(
                f"{l.split()[0]} -> {l.split()[2]}" for l in ldd.splitlines()
                if re.search(r"libmpi|libucp", l) and len(l.split()) > 2))
        with open(os.path.join(self.logs, "libraries.txt"), "w") as f:
            f.write("\n".join(libs) + "\n")
        self.bed = engine.Bed(o.testbed_name, o.a_prefix, ["--clusters", "1", "--nodes", "2"],
                              self.logs)
        exes = [e for s in self.sides for e in s.bins.values()]
        exes = [e[:-len(".pinned")] if e.endswith(".pinned") else e for e in exes]
        self.runner.leftover_killer = lambda: self.bed.kill_leftovers(["a0", "a1"], exes)

    def check_bed(self):
        for n in ("a0", "a1"):
            r = subprocess.run(["ip", "netns", "exec", self.bed.ns(n), "test", "-e",
                                f"/sys/class/net/{NET_DEV}"])
            if r.returncode != 0:
                raise UsageError(f"namespace {self.bed.ns(n)} has no interface {NET_DEV}")

    def fab_bytes(self):
        return sum(self.bed.tx_bytes(n, NET_DEV) for n in ("a0", "a1"))

    def wait_quiet(self):
        deadline = engine.time.time() + self.o.quiet_wait
        self.busy = engine.cpu_busy()
        while self.busy > self.o.quiet_max and engine.time.time() < deadline:
            engine.time.sleep(4)
            self.busy = engine.cpu_busy()
        self.busy_all.append(self.busy)

    def run_try(self, s, b, rep, try_no):
        o = self.o
        opts = o.latency_opts if b == "latency" else o.bw_opts
        tag = f"{b}_{s.label}_rep{rep}_try{try_no}"
        csv, err = os.path.join(self.logs, tag + ".csv"), os.path.join(self.logs, tag + ".err")
        self.wait_quiet()
        before = self.fab_bytes()
        argv = [s.inst.mpiexec, "-n", "2", "-ppn", "1"] + engine.genv(s.env) + \
            [s.bins[b]] + opts.split()
        rc, secs, hung, timed_out = self.runner.mpiexec(argv, csv, err)
        after = self.fab_bytes()
        done, device, sent = engine.program_lines(err, f"icbc_{b}")
        t = engine.Try(csv, err, rc, secs, hung, timed_out, done, device, sent)
        self.runner.judge(t, s.inst.device, f"{s.label}'s mpichversion")
        if t.status and t.status != "finalize-hang":
            return t
        if sent is None or after - before < sent:
            t.status = "no-network"
            t.detail = (f"{NET_DEV} carried {after - before} bytes, the benchmark sent "
                        f"{sent if sent is not None else '?'} payload bytes: traffic did not "
                        "cross the namespace network")
            return t
        t.status = t.status or "ok"
        t.detail = (t.detail + "; " if t.detail else "") + \
            f"{NET_DEV} carried {after - before} bytes for {sent} payload bytes"
        return t

    def runs(self):
        o = self.o
        a, b_ = self.sides
        for s in self.sides:
            note(f"{s.x}: {s.label} = {s.inst.prefix} ({s.inst.device}, kind {s.inst.kind}): "
                 + " ".join(f"{k}={v}" for k, v in s.env))
        for rep in range(1, o.reps + 1):
            order = (a, b_) if rep % 2 else (b_, a)
            for b in o.benches:
                for s in order:
                    raw = os.path.join(o.out, "raw", f"p2p_{b}_{s.label}_rep{rep}.csv")
                    kept = self.runner.run_one(
                        f"{b} {s.label} rep {rep}", raw,
                        lambda try_no, s=s, b=b: self._busy_noted(self.run_try(s, b, rep, try_no)))
                    if kept:
                        self.good.setdefault((s.x, b), []).append(kept)

    def _busy_noted(self, t):
        t.detail = (t.detail + ", " if t.detail else "") + f"host busy {self.busy}% before"
        return t

    def start(self):
        self.bed.up()
        self.check_bed()

    def cleanup(self):
        self.runner.stop()
        self.bed.down()

    def report(self):
        o = self.o
        load_end = engine.loadavg()
        with open(self.summary, "w") as f:
            f.write(f"command: {self.cmdline}\ndate: {self.start_date}\nmachine: {self.machine}\n"
                    f"load average (1/5/15 min) at start: {self.load_start}, at end: {load_end}\n"
                    "host CPU busy (other processes) in the second before each run, %: "
                    f"{' '.join(map(str, self.busy_all))}\n")
        a, b_ = self.sides
        fail = False
        for b in o.benches:
            if b == "latency":
                name, kind, unit, target, frm = "latency", "lower", "us", o.lat_target, "0"
            else:
                name, kind, unit, target, frm = "bandwidth", "higher", "MB/s", o.bw_target, \
                    o.bw_target_from
            if not self.good.get(("A", b)) or not self.good.get(("B", b)):
                tee(self.summary, f"VERDICT {name}: NO DATA (a side has no valid run; see "
                                  f"{self.runner.events_path})")
                fail = True
                continue
            evs = ";".join(l.split(" ", 1)[1] for l in self.runner.events(b)) or "none"
            tee(self.summary, f"\n== {name} ({b}): median of reps per size; ratio = "
                              f"{a.label}/{b_.label}")
            argv = ["--name", name, "--kind", kind, "--unit", unit,
                    "--series", a.label] + self.good[("A", b)] + \
                ["--series", b_.label] + self.good[("B", b)] + \
                ["--target", str(target), "--target-from", frm,
                 "--out", os.path.join(o.out, f"p2p_{b}.csv"),
                 "--png", os.path.join(o.out, f"p2p_{b}.png"),
                 "--title", f"p2p {name} between two namespace nodes: {a.label} vs {b_.label}",
                 "--footer", f"{self.start_date}; {self.machine}; {self.cmdline}",
                 "--meta", f"command={self.cmdline}", "--meta", f"date={self.start_date}",
                 "--meta", f"machine={self.machine}",
                 "--meta", f"load average at start/end={self.load_start} / {load_end}",
                 "--meta", "host CPU busy (other processes) in the second before each run, %="
                           + " ".join(map(str, self.busy_all)),
                 "--meta", f"testbed=icbc-testbed up --name {o.testbed_name} --clusters 1 "
                           "--nodes 2; mpiexec -n 2 -ppn 1 (nodes a0, a1); ranks pinned to CPUs "
                           f"r mod nproc: {o.pin}"]
            for s in self.sides:
                argv += ["--meta", f"{s.label}={s.inst.prefix} ({s.inst.device}); env "
                                   + " ".join(f"{k}={v}" for k, v in s.env)]
            argv += ["--meta", f"benchmark=icbc_{b} "
                               f"{o.latency_opts if b == 'latency' else o.bw_opts}",
                     "--meta", f"events={evs}"]
            fail |= engine.compare(argv, self.summary) != 0
        ev = self.runner.events()
        tee(self.summary, f"\nevents (retries, hangs, failures): {len(ev)}" +
            "".join(f"\n  {l}" for l in ev) +
            f"\nresults: {o.out} (p2p_*.csv, p2p_*.png, raw/), logs: {self.logs}")
        return fail


def main(argv):
    return engine.run_main(PROG, USAGE, options, P2P, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
