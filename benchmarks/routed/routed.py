#!/usr/bin/python3
"""Inter-cluster benchmarks of MPICH+icbc on an emulated cluster of clusters:
p2p latency and bandwidth per policy between a process of cluster a and one
of cluster b, striped bandwidth over R = 1, 2, 4 routers against
min(R x NIC, WAN), the routed small-message round trip against the direct TCP
path, multi-pair bandwidth and MPI_Alltoall per policy.

Brings up its own two-cluster testbed (icbc-testbed), starts icbc-router on
the router nodes, checks every run (exit status, device, all sizes done, and
that the payload crossed the WAN emulator), and writes CSV + PNG + a summary
into benchmarks/results/routed/. benchmarks/routed/run.sh is its command;
see benchmarks/README.md ("Inter-cluster") and --help.
"""
import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))

import engine  # noqa: E402
sys.path.insert(0, HERE)
import stripe  # noqa: E402
from engine import REPO, SRC, UsageError, note, tee  # noqa: E402
from mpirun import router_stats  # noqa: E402

PROG = "routed/run.sh"
PARTS = ("latency", "bw", "stripe", "mbw", "alltoall", "paths", "stress", "placement")
PLACEMENTS = ("round-robin", "window", "adaptive")
POLICIES = ("aggregate", "static", "alltoall", "tcp", "stock", "impi", "impi-relay")
IMPI_SERIES = ("impi", "impi-relay")
FAB_DEV = "fab0"

USAGE = """\
Usage: benchmarks/routed/run.sh [options]        (as root: network namespaces)

Inter-cluster benchmarks of an MPICH+icbc install on a testbed of two emulated clusters
joined by a WAN (icbc-testbed), with icbc-router daemons on the router nodes.

Parts (--parts, comma-separated; default all but with --quick latency,bw):
  latency   icbc_latency between a{M-1} and b{M-1}, per policy: half round trip
  bw        icbc_bw a{M-1} -> b{M-1}, per policy
  stripe    icbc_bw at --stripe-size under aggregate with R = 1, 2, 4.. routers per cluster
            (the routers are restarted with a router file listing the first R of each
            cluster), against min(R x NIC, WAN); target ratio >= --stripe-target
  mbw       icbc_mbw_mr with one rank per node, every pair crossing the WAN, per policy
  alltoall  icbc_alltoall with one rank per node, per policy
  paths     examples/icbc_paths.c with one rank per node, per policy: which path rank 0
            takes to every other node, with an 8 B latency and a 1 MiB bandwidth each
            (not in the default set; the two-cluster demo uses it)
  stress    test/mpi/stress.c with one rank per node, per policy: random traffic between
            all ranks with checked payloads (--stress-opts, default --quick); any
            mismatch fails the run (not in the default set)
  placement icbc_bw at --stripe-size under aggregate with R routers, once with every
            router's NIC at --nic-rate and once with router a{R-1}'s shaped to
            --placement-slow, for each MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT (round-robin,
            window, adaptive); against the sum of the routers' rates (not in the default
            set; targets: adaptive >= 0.9 x the sum with the slow router, >= 0.98 x
            round-robin with equal ones)
  The small-message target compares the aggregate latency with the alltoall (direct TCP)
  one for sizes up to --small-max: ratio <= --small-target.

Testbed (icbc-testbed up --clusters 2 ...):
  --nodes M                 nodes per cluster (default 4)
  --routers R               router nodes per cluster, the first R (default 4)
  --nic-rate RATE           external NIC rate per node (default 100mbit)
  --wan-rate RATE           WAN rate per direction (default 400mbit)
  --delay TIME              one-way WAN delay (default 2ms)
  --buffer SIZE             WAN bottleneck buffer (default: icbc-testbed's, 256KiB)
  --fabric-api C=API,...    the fabric API of clusters (icbc-testbed's option: "fabric-api API"
                            in their router-file sections), e.g. b=ofi or a=ofi,b=ofi
  --tcp-cc NAME             the nodes' TCP congestion control (icbc-testbed's option; default:
                            the host's)
  --testbed-name NAME       (default routed); an existing testbed of that name is reused
                            (it must have the same shape) and left up

MPI and routers:
  --prefix PREFIX           MPICH+icbc install (default <repo>/_install)
  --policies "P ..."        series to run (default "aggregate static alltoall"; also tcp,
                            "stock": stock MPICH from --stock-prefix with UCX over
                            ext0, direct TCP between the processes, as a reference, and
                            "impi": the two ranks as two ICBC clients of an IMPI job,
                            one mpiexec each, impi-server on a{M-1}'s WAN address
                            (test/mpich/mpiexec_impi.py), messages as IMPI packets on a
                            host connection; "impi-relay": the same with cluster a's
                            client behind impi-relay on a0 (docs/impi-relay.md, M >= 2),
                            every packet through the relay; latency and bw parts only)
  --stock-prefix PREFIX     (default /usr)
  --router PATH             icbc-router (default: PATH, PREFIX/bin, <repo>/_build)
  --router-args "..."       extra icbc-router options, e.g. "--streams 4 --max-memory 64Mi";
                            "--device fab0" is added unless it has a --device
  --no-router-daemons       start no daemons: the first rank on each router node runs its
                            router in a thread (MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER); only
                            nodes with ranks then route. With daemons, the ranks get
                            MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0
  --router-wait SEC         time for the routers to listen and connect (default 20)
  --env "K=V ..."           extra environment for every rank
  --yield auto|0|1          MPIR_CVAR_CH4_ICBC_YIELD for the icbc ranks (default auto: 1
                            when the run's ranks plus the router daemons outnumber the
                            host's cores, as on a 2-core host: busy-polling ranks would
                            otherwise starve the routers and the WAN emulator they need)

Measurement:
  --reps N                  repetitions, interleaved over the policies (default 3; quick 1)
  --quick                   the demo profile: --parts latency,bw, 1 rep, latency 1 B-4 KiB,
                            bandwidth 64 KiB-4 MiB with a window of 4 (about 1 minute)
  --parts LIST              see above
  --stripe-routers "1 2 4"  router counts of the stripe part (default 1 2 4 .. up to R)
  --stripe-size SIZE        (default 8M)
  --placement-slow RATE     the slow router's NIC in the placement part (default NIC / 4)
  --latency-opts "..." --bw-opts "..." --stripe-opts "..." --mbw-opts "..."
  --alltoall-opts "..."     options of the benchmark programs (replace the defaults below)
  --stress-opts "..."       options of the stress test (default --quick)
  --stripe-target R         (default 0.92)  --small-target R (default 1.25)
  --small-max SIZE          (default 1K)
  --timeout SEC             bound of one mpiexec (default 900)
  --finalize-grace SEC      time from "entering MPI_Finalize" to the exit (default 20); a
                            run past it is killed, its complete data kept, and retried once
  --out DIR                 results (default benchmarks/results/routed)
  --build DIR               binaries, router files, logs (default <repo>/_build/bench-routed)
  --help

Default program options (the benchmarks' own --stat median throughout):
  latency   --min 1 --max 1M --iters 100 --warmup 10 --min-iters 5
  bw        --min 1 --max 8M --window 8 --iters 20 --warmup 2 --min-iters 2
  stripe    --min SIZE --max SIZE --window 8 --iters 3 --warmup 1 --min-iters 3
  mbw       --min 1K --max 4M --window 8 --iters 10 --warmup 2 --min-iters 2
  alltoall  --min 1 --max 256K --iters 20 --warmup 2 --min-iters 3

Rank environment (icbc): MPIR_CVAR_CH4_ICBC_POLICY=<policy>, ICBC_ROUTERFILE=<a copy of
the testbed's router file with the policy and the first R routers of each cluster>,
MPIR_CVAR_CH4_ICBC_UCX_TLS=tcp, MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=fab0,
UCX_NET_DEVICES=fab0. Every run must move at least its payload (p2p, mbw) or the
cross-cluster share of it (alltoall) through the WAN emulator, else it is rejected as
'no-wan'. The external NIC bytes of every node are recorded per run (routed_traffic.csv),
which shows how a policy spread the traffic over the routers, with the CPU seconds of the
job's processes (mpiexec and the ranks, not the router daemons) and the payload it sent.

Output (--out): routed_{latency,bw,mbw,alltoall}.{csv,png} (per-size medians, ratios),
routed_stripe.{csv,png}, routed_summary.txt (tables, ratios, verdicts, router stats),
routed_routers.txt (router logs' stats lines, peak RSS), routed_traffic.csv,
routed_events.txt (failed, retried or suspicious runs), raw/ (every kept run).
Exit status: 0 when every run gave data (whatever the verdicts), 1 when a run failed even
after its retry, 2 on bad usage or set-up.
"""


class Usage(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")

    def print_help(self, file=None):
        (file or sys.stdout).write(USAGE)


def options(argv):
    p = Usage(prog=PROG, add_help=False)
    a = p.add_argument
    a("-h", "--help", action="store_true")
    a("--prefix", default=os.path.join(REPO, "_install"))
    a("--stock-prefix", default="/usr")
    a("--nodes", default="4")
    a("--routers", default="4")
    a("--nic-rate", default="100mbit")
    a("--wan-rate", default="400mbit")
    a("--delay", default="2ms")
    a("--buffer", default="")
    a("--fabric-api", default="")
    a("--tcp-cc", default="")
    a("--testbed-name", default="routed")
    a("--policies", default="aggregate static alltoall")
    a("--router", default="")
    a("--router-args", default="")
    a("--no-router-daemons", dest="daemons", action="store_false")
    a("--router-wait", default="20")
    a("--env", default="")
    a("--yield", dest="yield_", default="auto")
    a("--reps", default="")
    a("--quick", action="store_true")
    a("--parts", default="")
    a("--stripe-routers", default="")
    a("--stripe-size", default="8M")
    a("--placement-slow", default="")
    a("--latency-opts", default="")
    a("--bw-opts", default="")
    a("--stripe-opts", default="")
    a("--mbw-opts", default="")
    a("--alltoall-opts", default="")
    a("--stress-opts", default="--quick")
    a("--stripe-target", default="0.92")
    a("--small-target", default="1.25")
    a("--small-max", default="1K")
    a("--timeout", default="900")
    a("--finalize-grace", default="20")
    a("--out", default=os.path.join(REPO, "benchmarks", "results", "routed"))
    a("--build", default=os.path.join(REPO, "_build", "bench-routed"))
    o = p.parse_args(argv)
    if o.help:
        return o

    def posint(name, text, lo=1, hi=None):
        if not re.fullmatch(r"[0-9]+", text) or int(text) < lo or (hi is not None and int(text) > hi):
            raise UsageError(f"{name} must be {lo}..{hi}" if hi is not None else
                             f"{name} must be a positive number")
        return int(text)

    o.nodes = posint("--nodes", o.nodes, 1, 99)
    o.routers = posint("--routers", o.routers, 0, o.nodes)
    o.timeout = posint("--timeout", o.timeout)
    o.finalize_grace = posint("--finalize-grace", o.finalize_grace)
    o.router_wait = posint("--router-wait", o.router_wait)
    if o.yield_ not in ("auto", "0", "1"):
        raise UsageError("--yield takes auto, 0 or 1")
    if o.fabric_api and not re.fullmatch(r"[a-z]=(ucx|ofi)(,[a-z]=(ucx|ofi))*", o.fabric_api):
        raise UsageError("--fabric-api takes C=API,... with API ucx or ofi (e.g. b=ofi)")
    if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", o.testbed_name):
        raise UsageError("--testbed-name: 1-8 of [a-z0-9], starting with a letter")
    for t in (o.stripe_target, o.small_target):
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", t):
            raise UsageError(f"targets are positive numbers, not '{t}'")
    o.stripe_target, o.small_target = float(o.stripe_target), float(o.small_target)
    if not re.fullmatch(r"[0-9]+[KMG]?", o.small_max):
        raise UsageError("--small-max: a size like 1K")
    if not re.fullmatch(r"[1-9][0-9]*[KMG]?", o.stripe_size):
        raise UsageError("--stripe-size: a size like 8M")
    if o.quick:
        o.reps = o.reps or "1"
        o.parts = o.parts or "latency,bw"
        o.latency_opts = o.latency_opts or "--min 1 --max 4K --iters 30 --warmup 3"
        o.bw_opts = o.bw_opts or "--min 64K --max 4M --window 4 --iters 2 --warmup 1 --min-iters 2"
    o.reps = posint("--reps", o.reps or "3")
    o.parts = o.parts or "latency,bw,stripe,mbw,alltoall"
    o.latency_opts = "--stat median " + (o.latency_opts or
                                         "--min 1 --max 1M --iters 100 --warmup 10 --min-iters 5")
    o.bw_opts = "--stat median " + (o.bw_opts or
                                    "--min 1 --max 8M --window 8 --iters 20 --warmup 2 --min-iters 2")
    o.stripe_opts = "--stat median " + (o.stripe_opts or
                                        f"--min {o.stripe_size} --max {o.stripe_size} --window 8 "
                                        "--iters 3 --warmup 1 --min-iters 3")
    o.mbw_opts = o.mbw_opts or "--min 1K --max 4M --window 8 --iters 10 --warmup 2 --min-iters 2"
    o.alltoall_opts = o.alltoall_opts or "--min 1 --max 256K --iters 20 --warmup 2 --min-iters 3"
    o.want = set()
    for part in o.parts.split(","):
        if part not in PARTS:
            raise UsageError(f"--parts: unknown part '{part}' ({', '.join(PARTS)})")
        o.want.add(part)
    o.pols = o.policies.split()
    if not o.pols:
        raise UsageError("--policies is empty")
    for pol in o.pols:
        if pol not in POLICIES:
            raise UsageError(f"--policies: unknown policy '{pol}' ({', '.join(POLICIES)})")
    if len(set(o.pols)) != len(o.pols):
        dup = next(x for x in o.pols if o.pols.count(x) > 1)
        raise UsageError(f"--policies: '{dup}' twice")
    if o.stripe_routers:
        o.stripe_rl = []
        for r in o.stripe_routers.split():
            if not re.fullmatch(r"[1-9][0-9]*", r) or int(r) > o.routers:
                raise UsageError(f"--stripe-routers: '{r}' is not 1..--routers ({o.routers})")
            o.stripe_rl.append(int(r))
    else:
        o.stripe_rl, r = [], 1
        while r < o.routers:
            o.stripe_rl.append(r)
            r *= 2
        if o.routers >= 1:
            o.stripe_rl.append(o.routers)
    if "placement" in o.want and o.routers < 2:
        raise UsageError("the placement part needs --routers >= 2")
    nic = stripe.parse_rate(o.nic_rate)
    if "placement" in o.want and nic is None:
        raise UsageError("the placement part needs a shaped NIC (--nic-rate)")
    try:
        o.slow_bps = stripe.parse_rate(o.placement_slow) if o.placement_slow else \
            (nic / 4 if nic else None)
    except ValueError as e:
        raise UsageError(f"--placement-slow: {e}")
    if "stripe" in o.want and not o.stripe_rl:
        raise UsageError("the stripe part needs routers (--routers 0)")
    o.extra_env = engine.parse_env_items(o.env, "--env")
    return o


class Routed:
    def __init__(self, o, argv):
        self.o = o
        self.cmdline = engine.cmdline("benchmarks/routed/run.sh", argv)
        self.need_icbc = any(p != "stock" for p in o.pols) or bool({"stripe", "placement"} & o.want)
        self.need_stock = "stock" in o.pols
        self.need_routers = (any(p in ("aggregate", "static") for p in o.pols) or
                             bool({"stripe", "placement"} & o.want))
        self.router_pids = {}
        self.cur_r = 0
        self.good = {}  # (part, series, R) -> [raw files]
        self.nodes = [f"{c}{i}" for c in "ab" for i in range(o.nodes)]
        self.bins = {}
        self.plots = True  # False: no matplotlib, a --quick run's tables only

    # ---- set-up --------------------------------------------------------------------------

    def setup(self):
        o = self.o
        if os.getuid() != 0:
            raise UsageError("needs root (network namespaces)")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            # The demo's quick run needs only the tables (quickstart.sh demo
            # does not install matplotlib); a measurement needs its figures.
            if not o.quick:
                raise UsageError("matplotlib missing (apt-get install python3-matplotlib)")
            print("matplotlib missing (apt-get install python3-matplotlib): CSV and tables "
                  "only, no PNG", flush=True)
            self.plots = False
        if self.need_icbc:
            self.icbc = engine.Install.find(o.prefix, "icbc", "--prefix")
            if not self.icbc.device.startswith("ch4:icbc"):
                raise UsageError(f"{o.prefix} is not an icbc build (mpichversion says device "
                                 f"'{self.icbc.device}')")
        if self.need_stock:
            self.stock = engine.Install.find(o.stock_prefix, "stock", "--stock-prefix")
        if self.need_routers and o.routers < 1:
            raise UsageError("policies aggregate/static and the stripe part need --routers >= 1")
        self.router = None
        if o.daemons and o.routers >= 1:
            cands = [o.router] if o.router else \
                [p for p in (self._which("icbc-router"), os.path.join(o.prefix, "bin/icbc-router"),
                             os.path.join(REPO, "_build/icbc-router"),
                             os.path.join(REPO, "_build/src/router/icbc-router")) if p]
            self.router = next((c for c in cands if os.access(c, os.X_OK)), None)
            if o.router and not self.router:
                raise UsageError(f"--router {o.router} is not executable")
            if not self.router and self.need_routers:
                raise UsageError(f"icbc-router not found (PATH, {o.prefix}/bin, {REPO}/_build; "
                                 "--router PATH, or --no-router-daemons when the processes embed "
                                 "their routers)")
        self.daemons = bool(self.router)
        os.makedirs(os.path.join(o.out, "raw"), exist_ok=True)
        os.makedirs(os.path.join(o.build, "logs"), exist_ok=True)
        o.out, o.build = os.path.abspath(o.out), os.path.abspath(o.build)
        self.logs = os.path.join(o.build, "logs")
        raw = os.path.join(o.out, "raw")
        for f in os.listdir(raw):
            if re.match(r"routed_(.*\.csv|paths_.*\.txt|stress_.*\.txt)$", f):
                os.unlink(os.path.join(raw, f))
        self.summary = os.path.join(o.out, "routed_summary.txt")
        self.router_stats = os.path.join(o.out, "routed_routers.txt")
        self.traffic = os.path.join(o.out, "routed_traffic.csv")
        self.start_date = engine.utc_now()
        self.machine = engine.machine()
        self.load_start = engine.loadavg()
        self.runner = engine.Runner(os.path.join(o.out, "routed_events.txt"),
                                    f"routed runner events, run started {self.start_date}: "
                                    f"{self.cmdline}", o.timeout, o.finalize_grace, PROG)
        with open(self.router_stats, "w") as f:
            f.write(f"# router stats, run started {self.start_date}: {self.cmdline}\n")
        with open(self.traffic, "w") as f:
            f.write("run,part,series,routers,rep,try,status," +
                    ",".join(f"ext0_tx_{n}" for n in self.nodes) +
                    ",wan_payload,job_cpu_s,payload_sent\n")
        self.run_no = 0
        self._compile()
        self.tb_args = ["--clusters", "2", "--nodes", str(o.nodes), "--routers", str(o.routers),
                        "--nic-rate", o.nic_rate, "--wan-rate", o.wan_rate, "--delay", o.delay]
        if o.buffer:
            self.tb_args += ["--buffer", o.buffer]
        if o.fabric_api:
            self.tb_args += ["--fabric-api", o.fabric_api]
        if o.tcp_cc:
            self.tb_args += ["--tcp-cc", o.tcp_cc]
        prefix = o.prefix if self.need_icbc else o.stock_prefix
        self.bed = engine.Bed(o.testbed_name, prefix, self.tb_args, self.logs)
        self.runner.leftover_killer = lambda: self.bed.kill_leftovers(self.nodes,
                                                                       self.bins.values())

    @staticmethod
    def _which(name):
        for d in os.environ.get("PATH", "").split(":"):
            p = os.path.join(d, name)
            if d and os.access(p, os.X_OK):
                return p
        return None

    def _compile(self):
        progs = {"latency": os.path.join(SRC, "icbc_latency.c"),
                 "bw": os.path.join(SRC, "icbc_bw.c"),
                 "mbw_mr": os.path.join(SRC, "icbc_mbw_mr.c"),
                 "alltoall": os.path.join(SRC, "icbc_alltoall.c"),
                 "paths": os.path.join(REPO, "examples", "icbc_paths.c"),
                 "stress": os.path.join(REPO, "test", "mpi", "stress.c")}
        for kind, need in (("icbc", self.need_icbc), ("stock", self.need_stock)):
            if not need:
                continue
            inst = getattr(self, kind)
            outdir = os.path.join(self.o.build, kind)
            for b, src in progs.items():
                self.bins[(kind, b)] = inst.compile(f"icbc_{b}", src, outdir, self.logs,
                                                    [os.path.join(REPO, "test", "mpi")])
            note(f"compiled the benchmarks with {inst.mpicc} into {outdir}")

    # ---- router files and daemons ----------------------------------------------------------

    def routerfile(self, r, pol):
        """A copy of the testbed's router file with the policy line, an
        absolute key path and only the first R routers of each cluster."""
        state = self.bed.state
        out, n, saw_policy = [], 0, False
        with open(os.path.join(state, "routers.conf")) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "policy":
                    out.append(f"policy {pol}\n")
                    saw_policy = True
                    continue
                if w and w[0] == "key" and len(w) > 1:
                    k = w[1] if w[1].startswith("/") else os.path.join(state, w[1])
                    out.append(f"key {k}\n")
                    continue
                if w and w[0] == "cluster":
                    n = 0
                if w and w[0] == "router":
                    n += 1
                    if n > r:
                        continue
                out.append(line)
        if not saw_policy:
            out.insert(0, f"policy {pol}\n")
        path = os.path.join(self.o.build, f"routers-R{r}-{pol}.conf")
        with open(path, "w") as f:
            f.writelines(out)
        return path

    @staticmethod
    def router_port(conf, node, side):
        with open(conf) as f:
            for line in f:
                w = line.split()
                if len(w) >= 2 and w[0] == "router" and w[1] == node:
                    for item in w[2:]:
                        if item.startswith(side + "="):
                            return item.rsplit(":", 1)[1]
        return None

    def _ss(self, node, args):
        r = subprocess.run(["ip", "netns", "exec", self.bed.ns(node), "ss", "-Htn"] + args,
                           capture_output=True, text=True)
        return r.stdout.strip()

    def start_routers(self, r):
        """icbc-router on the first R nodes of each cluster; waits until each
        listens on its WAN port and holds an established WAN connection."""
        self.cur_r = r
        if not self.daemons:
            return
        conf = self.routerfile(r, "aggregate")
        rargs = self.o.router_args.split()
        if "--device" not in rargs:
            rargs = ["--device", FAB_DEV] + rargs
        for c in "ab":
            for i in range(r):
                node = f"{c}{i}"
                log = os.path.join(self.logs, f"router-R{r}-{node}.log")
                argv = [self.router, "--routerfile", conf, "--host", node] + rargs
                with open(log, "w") as f:
                    f.write(f"# {engine.utc_now()} {' '.join(argv)}\n")
                    f.flush()
                    p = subprocess.Popen(self.bed.tb.exec_cmd(node, argv), stdout=f,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
                self.router_pids[node] = p
        deadline = time.time() + self.o.router_wait
        while True:
            ok = True
            for node, p in self.router_pids.items():
                if p.poll() is not None:
                    log = os.path.join(self.logs, f"router-R{r}-{node}.log")
                    sys.stderr.write(engine.tail_text(log, 5).replace("|", "\n") + "\n")
                    raise UsageError(f"icbc-router on {node} exited at start-up (log: {log})")
                port = self.router_port(conf, node, "wan")
                if not self._ss(node, ["-l", f"sport = :{port}"]) or \
                        not self._ss(node, ["state", "established",
                                            f"( sport = :{port} or dport = :{port} )"]):
                    ok = False
                    break
            if ok:
                break
            if time.time() >= deadline:
                self.runner.event(f"routers R={r}: not all listening with an established WAN "
                                  f"connection after {self.o.router_wait}s (continuing)")
                break
            time.sleep(0.5)
        note(f"routers R={r} up on {' '.join(self.router_pids)} ({conf})")

    def stop_routers(self, why):
        """SIGTERM (a clean exit logs the final stats line), SIGKILL after 10 s;
        their peak RSS and stats lines go into routed_routers.txt."""
        if not self.router_pids:
            return
        hwm = {}
        for node, p in self.router_pids.items():
            hwm[node] = self._hwm(p.pid)
            p.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        while time.time() < deadline and any(p.poll() is None for p in self.router_pids.values()):
            time.sleep(0.1)
        lines = [f"== routers R={self.cur_r} stopped ({why}), {engine.utc_now()}"]
        for node in sorted(self.router_pids):
            p = self.router_pids[node]
            log = os.path.join(self.logs, f"router-R{self.cur_r}-{node}.log")
            if p.poll() is None:
                p.kill()
                lines.append(f"{node}: did not exit within 10 s of SIGTERM: killed")
            rc = p.wait()
            lines.append(f"{node}: exit status {rc}, peak RSS (VmHWM before SIGTERM) "
                         f"{hwm[node] or '?'}")
            text = open(log, errors="replace").read().splitlines()
            st = router_stats(log)
            if st:
                lines.append(f"{node}:   stats-json " + json.dumps(st, sort_keys=True))
            warn = sum(1 for l in text if re.search(r"(warn|error): ", l))
            lines.append(f"{node}:   warnings and errors in the log: {warn}")
        with open(self.router_stats, "a") as f:
            f.write("\n".join(lines) + "\n")
        self.router_pids = {}

    @staticmethod
    def _hwm(pid):
        # the router runs under icbc-testbed exec: its VmHWM is that of the
        # process tree's icbc-router
        for cand in [pid] + Routed._children(pid):
            try:
                exe = os.readlink(f"/proc/{cand}/exe")
            except OSError:
                continue
            if exe.endswith("icbc-router"):
                with open(f"/proc/{cand}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            return " ".join(line.split()[1:3])
        return None

    @staticmethod
    def _children(pid):
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            try:
                with open(f"/proc/{p}/task/{p}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
        return out

    # ---- one run --------------------------------------------------------------------------

    def wan_payload(self):
        """TCP/UDP payload bytes the WAN emulator delivered so far, both ways."""
        time.sleep(0.25)  # the stats file is rewritten every 100 ms
        total = 0
        try:
            with open(os.path.join(self.bed.state, "wan.stats")) as f:
                for line in f:
                    w = line.split()
                    if w and w[0] == "dir":
                        for item in w[1:]:
                            if item.startswith("payload="):
                                total += int(item.split("=", 1)[1])
        except (OSError, ValueError):
            return 0
        return total

    def series_env(self, s, r, np):
        o = self.o
        if s == "stock":
            env = [("UCX_TLS", "tcp,self"), ("UCX_NET_DEVICES", "ext0")]
        else:
            # an IMPI client lies in one cluster: the policy names no path it takes
            # a placement series ("adaptive", "window-slow"): aggregate, that placement
            placement = s.split("-slow")[0]
            placement = placement if placement in PLACEMENTS else None
            if placement:
                s = "aggregate"
            env = [("MPIR_CVAR_CH4_ICBC_POLICY", s)] if s not in IMPI_SERIES else []
            if placement:
                env.append(("MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT", placement))
            # with daemons, a router that died must not be replaced by one embedded in a rank
            if self.daemons:
                env.append(("MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER", "0"))
            y = o.yield_
            if y == "auto":
                y = "1" if np + (2 * self.cur_r if self.daemons else 0) > os.cpu_count() else "0"
            env.append(("MPIR_CVAR_CH4_ICBC_YIELD", y))
            env.append(("ICBC_ROUTERFILE", self.routerfile(r, s if s not in IMPI_SERIES else
                                                           "aggregate")))
            env += [(k, v) for k, v in self.icbc.transport_env(FAB_DEV)
                    if k != "LD_LIBRARY_PATH"]
            if o.prefix != "/usr" and os.path.isdir(os.path.join(o.prefix, "lib")):
                env.append(("LD_LIBRARY_PATH", os.path.join(o.prefix, "lib")))
        return env + o.extra_env

    def run_try(self, part, s, r, rep, try_no):
        o, m = self.o, self.o.nodes
        kind = "stock" if s == "stock" else "icbc"
        p2p = f"a{m - 1}:1,b{m - 1}:1"
        every = ",".join(f"{n}:1" for n in self.nodes)
        prog, opts, hosts, np, frac = {
            "latency": ("latency", o.latency_opts, p2p, 2, 1.0),
            "bw": ("bw", o.bw_opts, p2p, 2, 1.0),
            "stripe": ("bw", o.stripe_opts, p2p, 2, 1.0),
            "placement": ("bw", o.stripe_opts, p2p, 2, 1.0),
            "mbw": ("mbw_mr", o.mbw_opts, every, 2 * m, 1.0),
            "alltoall": ("alltoall", o.alltoall_opts, every, 2 * m, 0.95 * m / (2 * m - 1)),
            "paths": ("paths", "", every, 2 * m, 0.0),
            "stress": ("stress", o.stress_opts, every, 2 * m, 0.25),
        }[part]
        inst = getattr(self, kind)
        tag = f"{part}_{s}_R{r}_rep{rep}_try{try_no}"
        csv, err = os.path.join(self.logs, tag + ".csv"), os.path.join(self.logs, tag + ".err")
        self.run_no += 1
        w0 = self.wan_payload()
        tx0 = [self.bed.tx_bytes(n, "ext0") for n in self.nodes]
        launcher = [inst.mpiexec]
        if s in IMPI_SERIES:  # one client per cluster, through a fresh impi-server
            launcher = [sys.executable, os.path.join(REPO, "test", "mpich", "mpiexec_impi.py"),
                        "--prefix", o.prefix, "--hosts", hosts.replace(":1", "").replace(",", ";")]
            if s == "impi-relay":
                launcher += ["--relay", "a0"]
        argv = launcher + ["-n", str(np), "-hosts", hosts] + \
            engine.genv(self.series_env(s, r, np)) + [self.bins[(kind, prog)]] + opts.split()
        done_csv = r"^(paths (succeeded|FAILED)|No Errors|Found [0-9]+ errors)$"
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rc, secs, hung, timed_out = self.runner.mpiexec(argv, csv, err, done_csv)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU of the job's processes (mpiexec, its proxies and the ranks, each
        # waited for by its parent), not of the router daemons
        job_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        w1 = self.wan_payload()
        tx1 = [self.bed.tx_bytes(n, "ext0") for n in self.nodes]
        done, device, sent = engine.program_lines(err, f"icbc_{prog}")
        out = open(csv, errors="replace").read()
        if prog == "paths":  # a demo job, not a benchmark: its own success line
            done = re.search(r"^paths succeeded$", out, re.M) is not None
            device, sent = inst.device, 0
        elif prog == "stress":  # a test: "No Errors", and the bytes it received
            done = re.search(r"^No Errors$", out, re.M) is not None
            device = inst.device
            mm = re.search(r"^stress: .* ([0-9]*) payload bytes received", out, re.M)
            sent = int(mm.group(1)) if mm and mm.group(1) else None
        t = engine.Try(csv, err, rc, secs, hung, timed_out, done, device, sent)
        self.runner.judge(t, inst.device, "the install")
        wan = w1 - w0
        if not t.status:
            if sent is None or wan < sent * frac:
                t.status = "no-wan"
                t.detail = (f"the WAN carried {wan} payload bytes, the benchmark sent "
                            f"{sent if sent is not None else '?'} (at least {frac:.4g} of it "
                            "must cross): traffic did not take the inter-cluster path")
            else:
                t.status = "ok"
        with open(self.traffic, "a") as f:
            f.write(f"{self.run_no},{part},{s},{r},{rep},{try_no},{t.status}," +
                    ",".join(str(b - a) for a, b in zip(tx0, tx1)) +
                    f",{wan},{job_cpu:.3f},{sent if sent is not None else ''}\n")
        t.detail = (t.detail + "; " if t.detail else "") + \
            f"WAN payload {wan} B for {sent if sent is not None else '?'} B sent"
        return t

    def run_one(self, part, s, r, rep):
        raw = os.path.join(self.o.out, "raw", f"routed_{part}_{s}_R{r}_rep{rep}.csv")
        if part == "paths":
            raw = os.path.join(self.o.out, "raw", f"routed_paths_{s}.txt")
        elif part == "stress":
            raw = os.path.join(self.o.out, "raw", f"routed_stress_{s}_rep{rep}.txt")
        kept = self.runner.run_one(f"{part} {s} R={r} rep {rep}", raw,
                                   lambda try_no: self.run_try(part, s, r, rep, try_no))
        if kept:
            self.good.setdefault((part, s, r), []).append(kept)

    # ---- the runs -------------------------------------------------------------------------

    def runs(self):
        o = self.o
        t0 = time.time()
        series_parts = [p for p in ("paths", "stress", "latency", "bw", "mbw", "alltoall")
                        if p in o.want]
        if series_parts:
            if o.routers >= 1:
                self.start_routers(o.routers)
            for rep in range(1, o.reps + 1):
                order = o.pols if rep % 2 else list(reversed(o.pols))
                for part in series_parts:
                    if part == "paths" and rep > 1:
                        continue
                    for s in order:
                        if s in IMPI_SERIES and part not in ("latency", "bw"):
                            continue
                        self.run_one(part, s, o.routers, rep)
            self.stop_routers("after the policy runs")
        if "stripe" in o.want:
            for r in o.stripe_rl:
                self.start_routers(r)
                for rep in range(1, o.reps + 1):
                    self.run_one("stripe", "aggregate", r, rep)
                self.stop_routers(f"after the stripe runs with R={r}")
        if "placement" in o.want:
            self.start_routers(o.routers)
            try:
                for slow in (False, True):
                    self.shape_router(o.slow_bps if slow else None)
                    for rep in range(1, o.reps + 1):
                        order = PLACEMENTS if rep % 2 else tuple(reversed(PLACEMENTS))
                        for pl in order:
                            self.run_one("placement", pl + ("-slow" if slow else ""), o.routers,
                                         rep)
            finally:
                self.shape_router(None)
                self.stop_routers("after the placement runs")
        self.t_runs = time.time() - t0

    def shape_router(self, bps):
        """Router a{R-1}'s external NIC (the direction a -> b the bandwidth
        runs send in) at BPS, or back at --nic-rate for None, with the
        testbed's own tbf settings (a burst of 1 ms at that rate)."""
        o = self.o
        rate = int(bps if bps else stripe.parse_rate(o.nic_rate))
        burst = max(rate // 8 // 1000, 4096)
        node = f"a{o.routers - 1}"
        argv = ["tc", "qdisc", "replace", "dev", "ext0", "root", "tbf", "rate", f"{rate}bit",
                "burst", str(burst), "latency", "10ms"]
        subprocess.run(self.bed.tb.exec_cmd(node, argv), check=True)
        note(f"{node}: ext0 at {rate / 1e6:g} Mbit/s")

    # ---- report ---------------------------------------------------------------------------

    def start(self):
        self.bed.up()

    def cleanup(self):
        self.runner.stop()
        self.stop_routers("cleanup")
        self.bed.down()

    def report(self):
        o = self.o
        load_end = engine.loadavg()
        head = [f"command: {self.cmdline}",
                f"date: {self.start_date}; runs took {self.t_runs:.0f} s",
                f"machine: {self.machine}",
                f"load average (1/5/15 min) at start: {self.load_start}, at end: {load_end}",
                f"testbed: icbc-testbed up --name {o.testbed_name} {' '.join(self.tb_args)} "
                f"({self._canon()})",
                f"placement: p2p ranks on a{o.nodes - 1} and b{o.nodes - 1}; mbw/alltoall one "
                f"rank per node, {2 * o.nodes} ranks"]
        if self.need_icbc:
            head.append(f"icbc: {o.prefix} ({self.icbc.device})")
        if self.need_stock:
            head.append(f"stock: {o.stock_prefix} ({self.stock.device}), UCX_TLS=tcp,self "
                        "UCX_NET_DEVICES=ext0")
        head.append("routers: " + (f"{self.router} {o.router_args}" if self.daemons
                                   else "no daemons started"))
        head.append(f"options: latency [{o.latency_opts}] bw [{o.bw_opts}] stripe "
                    f"[{o.stripe_opts}] mbw [{o.mbw_opts}] alltoall [{o.alltoall_opts}]")
        with open(self.summary, "w") as f:
            f.write("\n".join(head) + "\n")
        foot = (f"{self.start_date}; testbed 2x{o.nodes} nodes, R={o.routers}, NIC {o.nic_rate}, "
                f"WAN {o.wan_rate}, delay {o.delay}; {self.machine}")
        self.meta = ["--meta", f"command={self.cmdline}", "--meta", f"date={self.start_date}",
                     "--meta", f"machine={self.machine}",
                     "--meta", f"testbed=icbc-testbed up --name {o.testbed_name} "
                               f"{' '.join(self.tb_args)}",
                     "--meta", f"load average at start/end={self.load_start} / {load_end}"]
        self.foot = foot
        fail = False
        if "paths" in o.want:
            for s in o.pols:
                f = os.path.join(o.out, "raw", f"routed_paths_{s}.txt")
                tee(self.summary, f"\n== paths under policy {s} (examples/icbc_paths.c, one rank "
                                  "per node)")
                tee(self.summary, open(f).read().rstrip("\n") if os.path.exists(f)
                    else f"NO DATA (see {self.runner.events_path})")
        if "stress" in o.want:
            tee(self.summary, f"\n== stress test (test/mpi/stress.c {o.stress_opts}, one rank "
                              "per node) per policy")
            for s in o.pols:
                files = sorted(f for f in os.listdir(os.path.join(o.out, "raw"))
                               if f.startswith(f"routed_stress_{s}_rep"))
                if not files:
                    tee(self.summary, f"{s}: NO DATA (see {self.runner.events_path})")
                for name in files:
                    text = open(os.path.join(o.out, "raw", name)).read().splitlines()
                    rep = name.rsplit("_rep", 1)[1][:-4]
                    count = next((l[len("stress: "):] for l in text
                                  if re.match(r"^stress: [0-9]+ messages", l)), "")
                    tee(self.summary, f"{s} rep {rep}: {count} {text[-1] if text else ''}")
        if "latency" in o.want:
            fail |= self.compare_part("latency", "latency", "lower", "us", "alltoall",
                                      o.small_target, o.small_max)
        if "bw" in o.want:
            fail |= self.compare_part("bw", "bandwidth", "higher", "MB/s", "aggregate")
        if "mbw" in o.want:
            fail |= self.compare_part("mbw", "multi-pair bandwidth", "higher", "MB/s", "aggregate")
        if "alltoall" in o.want:
            fail |= self.compare_part("alltoall", "MPI_Alltoall time", "lower", "us", "aggregate")
        if "stripe" in o.want:
            fail |= self.stripe_report()
        if "placement" in o.want:
            fail |= self.placement_report()
        self.traffic_report()
        with open(self.router_stats) as f:
            rs = [l.rstrip("\n") for l in f if not l.startswith("#")]
        ev = self.runner.events()
        tee(self.summary, "\n== router stats (routed_routers.txt)\n" +
            ("\n".join(rs) if rs else "(no routers were started)") +
            f"\n\nevents (retries, hangs, failures): {len(ev)}" +
            "".join(f"\n  {l}" for l in ev) +
            f"\nresults: {o.out} (routed_*.csv, routed_*.png, raw/), logs: {self.logs}")
        return fail

    def _canon(self):
        try:
            with open(os.path.join(self.bed.state, "args")) as f:
                return f.readline().strip()
        except OSError:
            return "?"

    def compare_part(self, part, name, kind, unit, ref, target=None, to=None):
        o = self.o
        series = []
        for s in o.pols:
            files = self.good.get((part, s, o.routers))
            if files:
                series += ["--series", s] + files
        if not series:
            tee(self.summary, f"== {name}: NO DATA (no policy gave a valid run; see "
                              f"{self.runner.events_path})")
            return True
        if series.count("--series") == 1:
            # one policy only: its medians against themselves (ratio 1)
            series += ["--series", series[1] + "(again)"] + series[2:]
        have_ref = bool(self.good.get((part, ref, o.routers))) and ref in o.pols
        argv = ["--name", name, "--kind", kind, "--unit", unit, "--column", "1"]
        if have_ref:
            argv += ["--ref", ref]
            if target is not None:
                argv += ["--target", str(target), "--target-to", to]
        evs = ";".join(l.split(" ", 1)[1] for l in self.runner.events(part))
        tee(self.summary, f"\n== {name} ({part}): median of reps per size; ratio = policy / {ref}")
        png = ["--png", os.path.join(o.out, f"routed_{part}.png")] if self.plots else []
        argv += series + ["--out", os.path.join(o.out, f"routed_{part}.csv")] + png + [
                          "--title", f"{name} across two clusters (R={o.routers} routers per "
                                     "cluster)",
                          "--footer", f"{self.foot}; {self.cmdline}"] + self.meta + \
            ["--meta", f"events={evs + ';' if evs else ''}"]
        return engine.compare(argv, self.summary) != 0

    def stripe_report(self):
        o = self.o
        sargs = []
        for r in o.stripe_rl:
            files = self.good.get(("stripe", "aggregate", r))
            if files:
                sargs += ["--series", str(r)] + files
        tee(self.summary, f"\n== striped bandwidth (aggregate, icbc_bw at {o.stripe_size}) vs "
                          "min(R x NIC, WAN)")
        if not sargs:
            tee(self.summary, "VERDICT striped bandwidth: NO DATA")
            return False
        argv = ["--nic-rate", o.nic_rate, "--wan-rate", o.wan_rate, "--size", o.stripe_size,
                "--target", str(o.stripe_target)] + sargs + self.meta + \
            ["--out", os.path.join(o.out, "routed_stripe.csv"),
             "--png", os.path.join(o.out, "routed_stripe.png"),
             "--title", f"striped bandwidth a{o.nodes - 1} -> b{o.nodes - 1} at "
                        f"{o.stripe_size} (aggregate)",
             "--footer", f"{self.foot}; {self.cmdline}"]
        return engine._tool(HERE, "stripe", argv, self.summary) != 0

    def placement_report(self):
        """Median bandwidth per placement, with equal routers and with one slow,
        against the sum of the routers' goodput ceilings; CSV and PNG."""
        o = self.o
        nic = stripe.parse_rate(o.nic_rate)
        sums = {False: o.routers * nic, True: (o.routers - 1) * nic + o.slow_bps}
        rows = {}
        for slow in (False, True):
            for pl in PLACEMENTS:
                vals = []
                for f in self.good.get(("placement", pl + ("-slow" if slow else ""), o.routers),
                                       []):
                    for line in open(f).read().splitlines()[1:]:
                        c = line.split(",")
                        if len(c) >= 2:
                            vals.append(float(c[1]))
                rows[(slow, pl)] = (sorted(vals)[len(vals) // 2] if vals else None, len(vals))
        tee(self.summary, f"\n== placement of chunks on R={o.routers} routers (aggregate, icbc_bw "
                          f"at {o.stripe_size}, median of reps): MB/s and share of the sum of "
                          "the routers' goodput ceilings")
        out = os.path.join(o.out, "routed_placement.csv")
        with open(out, "w") as f:
            f.write("routers,slow_router_mbit,placement,reps,mbytes_per_s,sum_ceiling_mbytes_per_s,"
                    "ratio_to_sum\n")
            for slow in (False, True):
                ceil = sums[slow] * stripe.GOODPUT / 8e6
                for pl in PLACEMENTS:
                    v, n = rows[(slow, pl)]
                    f.write(f"{o.routers},{o.slow_bps / 1e6 if slow else ''},{pl},{n},"
                            f"{'' if v is None else f'{v:.3f}'},{ceil:.3f},"
                            f"{'' if v is None else f'{v / ceil:.3f}'}\n")
                    tee(self.summary, f"{'one router slow' if slow else 'equal routers':<16} "
                                      f"{pl:<12} " + ("NO DATA" if v is None else
                                                     f"{v:8.2f} MB/s  {v / ceil:.3f} of {ceil:.2f}"))
        ad, rr = rows[(True, "adaptive")][0], rows[(True, "round-robin")][0]
        ad_eq, rr_eq = rows[(False, "adaptive")][0], rows[(False, "round-robin")][0]
        fail = None in (ad, rr, ad_eq, rr_eq)
        if not fail:
            ceil = sums[True] * stripe.GOODPUT / 8e6
            v1 = ad / ceil >= 0.9
            v2 = ad_eq / rr_eq >= 0.98
            tee(self.summary, f"VERDICT adaptive with one slow router: {ad / ceil:.3f} of the sum "
                              f"(target >= 0.9): {'MET' if v1 else 'MISSED'}; round-robin "
                              f"{rr / ceil:.3f}, adaptive / round-robin {ad / rr:.2f}")
            tee(self.summary, f"VERDICT adaptive with equal routers: {ad_eq / rr_eq:.3f} x "
                              f"round-robin (target >= 0.98): {'MET' if v2 else 'MISSED'}")
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(7, 4))
            for i, slow in enumerate((False, True)):
                vals = [rows[(slow, pl)][0] or 0 for pl in PLACEMENTS]
                ax.bar([x + 0.38 * i for x in range(len(PLACEMENTS))], vals, 0.38,
                       label="one router at " + f"{o.slow_bps / 1e6:g} Mbit/s" if slow
                       else "equal routers")
                ax.axhline(sums[slow] * stripe.GOODPUT / 8e6, ls="--", lw=0.8,
                           color=f"C{i}")
            ax.set_xticks([x + 0.19 for x in range(len(PLACEMENTS))], PLACEMENTS)
            ax.set_ylabel("MB/s")
            ax.set_title(f"striped bandwidth by placement, R={o.routers}, {o.stripe_size} "
                         "(dashed: sum of the routers' goodput)", fontsize=9)
            ax.legend(fontsize=8)
            fig.text(0.01, 0.01, f"{self.foot}", fontsize=6)
            fig.savefig(os.path.join(o.out, "routed_placement.png"), dpi=110)
        except ImportError:
            pass
        return fail

    def traffic_report(self):
        """Per policy, the share of cluster a's external NIC bytes each node
        sent in the bandwidth runs (p2p from a{M-1}): routed policies should
        spread over the routers."""
        m = self.o.nodes
        shares, counts, order = {}, {}, []
        with open(self.traffic) as f:
            next(f)
            for line in f:
                c = line.rstrip("\n").split(",")
                if c[1] not in ("bw", "stripe") or c[6] not in ("ok", "finalize-hang"):
                    continue
                key = f"{c[1]} {c[2]} R={c[3]}"
                tx = [int(x) for x in c[7:7 + m]]
                tot = sum(tx)
                if tot <= 0:
                    continue
                if key not in counts:
                    order.append(key)
                    counts[key], shares[key] = 0, [0.0] * m
                counts[key] += 1
                for i in range(m):
                    shares[key][i] += tx[i] / tot
        lines = ["\n== external NIC bytes sent per node of cluster a (share of cluster a's "
                 "total), bandwidth runs"]
        for key in order:
            lines.append(f"{key:<24}" + "".join(f"  a{i} {100 * shares[key][i] / counts[key]:5.1f}%"
                                                 for i in range(m)))
        tee(self.summary, "\n".join(lines))


def main(argv):
    return engine.run_main(PROG, USAGE, options, Routed, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
