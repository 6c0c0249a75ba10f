#!/usr/bin/python3
"""NPB kernels across two emulated clusters: every benchmark under every
policy, router count and WAN delay asked for, as a user runs them.

    python3 benchmarks/apps/run.py [--bench is,ft,cg,mg] [--class A]
        [--policies aggregate,static,alltoall] [--routers 1,2,4] [--delays 0ms,5ms,10ms]
        [--nodes 4] [--nic-rate 50mbit] [--wan-rate 400mbit] [--reps 1]
        [--prefix _install] [--npb DIR] [--out benchmarks/results/apps] [--timeout 600]
        [--variant LABEL=POLICY:VAR=VALUE[:VAR=VALUE...]]... [--buffer SIZE] [--traces]
        [--hpcc-n N]

For each router count and delay one testbed comes up (icbc-testbed up
--clusters 2 --nodes M --routers R ...); each run is the testbed's env file,
its router file with the policy line set as a user edits it, and our
mpiexec with one rank per node, cluster a's nodes first (ranks 0..M-1 in
a, M..2M-1 in b). A --variant is one more column beside the policies: runs
under POLICY with the variables given (e.g. a CVAR under study), labelled
LABEL in the table and the plots; the variables reach the ranks with
mpiexec -genv, as a user passes them. {matb_lib} in a value is the path of
matb_preload.so (built here with our mpicc): with LD_PRELOAD={matb_lib} and
ICBC_BENCH_MATB=BITS, the ranks set the ICBC_PACING_MATB attribute on
MPI_COMM_WORLD after MPI_Init, as an application that paces itself does. Every run must pass NPB's own verification; one that does
not, or dies, is a row with verified=no and the reason, never a number.

--bench hpcc runs HPCC 1.5.0 (benchmarks/apps/hpcc.py: Debian's source, our
mpicc, OpenBLAS) with HPL's N = --hpcc-n on the most square process grid, in
a directory of its own per run; its row's Mop/s is HPL's Mflop/s, its
seconds HPL's time, its other summary values (PTRANS, RandomAccess, FFT,
DGEMM, STREAM, ring and ping-pong) in hpcc_summary, and it has verified when
HPCC's summary says Success=1.

Each row has the frames the emulated WAN dropped during the run (wan.stats,
both directions; --buffer sets the WAN's buffer). --traces keeps the WAN's
1 ms trace of every run of the first rep, cut to the run, as
OUT/traces/NAME.csv with its plot (icbc-wanemu-plot, 10 ms averages).
With variants, npb_variants.png shows Mop/s and WAN drops per column.

Output (--out): npb.csv (one row per run: benchmark, class, policy, routers,
delay, processes, seconds, Mop/s, verified, the testbed's parameters), and
npb_delay.png (Mop/s against delay per policy, at the most routers) and
npb_routers.png (Mop/s against routers per policy, at the smallest delay),
one panel per benchmark; npb_summary.txt the table with the command. Exit
status 0 when every run verified, 1 otherwise, 2 on bad usage.
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

POLICIES = ("aggregate", "static", "alltoall", "tcp")
FIELDS = ["bench", "cls", "policy", "routers", "delay", "procs", "rep", "secs", "mops",
          "verified", "why", "nodes", "nic_rate", "wan_rate", "wan_buffer", "wan_drops",
          "hpcc_summary"]


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
    ap.add_argument("--bench", default="is,ft,cg,mg",
                    help="NPB kernels (is, ft, cg, mg, lu, ep, ...) and hpcc")
    ap.add_argument("--hpcc-n", type=int, default=3000, help="HPL's N for hpcc")
    ap.add_argument("--class", dest="cls", default="A")
    ap.add_argument("--policies", default="aggregate,static,alltoall")
    ap.add_argument("--routers", default="1,2,4")
    ap.add_argument("--delays", default="0ms,5ms,10ms")
    ap.add_argument("--nodes", type=int, default=4, help="nodes per cluster (one rank each)")
    ap.add_argument("--nic-rate", default="50mbit")
    ap.add_argument("--wan-rate", default="400mbit")
    ap.add_argument("--buffer", default="", help="the WAN's buffer (icbc-testbed --buffer)")
    ap.add_argument("--traces", action="store_true",
                    help="keep the WAN's 1 ms trace of each run of the first rep "
                         "(OUT/traces/NAME.csv and .png)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--npb", default=npb.DEFAULT_NPB)
    ap.add_argument("--out", default=os.path.join(TOP, "benchmarks", "results", "apps"))
    ap.add_argument("--work", default=os.path.join(TOP, "_build", "bench-apps"))
    ap.add_argument("--timeout", type=int, default=600, help="bound of one run, s")
    ap.add_argument("--testbed-name", default="apps")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=POLICY:VAR=VALUE[:VAR=VALUE...], one more column")
    o = ap.parse_args(argv)
    o.benches = split(o.bench, "--bench")
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
    """The time_s of the last row of the WAN's trace (seconds since the
    emulator started; rows are flushed every 100 ms)."""
    time.sleep(0.2)
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


def wan_drops(tb):
    """Frames the emulated WAN dropped so far, both directions (wan.stats,
    rewritten every 100 ms: read after it settles)."""
    time.sleep(0.3)
    total = 0
    try:
        with open(os.path.join(tb.state, "wan.stats")) as f:
            for line in f:
                if line.startswith("dir "):
                    for w in line.split():
                        if w.startswith("drops="):
                            total += int(w[6:])
    except OSError:
        pass
    return total


def delay_ms(text):
    for unit, mult in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * mult
    return float(text)


def run_matrix(o, exes, rows, log):
    np_ = 2 * o.nodes
    for r in o.rl:
        for d in o.dl:
            tb = Testbed(o.testbed_name, o.prefix,
                         ["--clusters", "2", "--nodes", str(o.nodes), "--routers", str(r),
                          "--nic-rate", o.nic_rate, "--wan-rate", o.wan_rate, "--delay", d]
                         + (["--buffer", o.buffer] if o.buffer else []),
                         os.path.join(o.work, f"R{r}-{d}"))
            tb.up()
            try:
                env = tb.user_env()
                hosts = os.path.join(tb.work, "hosts")
                with open(hosts, "w") as f:
                    f.write("".join(f"{c}{i}\n" for c in "ab" for i in range(o.nodes)))
                for rep in range(1, o.reps + 1):
                    for bench in o.benches:
                        for pol in (o.pols if rep % 2 else list(reversed(o.pols))):
                            tb.set_policy(o.policy_of[pol])
                            name = f"{bench}.{o.cls}-{pol}-R{r}-{d}-rep{rep}"
                            genv = [a for k, v in o.env_of[pol].items()
                                    for a in ("-genv", k, v.format(matb_lib=o.matb_lib))]
                            drops0 = wan_drops(tb)
                            t0 = trace_time(tb)
                            if bench == "hpcc":  # reads and writes files in its directory
                                rundir = os.path.join(tb.work, name)
                                os.makedirs(rundir, exist_ok=True)
                                hpcc.write_input(rundir, np_, o.hpcc_n)
                                out = os.path.join(rundir, "hpccoutf.txt")
                                if os.path.exists(out):
                                    os.remove(out)  # HPCC appends to it
                                genv += ["-wdir", rundir]
                            res = run_mpi(o.prefix, env, exes[bench], np_, tb.work, name=name,
                                          hosts=hosts, timeout=o.timeout, mpiexec_args=genv)
                            row = {"bench": bench.upper(), "cls": o.cls, "policy": pol,
                                   "routers": r, "delay": d, "procs": np_, "rep": rep,
                                   "nodes": o.nodes, "nic_rate": o.nic_rate,
                                   "wan_rate": o.wan_rate, "wan_buffer": o.buffer or "default",
                                   "wan_drops": wan_drops(tb) - drops0,
                                   "verified": "no", "why": ""}
                            if bench == "hpcc":
                                hpcc_row(row, rundir)
                            else:
                                npb_row(row, res.output)
                            if res.rc != 0 or res.timed_out:
                                row["verified"] = "no"
                                row["why"] = ("killed at the time limit" if res.timed_out else
                                              f"exit {res.rc}") + f" (log {res.log})"
                            if o.traces and rep == 1:
                                keep_trace(o, tb, name, t0, trace_time(tb))
                            rows.append(row)
                            line = (f"{name}: {row.get('mops', '-')} Mop/s, "
                                    f"{row.get('secs', '-')} s, verified {row['verified']}"
                                    + (f" ({row['why']})" if row["why"] else ""))
                            print(line, flush=True)
                            log.write(line + "\n")
            finally:
                tb.down()


def median(rows, **key):
    v = [float(x["mops"]) for x in rows if x["verified"] == "yes" and
         all(str(x[k]) == str(val) for k, val in key.items())]
    return statistics.median(v) if v else None


def plots(o, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("run.py: no matplotlib, no plots", file=sys.stderr)
        return
    foot = (f"2 clusters x {o.nodes} nodes, one rank each, NIC {o.nic_rate}, WAN {o.wan_rate}; "
            f"NPB 3.4 class {o.cls}")
    for kind, xs, fixed in (("delay", o.dl, ("routers", max(o.rl))),
                            ("routers", o.rl, ("delay", o.dl[0]))):
        fig, axes = plt.subplots(1, len(o.benches), figsize=(3.2 * len(o.benches), 3.2),
                                 squeeze=False)
        for ax, bench in zip(axes[0], o.benches):
            for pol in o.pols:
                ys = [median(rows, bench=bench.upper(), policy=pol, **{kind: x, fixed[0]: fixed[1]})
                      for x in xs]
                xv = [delay_ms(x) for x in xs] if kind == "delay" else xs
                ax.plot(xv, [y if y is not None else float("nan") for y in ys], "o-", label=pol)
            ax.set_title(f"{bench.upper()}.{o.cls} ({fixed[0]} {fixed[1]})", fontsize=9)
            ax.set_xlabel("one-way delay, ms" if kind == "delay" else "routers per cluster")
            ax.set_ylabel("Mop/s total")
            ax.set_ylim(bottom=0)
        axes[0][0].legend(fontsize=7)
        fig.text(0.01, 0.005, foot, fontsize=6)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.savefig(os.path.join(o.out, f"npb_{kind}.png"), dpi=110)
    if o.variant:
        # Mop/s and the WAN's drops per policy and variant, at the most
        # routers and the first delay: the pacing experiment's figure
        fig, axes = plt.subplots(2, len(o.benches), figsize=(3.6 * len(o.benches), 5.0),
                                 squeeze=False)
        r, d = max(o.rl), o.dl[0]
        for k, bench in enumerate(o.benches):
            sel = lambda pol: [x for x in rows if x["bench"] == bench.upper() and  # noqa: E731
                               x["policy"] == pol and x["routers"] == r and x["delay"] == d]
            mops = [median(rows, bench=bench.upper(), policy=p, routers=r, delay=d) or 0
                    for p in o.pols]
            drops = [statistics.median([int(x["wan_drops"]) for x in sel(p)] or [0])
                     for p in o.pols]
            axes[0][k].bar(o.pols, mops, color="tab:blue")
            axes[0][k].set_title(f"{bench.upper()}.{o.cls} (R {r}, delay {d})", fontsize=9)
            axes[0][k].set_ylabel("Mop/s total")
            axes[1][k].bar(o.pols, drops, color="tab:red")
            axes[1][k].set_ylabel("frames dropped at the WAN")
            for ax in (axes[0][k], axes[1][k]):
                ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        fig.text(0.01, 0.005, foot + (f", WAN buffer {o.buffer}" if o.buffer else ""),
                 fontsize=6)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.savefig(os.path.join(o.out, "npb_variants.png"), dpi=110)


def main(argv):
    o = options(argv)
    if os.getuid() != 0:
        print("run.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    os.makedirs(o.out, exist_ok=True)
    os.makedirs(o.work, exist_ok=True)
    exes = {}
    for bench in o.benches:
        try:
            exes[bench] = (hpcc.build(o.prefix, os.path.join(o.work, "hpcc")) if bench == "hpcc"
                           else npb.build(o.prefix, bench, o.cls, o.work, o.npb))
        except (npb.NpbError, hpcc.HpccError) as e:
            print(f"run.py: {e}", file=sys.stderr)
            return 2
    o.matb_lib = os.path.join(o.work, "matb_preload.so")
    if any("{matb_lib}" in v for v in o.variant):
        r = subprocess.run([os.path.join(o.prefix, "bin", "mpicc"), "-O2", "-shared", "-fPIC",
                            "-o", o.matb_lib, os.path.join(HERE, "matb_preload.c")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"run.py: matb_preload.c does not build:\n{r.stderr}", file=sys.stderr)
            return 2
    rows = []
    t0 = time.time()
    cmd = "python3 benchmarks/apps/run.py " + " ".join(argv)
    with open(os.path.join(o.out, "npb_runs.log"), "w") as log:
        log.write(cmd + "\n")
        run_matrix(o, exes, rows, log)
    with open(os.path.join(o.out, "npb.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})
    lines = [f"command: {cmd}", f"runs took {time.time() - t0:.0f} s",
             f"testbed: icbc-testbed up --clusters 2 --nodes {o.nodes} --routers R --nic-rate "
             f"{o.nic_rate} --wan-rate {o.wan_rate} --delay D"
             + (f" --buffer {o.buffer}" if o.buffer else ""),
             *[f"variant {v}" for v in o.variant],
             "", "Mop/s total (median of reps); ratio = aggregate / policy"]
    for bench in o.benches:
        for r in o.rl:
            for d in o.dl:
                agg = median(rows, bench=bench.upper(), policy="aggregate", routers=r, delay=d)
                cells = []
                for pol in o.pols:
                    m = median(rows, bench=bench.upper(), policy=pol, routers=r, delay=d)
                    ratio = f" ({agg / m:.2f}x)" if agg and m and pol != "aggregate" else ""
                    drops = [int(x["wan_drops"]) for x in rows if x["bench"] == bench.upper()
                             and x["policy"] == pol and x["routers"] == r and x["delay"] == d]
                    dropped = f" [{statistics.median(drops):.0f} WAN drops]" if any(drops) else ""
                    cells.append(f"{pol} {m:.1f}{ratio}{dropped}" if m else f"{pol} FAILED")
                lines.append(f"{bench.upper()}.{o.cls} R={r} delay {d}: " + ", ".join(cells))
    with open(os.path.join(o.out, "npb_summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plots(o, rows)
    bad = [r for r in rows if r["verified"] != "yes"]
    print(f"{len(rows) - len(bad)} verified, {len(bad)} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
