#!/usr/bin/python3
"""NPB kernels across two emulated clusters: every benchmark under every
policy, router count and WAN delay asked for, as a user runs them.

    python3 benchmarks/apps/run.py [--regime aggregate-router-2009|matrix-2026]
        [--bench is,ft,cg,mg,is.B,hpcc] [--class A]
        [--policies aggregate,static,alltoall,tcp,stock] [--routers 4,2,1]
        [--delays 0ms,5ms,10ms] [--nodes 4] [--ppn 1] [--nic-rate 50mbit]
        [--wan-rate 400mbit] [--reps 1] [--prefix _install] [--stock-prefix /usr]
        [--npb DIR] [--out DIR] [--timeout 600]
        [--variant LABEL=POLICY:VAR=VALUE[:VAR=VALUE...]]... [--buffer SIZE]
        [--nic-queue TIME] [--[no-]traces]
        [--hpcc-n N] [--resume | --report]

--regime names a whole setting (REGIMES below; --help prints them); options
given beside it override its values. aggregate-router-2009 is the
aggregate-router paper's regime scaled to one host: one NIC < WAN < all the
nodes' NICs (1.6 x), the routers' NICs together at most the WAN, routers
embedded in the first process of the first R nodes, 2 processes per node,
a switch-sized WAN buffer, delays 0-15 ms, and five columns: aggregate,
static, alltoall, tcp and stock MPICH (Debian's ch4:ucx from
--stock-prefix, UCX over TCP on the nodes' external NICs). matrix-2026 (the
default) is the first matrix: one rank per node, the WAN wider than all
NICs. Results go to benchmarks/results/apps/REGIME (matrix-2026: .../matrix)
unless --out says otherwise.

The host's CPU use over each run (all cores, /proc/stat: ranks, routers and
the WAN emulator together) is in the row; a run above 80 % is marked and
left out of the medians and ratios, since its time is the host's, not the
network's. Stock MPICH polls without yielding, so its CPU use is always
near 100 % whatever bounds it; its runs are counted, and on a host with
fewer cores than ranks its polling ranks take the cores from each other.

A benchmark is a kernel of class --class (is) or of the class it names
(is.B), or hpcc. The runs go in phases, cheapest first: the kernels of
--class, then those of each other class, then hpcc; within a phase the
router counts in the order given (the most first by default: the ratio
targets are there), then the delays. npb.csv is written after every run,
and --resume keeps the rows of OUT/npb.csv that this matrix asks for (same
benchmark, class, policy, routers, delay, rep, testbed parameters and
HPCC's input) and runs only the others: a matrix cut off is finished by the
same command with --resume. Without --resume the matrix's rows are run
again and replaced; rows of other matrices in OUT/npb.csv are always kept.
--report runs nothing and leaves npb.csv as it is: the table and the plots
of the rows OUT/npb.csv already holds for this matrix.

For each router count and delay one testbed comes up (icbc-testbed up
--clusters 2 --nodes M --routers R ...); each run is the testbed's env file,
its router file with the policy line set as a user edits it, and our
mpiexec with --ppn ranks per node, cluster a's nodes first (ranks 0..M*ppn-1
in a, the rest in b). A --variant is one more column beside the policies: runs
under POLICY with the variables given (e.g. a CVAR under study), labelled
LABEL in the table and the plots; the variables reach the ranks with
mpiexec -genv, as a user passes them. {matb_lib} in a value is the path of
matb_preload.so (built here with our mpicc): with LD_PRELOAD={matb_lib} and
ICBC_BENCH_MATB=BITS, the ranks set the ICBC_PACING_MATB attribute on
MPI_COMM_WORLD after MPI_Init, as an application that paces itself does. Every run must pass NPB's own verification; one that does
not, or dies, is a row with verified=no and the reason, never a number.

--bench hpcc runs HPCC 1.5.0 (benchmarks/apps/hpcc.py: Debian's source, our
mpicc, OpenBLAS) with HPL's N = --hpcc-n on the most square process grid, in
a directory of its own per run, the tests named by --hpcc-tests only (all by
default; --resume counts N and the tests as part of a run's name); its
row's Mop/s is HPL's Mflop/s, its seconds HPL's time, its other summary
values (PTRANS, RandomAccess, FFT, DGEMM, STREAM, ring and ping-pong) in
hpcc_summary, and it has verified when HPCC's summary says Success=1 (the
checks of the tests that ran).

Each row has the frames the emulated WAN dropped during the run (wan.stats,
both directions; --buffer sets the WAN's buffer), the frames the nodes' NICs
dropped (their tbf queues, both directions; --nic-queue sets how long a
frame may wait in a node's transmit queue) and the TCP segments the nodes
retransmitted. --traces keeps the WAN's
1 ms trace of one run per policy (the first benchmark, the most routers,
the first delay, rep 1), cut to the run, as OUT/traces/NAME.csv with its
plot (icbc-wanemu-plot, 10 ms averages), and wan_traces.png: the policies'
WAN throughput over time one above the other, on one scale.
With variants, npb_variants.png shows Mop/s and WAN drops per column.

Output (--out): npb.csv (one row per run: benchmark, class, policy, routers,
delay, processes, seconds, Mop/s, verified, the testbed's parameters), and
npb_delay.png (Mop/s against delay per policy, at the most routers) and
npb_routers.png (Mop/s against routers per policy, at the smallest delay),
one panel per benchmark; npb_summary.txt the table with the command, the
ratios of aggregate to each policy, and each policy's loss from the
smallest to the largest delay. Exit status 0 when every run verified, 1
otherwise, 2 on bad usage.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "test", "harness"))
sys.path.insert(0, HERE)

import hpcc  # noqa: E402
import npb  # noqa: E402
from mpirun import run_mpi  # noqa: E402
from testbed import Testbed  # noqa: E402

POLICIES = ("aggregate", "static", "alltoall", "tcp", "stock")
# the columns that name a run, and the testbed's that must match for --resume
RUN_KEY = ("bench", "cls", "policy", "routers", "delay", "rep")
TESTBED_KEY = ("nodes", "ppn", "nic_rate", "wan_rate", "wan_buffer", "nic_queue")
# and HPCC's input (empty for NPB's kernels; a row of HPCC written before
# these columns matches no matrix, and stays in the file)
HPCC_KEY = ("hpcc_n", "hpcc_tests")
# a column added later: what the rows written before it had
KEY_DEFAULT = {"ppn": "1"}
# runs whose host CPU use is above this (percent of all cores) are marked and
# left out of the medians and ratios: their time is the host's, not the network's
CPU_BOUND_PCT = 80.0

# The last line of NPB's report: the Fortran kernels' and IS's (C)
NPB_REPORT_END = r"^\s*(Internet: )?npb@nas\.nasa\.gov"

# Named settings of the matrix (--regime); an option given on the command line
# wins over its regime's value.
REGIMES = {
    # The aggregate-router paper's regime scaled to one two-core host: one
    # NIC < WAN < the nodes' NICs together (4 x 10 = 40 Mbit/s into 25, the
    # paper's 1.6 x), the routers' NICs together at most the WAN (2 x 10 =
    # 20 <= 25, the paper's 8 x 1 Gbps into 10), routers on compute nodes,
    # 2 processes per node, a WAN buffer of a switch (16 KiB: 5 ms at the
    # WAN's rate), a node's transmit queue of 240 ms (200 frames at 10 Mbit/s;
    # the testbed's 10 ms holds 8, and the nodes' own NICs then drop a frame in
    # every few: a host's queue holds 1000), the paper's delays. At 25 Mbit/s
    # NICs the 16 ranks kept the two cores 78-91 % busy (CG.A); at 10 Mbit/s
    # 29-70 %. HPCC runs HPL, PTRANS, MPIFFT and MPIRandomAccess (what
    # crosses the WAN; HPL and MPIFFT are the paper's figures): its ring test
    # sends 2 MB messages around the 16 ranks many times and alone took more
    # than 6 minutes per run at these rates.
    "aggregate-router-2009": {
        "bench": "cg,ft,is,mg,hpcc", "cls": "A", "nodes": 4, "ppn": 2, "routers": "2",
        "nic_rate": "10mbit", "wan_rate": "25mbit", "buffer": "16KiB", "nic_queue": "240ms",
        "delays": "0ms,5ms,10ms,15ms", "policies": "aggregate,static,alltoall,tcp,stock",
        "traces": True, "hpcc_n": 2000, "hpcc_tests": "HPL,PTRANS,MPIFFT,MPIRandomAccess",
    },
    # The first matrix (benchmarks/results/apps/matrix): one rank per node,
    # the WAN wider than all NICs together.
    "matrix-2026": {
        "bench": "is,ft,cg,mg", "cls": "A", "nodes": 4, "ppn": 1, "routers": "4,2,1",
        "nic_rate": "50mbit", "wan_rate": "400mbit", "buffer": "", "delays": "0ms,5ms,10ms",
        "policies": "aggregate,static,alltoall", "traces": False, "hpcc_n": 3000,
        "hpcc_tests": "all", "nic_queue": "",
    },
}
DEFAULT_REGIME = "matrix-2026"


class Bench:
    """A benchmark of the matrix: an NPB kernel of a class, or hpcc."""

    def __init__(self, name, cls):
        self.name, self.cls = name, cls

    @property
    def label(self):  # the table's and the plots' name; the csv's bench column is name.upper()
        return "HPCC" if self.name == "hpcc" else f"{self.name.upper()}.{self.cls}"

    def run_name(self, pol, r, d, rep):  # a run's directory, log and trace: is.A-static-R4-0ms-rep1
        what = "hpcc" if self.name == "hpcc" else f"{self.name}.{self.cls}"
        return f"{what}-{pol}-R{r}-{d}-rep{rep}"

    def phase(self, first_cls):
        return (2, "") if self.name == "hpcc" else (0 if self.cls == first_cls else 1, self.cls)
FIELDS = ["bench", "cls", "policy", "routers", "delay", "procs", "rep", "secs", "mops",
          "verified", "why", "nodes", "ppn", "nic_rate", "wan_rate", "wan_buffer", "nic_queue",
          "wan_drops", "nic_drops", "tcp_retrans", "cpu_pct", "wall_secs", "hpcc_summary",
          "hpcc_n", "hpcc_tests"]


def split(text, what, allowed=None):
    items = [x for x in text.replace(" ", ",").split(",") if x]
    if not items:
        raise SystemExit(f"run.py: {what} is empty")
    for x in items:
        if allowed and x not in allowed:
            raise SystemExit(f"run.py: {what}: '{x}' is not one of {', '.join(allowed)}")
    return items


def options(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--regime", choices=sorted(REGIMES), default=DEFAULT_REGIME,
                    help="named settings of the matrix (the options below override them): "
                         + "; ".join(f"{k}: " + ", ".join(f"{a}={v}" for a, v in r.items())
                                     for k, r in sorted(REGIMES.items())))
    ap.add_argument("--bench",
                    help="NPB kernels (is, ft, cg, mg, lu, ep, ...) of --class, or of a "
                         "class named (is.B), and hpcc")
    ap.add_argument("--hpcc-n", type=int, help="HPL's N for hpcc")
    ap.add_argument("--hpcc-tests", help="HPCC's tests for hpcc: all, or of "
                    + ", ".join(hpcc.TESTS))
    ap.add_argument("--class", dest="cls")
    ap.add_argument("--policies", help="of " + ", ".join(POLICIES) + " (stock: MPICH from "
                    "--stock-prefix, UCX over TCP on the nodes' external NICs)")
    ap.add_argument("--stock-prefix", default="/usr", help="stock MPICH (Debian's ch4:ucx)")
    ap.add_argument("--routers")
    ap.add_argument("--delays")
    ap.add_argument("--nodes", type=int, help="nodes per cluster")
    ap.add_argument("--ppn", type=int, help="processes per node")
    ap.add_argument("--nic-rate")
    ap.add_argument("--wan-rate")
    ap.add_argument("--buffer", help="the WAN's buffer (icbc-testbed --buffer)")
    ap.add_argument("--nic-queue",
                    help="how long a frame may wait in a node's NIC transmit queue "
                         "(icbc-testbed --nic-queue)")
    ap.add_argument("--traces", action=argparse.BooleanOptionalAction, default=None,
                    help="keep the WAN's 1 ms trace of one run per policy: the first "
                         "benchmark at the most routers and the first delay "
                         "(OUT/traces/NAME.csv and .png, wan_traces.png)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows of OUT/npb.csv this matrix asks for; run the others")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: the table and plots of the rows of OUT/npb.csv this "
                         "matrix asks for")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--npb", metavar="DIR",
                    help=f"the {npb.NPB_TREE} folder of NPB 3.4, or a folder holding it "
                         f"(default: ${npb.ENV_NPB}; benchmarks/README.md, NPB)")
    ap.add_argument("--out", help="results (default benchmarks/results/apps/REGIME)")
    ap.add_argument("--work", default=os.path.join(TOP, "_build", "bench-apps"))
    ap.add_argument("--timeout", type=int, default=600, help="bound of one run, s")
    ap.add_argument("--testbed-name", default="apps")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=POLICY:VAR=VALUE[:VAR=VALUE...], one more column")
    o = ap.parse_args(argv)
    for k, v in REGIMES[o.regime].items():
        if getattr(o, k) is None:
            setattr(o, k, v)
    if o.out is None:
        o.out = os.path.join(TOP, "benchmarks", "results", "apps",
                             {"matrix-2026": "matrix"}.get(o.regime, o.regime))
    if o.nodes < 1 or o.ppn < 1:
        raise SystemExit("run.py: --nodes and --ppn must be at least 1")
    o.benches = []
    for b in split(o.bench, "--bench"):
        name, _, cls = b.partition(".")
        if not name or (name == "hpcc" and cls) or (cls and not cls.isalpha()):
            raise SystemExit(f"run.py: --bench: bad benchmark '{b}' (is, is.B, hpcc)")
        o.benches.append(Bench(name, "-" if name == "hpcc" else (cls or o.cls).upper()))
    o.pols = split(o.policies, "--policies", POLICIES)
    o.policy_of = {p: p for p in o.pols}
    o.env_of = {p: {} for p in o.pols}
    for v in o.variant:
        label, _, rest = v.partition("=")
        parts = rest.split(":")
        if not label or label in o.policy_of or parts[0] not in POLICIES or \
                any("=" not in x for x in parts[1:]):
            raise SystemExit(f"run.py: bad --variant '{v}' (LABEL=POLICY:VAR=VALUE...)")
        o.pols.append(label)
        o.policy_of[label] = parts[0]
        o.env_of[label] = dict(x.split("=", 1) for x in parts[1:])
    o.rl = [int(r) for r in split(o.routers, "--routers")]
    if any(r < 1 or r > o.nodes for r in o.rl):
        raise SystemExit(f"run.py: --routers must be 1..--nodes ({o.nodes})")
    o.dl = split(o.delays, "--delays")
    try:
        tests = hpcc.tests_of(o.hpcc_tests)
        o.hpcc_tests = "all" if set(tests) == set(hpcc.TESTS) else ",".join(tests)
    except hpcc.HpccError as e:
        raise SystemExit(f"run.py: --hpcc-tests: {e}")
    if o.report:
        o.resume = True
    return o


def npb_row(row, output):
    try:
        rep = npb.parse(output)
        row.update(secs=rep["secs"], mops=rep["mops"], verified="yes" if rep["verified"] else "no")
        if not rep["verified"]:
            row["why"] = "NPB verification failed"
    except npb.NpbError as e:
        row["why"] = str(e)


def hpcc_row(row, rundir):
    """HPCC's summary: 'mops' is HPL's Mflop/s and 'secs' HPL's time, the
    other values in hpcc_summary."""
    try:
        with open(os.path.join(rundir, "hpccoutf.txt"), errors="replace") as f:
            r = hpcc.parse(f.read())
        row.update(secs=float(r["HPL_time"]), mops=float(r["HPL_Tflops"]) * 1e6,
                   verified="yes" if r["verified"] else "no",
                   hpcc_summary=" ".join(f"{k}={r[k]}" for k in hpcc.KEYS if k in r))
        if not r["verified"]:
            row["why"] = "HPCC's checks failed (Success=0)"
    except (OSError, KeyError, ValueError, hpcc.HpccError) as e:
        row["why"] = f"hpccoutf.txt: {e}"


def trace_time(tb):
    """The emulator's clock (seconds since it started, the trace's time_s),
    from its stats file, which it rewrites every 100 ms."""
    time.sleep(0.2)
    try:
        with open(os.path.join(tb.state, "wan.stats")) as f:
            first = f.readline().split()
        return float(first[0].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def last_trace_row(tb):
    """The time_s of the trace's last written row (rows are written once
    their interval ended 250 ms ago, and flushed every 100 ms)."""
    try:
        with open(os.path.join(tb.state, "wan.csv"), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            last = f.read().splitlines()[-1].decode()
        return float(last.split(",")[0])
    except (OSError, IndexError, ValueError):
        return None


def keep_trace(o, tb, name, t0, t1):
    """OUT/traces/NAME.csv: the trace's rows from T0 to T1, and its plot."""
    if t0 is None or t1 is None:
        return
    deadline = time.time() + 2
    while time.time() < deadline and (last_trace_row(tb) or 0) < t1:
        time.sleep(0.1)
    d = os.path.join(o.out, "traces")
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, f"{name}.csv")
    with open(os.path.join(tb.state, "wan.csv")) as f, open(out, "w") as g:
        g.write(f.readline())
        for line in f:
            try:
                t = float(line.split(",", 1)[0])
            except ValueError:
                continue
            if t0 <= t <= t1:
                g.write(line)
    plot = os.path.join(o.prefix, "bin", "icbc-wanemu-plot")
    subprocess.call([plot, out, "--avg", "10", "-o", out[:-4] + ".png", "--title",
                     f"{name}: WAN traffic, 10 ms averages"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def delay_ms(text):
    for unit, mult in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * mult
    return float(text)


def testbed_of(o):
    return {"nodes": o.nodes, "ppn": o.ppn, "nic_rate": o.nic_rate, "wan_rate": o.wan_rate,
            "wan_buffer": o.buffer or "default", "nic_queue": o.nic_queue or "default"}


def hpcc_of(o, bench_name):
    """The HPCC_KEY columns of a run of BENCH_NAME (upper or lower case)."""
    if bench_name.lower() != "hpcc":
        return {"hpcc_n": "", "hpcc_tests": ""}
    return {"hpcc_n": o.hpcc_n, "hpcc_tests": o.hpcc_tests}


def run_key(row):
    """A row of a testbed setting added later has it at its default."""
    return (tuple(str(row[k]) for k in RUN_KEY)
            + tuple(str(row.get(k) or KEY_DEFAULT.get(k, "default")) for k in TESTBED_KEY)
            + tuple(str(row.get(k) or "") for k in HPCC_KEY))


def key_of(o, bench, pol, r, d, rep):
    """The run_key of a run this matrix asks for."""
    return run_key({"bench": bench.name.upper(), "cls": bench.cls, "policy": pol, "routers": r,
                    "delay": d, "rep": rep, **testbed_of(o), **hpcc_of(o, bench.name)})


def cpu_ticks():
    """(busy, total) clock ticks of all the host's cores since boot
    (/proc/stat): the namespaces share the kernel, so this is every rank,
    router and the WAN emulator together."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return sum(v[:8]) - idle, sum(v[:8])


def cpu_pct(t0, t1):
    busy, total = t1[0] - t0[0], t1[1] - t0[1]
    return round(100.0 * busy / total, 1) if total > 0 else ""


def counted(row):
    """A verified run that was not CPU-bound (see CPU_BOUND_PCT). Stock
    MPICH polls without ever yielding, so its CPU use is always near 100 %
    and does not tell whether the network bounded it: its runs count."""
    if row["verified"] != "yes":
        return False
    if row.get("policy") == "stock":
        return True
    try:
        return float(row.get("cpu_pct") or 0) <= CPU_BOUND_PCT
    except ValueError:
        return True


def previous_rows(o):
    """--resume: the rows of OUT/npb.csv this matrix asks for. The rows of
    other matrices go to o.other_rows, which every write of npb.csv keeps."""
    path = os.path.join(o.out, "npb.csv")
    o.other_rows = []
    if not os.path.exists(path):
        return []
    want = {key_of(o, b, pol, r, d, rep) for b in o.benches for pol in o.pols for r in o.rl
            for d in o.dl for rep in range(1, o.reps + 1)}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    o.other_rows = [row for row in rows if run_key(row) not in want]
    return [row for row in rows if run_key(row) in want] if o.resume else []


def write_csv(o, rows):
    tmp = os.path.join(o.out, "npb.csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in o.other_rows + rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})
    os.replace(tmp, os.path.join(o.out, "npb.csv"))


def run_one(o, tb, exes, bench, pol, r, d, rep, hosts, env):
    np_ = 2 * o.nodes * o.ppn
    name = bench.run_name(pol, r, d, rep)
    stock = o.policy_of[pol] == "stock"
    prefix = o.stock_prefix if stock else o.prefix
    if stock:
        # UCX over the nodes' external NICs: without a router file UCX would
        # try every interface, and the testbed's management network does not
        # route between nodes; inside a node MPICH's shared memory
        env = dict(env, UCX_TLS="tcp,self", UCX_NET_DEVICES="ext0")
        env.pop("ICBC_ROUTERFILE", None)
    else:
        tb.set_policy(o.policy_of[pol])
    genv = [a for k, v in o.env_of[pol].items()
            for a in ("-genv", k, v.format(matb_lib=o.matb_lib))]
    drops0, nic0, retrans0 = tb.wan_drops(), tb.nic_drops(), tb.tcp_retrans()
    t0 = trace_time(tb)
    label = ("stock-" if stock else "") + bench.label
    if bench.name == "hpcc":  # reads and writes files in its directory
        rundir = os.path.join(tb.work, name)
        os.makedirs(rundir, exist_ok=True)
        hpcc.write_input(rundir, np_, o.hpcc_n, tests=hpcc.tests_of(o.hpcc_tests))
        out = os.path.join(rundir, "hpccoutf.txt")
        if os.path.exists(out):
            os.remove(out)  # HPCC appends to it
        genv += ["-wdir", rundir]
        # one BLAS thread per rank, as MPI users of OpenBLAS set it: its
        # pthread build starts a spinning thread per core in every rank
        env = dict(env, OPENBLAS_NUM_THREADS="1")
    cpu0, wall0 = cpu_ticks(), time.time()
    # Stock MPICH's 16 polling ranks on two cores may not leave MPI_Finalize
    # for minutes after the report: its job is ended 2 s after the report's
    # last line (NPB's on its output, HPCC's in hpccoutf.txt), and the row
    # says so.
    until = until_in = None
    if stock and bench.name == "hpcc":
        until, until_in = r"^End of HPC Challenge tests\.", out
    elif stock:
        until = NPB_REPORT_END
    res = run_mpi(prefix, env, exes[label], np_, tb.work, name=name, hosts=hosts,
                  timeout=o.timeout, mpiexec_args=genv, until=until, until_in=until_in)
    cpu1, wall = cpu_ticks(), time.time() - wall0
    row = {"bench": bench.name.upper(), "cls": bench.cls, "policy": pol, "routers": r,
           "delay": d, "procs": np_, "rep": rep, **testbed_of(o), **hpcc_of(o, bench.name),
           "wan_drops": tb.wan_drops() - drops0, "nic_drops": tb.nic_drops() - nic0,
           "tcp_retrans": tb.tcp_retrans() - retrans0, "verified": "no", "why": "",
           "cpu_pct": cpu_pct(cpu0, cpu1), "wall_secs": round(wall, 1)}
    if bench.name == "hpcc":
        hpcc_row(row, rundir)
    else:
        npb_row(row, res.output)
    if res.stopped and res.rc != 0:
        row["why"] = "ended 2 s after its report (MPI_Finalize did not return)"
    elif res.rc != 0 or res.timed_out:
        row["verified"] = "no"
        row["why"] = ("killed at the time limit" if res.timed_out else
                      f"exit {res.rc}") + f" (log {res.log})"
    if o.traces and bench is o.benches[0] and r == max(o.rl) and d == o.dl[0] and rep == 1:
        keep_trace(o, tb, name, t0, trace_time(tb))
    return name, row


def run_matrix(o, exes, rows, log):
    """Every run of the matrix not in ROWS yet, phase by phase (see the
    top); the testbed comes up once per phase, router count and delay."""
    done = {run_key(x) for x in rows}
    phases = sorted({b.phase(o.cls.upper()) for b in o.benches})
    for ph in phases:
        benches = [b for b in o.benches if b.phase(o.cls.upper()) == ph]
        for r in o.rl:
            for d in o.dl:
                todo = [(rep, b, pol) for rep in range(1, o.reps + 1) for b in benches
                        for pol in (o.pols if rep % 2 else list(reversed(o.pols)))
                        if key_of(o, b, pol, r, d, rep) not in done]
                if not todo:
                    continue
                tb = Testbed(o.testbed_name, o.prefix,
                             ["--clusters", "2", "--nodes", str(o.nodes), "--routers", str(r),
                              "--nic-rate", o.nic_rate, "--wan-rate", o.wan_rate, "--delay", d]
                             + (["--buffer", o.buffer] if o.buffer else [])
                             + (["--nic-queue", o.nic_queue] if o.nic_queue else []),
                             os.path.join(o.work, f"R{r}-{d}"))
                tb.up()
                try:
                    env = tb.user_env()
                    hosts = os.path.join(tb.work, "hosts")
                    with open(hosts, "w") as f:
                        f.write("".join(f"{c}{i}:{o.ppn}\n" for c in "ab"
                                        for i in range(o.nodes)))
                    for rep, bench, pol in todo:
                        name, row = run_one(o, tb, exes, bench, pol, r, d, rep, hosts, env)
                        rows.append(row)
                        write_csv(o, rows)
                        line = (f"{name}: {row.get('mops', '-')} Mop/s, "
                                f"{row.get('secs', '-')} s, verified {row['verified']}, "
                                f"drops WAN {row['wan_drops']} NIC {row['nic_drops']}, "
                                f"TCP retransmits {row['tcp_retrans']}, "
                                f"host CPU {row['cpu_pct']} %"
                                + (f" ({row['why']})" if row["why"] else ""))
                        print(line, flush=True)
                        log.write(line + "\n")
                        log.flush()
                finally:
                    tb.down()


def matching(rows, **key):
    """The rows whose columns KEY names hold the values given."""
    return [x for x in rows if all(str(x[k]) == str(val) for k, val in key.items())]


def verified(row):
    return row["verified"] == "yes"


def median(rows, rule=counted, **key):
    """The median Mop/s of the runs of KEY that RULE keeps (counted runs by
    default; verified: CPU-bound ones too)."""
    v = [float(x["mops"]) for x in matching(rows, **key) if rule(x)]
    return statistics.median(v) if v else None


def of(b):
    """The columns that select benchmark B's rows."""
    return {"bench": b.name.upper(), "cls": b.cls}


def drops_of(rows, col="wan_drops", **key):
    """The median of a counter column (wan_drops, nic_drops, tcp_retrans)
    over the runs that recorded it."""
    v = [int(x[col]) for x in matching(rows, **key) if str(x.get(col) or "").isdigit()]
    return statistics.median(v) if v else None


# HPCC's values that cross the WAN, beside HPL: (key in hpcc_summary, label)
HPCC_WAN_VALUES = [("PTRANS_GBs", "PTRANS GB/s"), ("MPIFFT_Gflops", "FFT Gflop/s"),
                   ("MPIRandomAccess_GUPs", "RandomAccess GUP/s"),
                   ("RandomlyOrderedRingBandwidth_GBytes", "ring GB/s"),
                   ("RandomlyOrderedRingLatency_usec", "ring latency us")]


def hpcc_value(rows, name, rule=counted, **key):
    """The median over the runs RULE keeps of one value of hpcc_summary."""
    v = []
    for x in matching(rows, **key):
        kv = dict(f.split("=", 1) for f in x.get("hpcc_summary", "").split() if "=" in f)
        if rule(x) and name in kv:
            v.append(float(kv[name]))
    return statistics.median(v) if v else None


def hpcc_lines(o, rows, b, rl, dl):
    """Per R and delay, HPCC's WAN-bound values under each policy."""
    lines = ["", f"{b.label}: values beyond HPL, median of reps, policies "
             + " / ".join(o.pols)]
    for r in rl:
        for d in dl:
            cells = []
            for key, label in HPCC_WAN_VALUES:
                vals = [hpcc_value(rows, key, **of(b), policy=p, routers=r, delay=d)
                        for p in o.pols]
                cells.append(label + " " + " / ".join(f"{v:.4g}" if v is not None else "-"
                                                      for v in vals))
            lines.append(f"{b.label} R={r} delay {d}: " + "; ".join(cells))
    return lines


def trace_figure(o):
    """wan_traces.png: the WAN's throughput (both directions summed, 10 ms
    averages) over each kept run, one panel per policy, on one scale."""
    import matplotlib.pyplot as plt
    b = o.benches[0]
    r, d = max(o.rl), o.dl[0]
    panels = []
    for pol in o.pols:
        path = os.path.join(o.out, "traces", b.run_name(pol, r, d, 1) + ".csv")
        try:
            with open(path, newline="") as f:
                rd = csv.reader(f)
                head = next(rd)
                cols = [i for i, h in enumerate(head) if h.startswith("bytes_")]
                t, byt = [], []
                for x in rd:
                    if len(x) == len(head):
                        t.append(float(x[0]))
                        byt.append(sum(float(x[i]) for i in cols))
        except (OSError, StopIteration, ValueError):
            continue
        if len(t) < 20:
            continue
        dt = t[1] - t[0]
        n = max(1, int(round(0.010 / dt)))
        tt = [t[i] - t[0] for i in range(0, len(t), n)]
        mbit = [sum(byt[i:i + n]) * 8 / (dt * len(byt[i:i + n])) / 1e6
                for i in range(0, len(byt), n)]
        panels.append((pol, tt, mbit))
    if not panels:
        return
    top = 1.05 * max(max(p[2]) for p in panels) or 1
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.9 * len(panels)), sharex=True,
                             squeeze=False)
    for ax, (pol, tt, mbit) in zip(axes[:, 0], panels):
        ax.plot(tt, mbit, linewidth=0.7)
        ax.set_title(f"{b.label}, {pol}, R {r}, delay {d}", fontsize=9)
        ax.set_ylabel("WAN Mbit/s")
        ax.set_ylim(0, top)
    axes[-1][0].set_xlabel("seconds since the run started (both directions, 10 ms averages)")
    fig.text(0.01, 0.005, f"2 clusters x {o.nodes} nodes, NIC {o.nic_rate}, WAN {o.wan_rate}",
             fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(os.path.join(o.out, "wan_traces.png"), dpi=110)


def plots(o, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("run.py: no matplotlib, no plots", file=sys.stderr)
        return
    foot = (f"2 clusters x {o.nodes} nodes, {o.ppn} rank(s) each, NIC {o.nic_rate}, "
            f"WAN {o.wan_rate}" + (f", WAN buffer {o.buffer}" if o.buffer else "")
            + f"; hollow: runs above {CPU_BOUND_PCT:.0f} % host CPU, not counted\n{o.cmd}")
    rl, dl = sorted(o.rl), sorted(o.dl, key=delay_ms)
    # one panel per NPB kernel; HPCC gives two: HPL and MPIFFT (the paper's
    # Figures 12 and 10)
    panels = []
    for b in o.benches:
        if b.name == "hpcc":
            panels.append((b, "HPCC HPL", "Mflop/s (HPL)", None))
            panels.append((b, "HPCC MPIFFT", "Gflop/s (MPIFFT)", "MPIFFT_Gflops"))
        else:
            panels.append((b, b.label, "Mop/s total", None))
    for kind, xs, fixed in (("delay", dl, ("routers", max(rl))),
                            ("routers", rl, ("delay", dl[0]))):
        fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2),
                                 squeeze=False)
        for ax, (b, title, ylabel, value) in zip(axes[0], panels):
            for pol in o.pols:
                ys, cpu_bound = [], []
                for x in xs:
                    key = {**of(b), "policy": pol, kind: x, fixed[0]: fixed[1]}
                    ys.append(hpcc_value(rows, value, **key) if value else median(rows, **key))
                    anyway = (hpcc_value(rows, value, verified, **key) if value
                              else median(rows, verified, **key))
                    cpu_bound.append(anyway if ys[-1] is None else None)
                xv = [delay_ms(x) for x in xs] if kind == "delay" else xs
                line, = ax.plot(xv, [y if y is not None else float("nan") for y in ys], "o-",
                                label=pol)
                # verified runs above the CPU limit: hollow, not joined
                ax.plot(xv, [y if y is not None else float("nan") for y in cpu_bound], "o",
                        mfc="none", color=line.get_color())
            ax.set_title(f"{title} ({fixed[0]} {fixed[1]})", fontsize=9)
            ax.set_xlabel("one-way delay, ms" if kind == "delay" else "routers per cluster")
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
        axes[0][0].legend(fontsize=7)
        fig.text(0.01, 0.005, foot, fontsize=6)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(os.path.join(o.out, f"npb_{kind}.png"), dpi=110)
    if o.variant:
        # Mop/s and the WAN's drops per policy and variant, at the most
        # routers and the first delay: the pacing experiment's figure
        fig, axes = plt.subplots(2, len(o.benches), figsize=(3.6 * len(o.benches), 5.0),
                                 squeeze=False)
        r, d = max(o.rl), o.dl[0]
        for k, b in enumerate(o.benches):
            mops = [median(rows, **of(b), policy=p, routers=r, delay=d) or 0 for p in o.pols]
            drops = [drops_of(rows, **of(b), policy=p, routers=r, delay=d) or 0 for p in o.pols]
            axes[0][k].bar(o.pols, mops, color="tab:blue")
            axes[0][k].set_title(f"{b.label} (R {r}, delay {d})", fontsize=9)
            axes[0][k].set_ylabel("Mop/s total")
            axes[1][k].bar(o.pols, drops, color="tab:red")
            axes[1][k].set_ylabel("frames dropped at the WAN")
            for ax in (axes[0][k], axes[1][k]):
                ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        fig.text(0.01, 0.005, foot + (f", WAN buffer {o.buffer}" if o.buffer else ""),
                 fontsize=6)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.savefig(os.path.join(o.out, "npb_variants.png"), dpi=110)
    if o.traces:
        trace_figure(o)


def summary(o, rows, cmd, took):
    lines = [f"command: {cmd}",
             "runs: those in npb.csv (--report ran none)" if o.report else
             f"runs took {took:.0f} s",
             f"regime: {o.regime}; {o.ppn} process(es) per node, "
             f"{2 * o.nodes * o.ppn} processes",
             f"testbed: icbc-testbed up --clusters 2 --nodes {o.nodes} --routers R --nic-rate "
             f"{o.nic_rate} --wan-rate {o.wan_rate} --delay D"
             + (f" --buffer {o.buffer}" if o.buffer else "")
             + (f" --nic-queue {o.nic_queue}" if o.nic_queue else ""),
             *[f"variant {v}" for v in o.variant],
             *([f"stock: MPICH from {o.stock_prefix} (ch4:ucx), UCX_TLS=tcp,self, "
                "UCX_NET_DEVICES=ext0, shared memory inside a node"]
               if any(o.policy_of[p] == "stock" for p in o.pols) else []),
             "", "Mop/s total (HPCC: HPL Mflop/s), median of reps; (ratio) = aggregate / policy;",
             f"[cpu N %]: the host's CPU use during the run (median); runs above "
             f"{CPU_BOUND_PCT:.0f} % are marked * and not counted (stock MPICH polls: counted)"]
    rl, dl = sorted(o.rl, reverse=True), sorted(o.dl, key=delay_ms)
    for b in o.benches:
        for r in rl:
            for d in dl:
                agg = median(rows, **of(b), policy="aggregate", routers=r, delay=d)
                cells = []
                for pol in o.pols:
                    point = matching(rows, **of(b), policy=pol, routers=r, delay=d)
                    m = median(point)
                    ratio = f" ({agg / m:.2f}x)" if agg and m and pol != "aggregate" else ""
                    drops, nic = drops_of(point), drops_of(point, "nic_drops")
                    dropped = ", ".join(([f"{drops:.0f} WAN drops"] if drops else [])
                                        + ([f"{nic:.0f} NIC drops"] if nic else []))
                    dropped = f" [{dropped}]" if dropped else ""
                    verified = [x for x in point if x["verified"] == "yes"]
                    cpu = [float(x["cpu_pct"]) for x in verified if x.get("cpu_pct")]
                    cpu = f" [cpu {statistics.median(cpu):.0f} %]" if cpu else ""
                    bound = [x for x in verified if not counted(x)]
                    if bound and not m:
                        m0 = statistics.median(float(x["mops"]) for x in bound)
                        cells.append(f"{pol} *{m0:.1f} (cpu-bound, not counted){cpu}")
                        continue
                    cells.append(f"{pol} {m:.1f}{ratio}{dropped}{cpu}" if m else
                                 f"{pol} {'FAILED' if point else 'not run'}")
                lines.append(f"{b.label} R={r} delay {d}: " + ", ".join(cells))
    for b in o.benches:
        if b.name == "hpcc":
            lines += hpcc_lines(o, rows, b, rl, dl)
    if len(dl) > 1:
        lines += ["", f"loss from {dl[0]} to {dl[-1]} (1 - Mop/s at {dl[-1]} / at {dl[0]})"]
        for b in o.benches:
            for r in rl:
                cells = []
                for pol in o.pols:
                    m0 = median(rows, **of(b), policy=pol, routers=r, delay=dl[0])
                    m1 = median(rows, **of(b), policy=pol, routers=r, delay=dl[-1])
                    cells.append(f"{pol} {100 * (1 - m1 / m0):.0f} %" if m0 and m1 else
                                 f"{pol} -")
                lines.append(f"{b.label} R={r}: " + ", ".join(cells))
    return lines


def main(argv):
    o = options(argv)
    if os.getuid() != 0 and not o.report:
        print("run.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    os.makedirs(o.out, exist_ok=True)
    os.makedirs(o.work, exist_ok=True)
    exes = {}
    kinds = [("", o.prefix)] if any(o.policy_of[p] != "stock" for p in o.pols) else []
    if any(o.policy_of[p] == "stock" for p in o.pols):
        if not os.access(os.path.join(o.stock_prefix, "bin", "mpiexec"), os.X_OK):
            print(f"run.py: no stock MPICH in {o.stock_prefix} (Debian: apt install mpich)",
                  file=sys.stderr)
            return 2
        kinds.append(("stock-", o.stock_prefix))
    for kind, prefix in ([] if o.report else kinds):
        for b in o.benches:
            try:
                exes[kind + b.label] = (
                    hpcc.build(prefix, os.path.join(o.work, "hpcc"))
                    if b.name == "hpcc" else npb.build(prefix, b.name, b.cls, o.work, o.npb))
            except (npb.NpbError, hpcc.HpccError) as e:
                print(f"run.py: {e}", file=sys.stderr)
                return 2
    o.matb_lib = os.path.join(o.work, "matb_preload.so")
    if any("{matb_lib}" in v for v in o.variant) and not o.report:
        r = subprocess.run([os.path.join(o.prefix, "bin", "mpicc"), "-O2", "-shared", "-fPIC",
                            "-o", o.matb_lib, os.path.join(HERE, "matb_preload.c")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"run.py: matb_preload.c does not build:\n{r.stderr}", file=sys.stderr)
            return 2
    rows = previous_rows(o)
    if rows:
        print(f"run.py: --resume keeps {len(rows)} runs of {os.path.join(o.out, 'npb.csv')}")
    t0 = time.time()
    cmd = "python3 benchmarks/apps/run.py " + " ".join(a for a in argv if a != "--report")
    o.cmd = cmd
    if not o.report:
        with open(os.path.join(o.out, "npb_runs.log"), "a" if rows else "w") as log:
            log.write(cmd + "\n")
            run_matrix(o, exes, rows, log)
        write_csv(o, rows)
    lines = summary(o, rows, cmd, time.time() - t0)
    with open(os.path.join(o.out, "npb_summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plots(o, rows)
    bad = [r for r in rows if r["verified"] != "yes"]
    print(f"{len(rows) - len(bad)} verified, {len(bad)} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
