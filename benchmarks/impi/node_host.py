#!/usr/bin/env python3
"""IMPI latency or bandwidth between two ICBC clients on this host, for the
processes that run a node's IMPI host (the first of each node) and for the
others, which reach it over a local link; several builds side by side in
one run.

    benchmarks/impi/node_host.py --prefix NAME=DIR [--prefix NAME=DIR ...]
                                 [--what latency|bw] [--reps N] [--max SIZE]
                                 [--out DIR] [--replot]

Each client is one node of two processes (test/mpich/mpiexec_impi.py, no
testbed: both clients on 127.0.0.1, impi-server on 127.0.0.1); world ranks
0, 1 in client 0 and 2, 3 in client 1. The program runs between 0 and 2
("first") and between 1 and 3 ("other"), REPS times per build, builds
interleaved (A B, then B A, ...). (Between ICBC clients every process is an
IMPI host of its own (C_ICBC_HOSTS, commit 8909404 on): both pairs then run
their own agent; a build whose node is one host shows the local link in
"other".)

  latency  icbc_latency --stat median --min 1 --max MAX (default 64K)
  bw       icbc_bw --stat median --min 64K --max MAX (default 8M) --window 8;
           over loopback the transfer is bound by the CPU, so the user-space
           copies of a build show in its MB/s and in its CPU seconds per GB
           (the job's processes, mpiexec and the ranks, from getrusage of the
           children, divided by the payload icbc_bw says it sent)

Writes node_host[_bw].csv (build, pair, rep, size, value, cpu_pct: the host's
CPU use over the run, all cores, /proc/stat; bw also cpu_s_per_gb),
node_host[_bw].png (median over reps per size) and node_host[_bw]_summary.txt
(the ratios to the first build, per pair). --replot: the summary and figure
again from OUT's CSV, nothing run.
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "common"))

from engine import CpuMeter  # noqa: E402

PAIRS = (("first", "0,2"), ("other", "1,3"))
WHAT = {  # program, its options, default --max, unit, what the value is, higher is better
    "latency": ("icbc_latency", ["--min", "1", "--iters", "2000", "--warmup", "200"], "64K",
                "us", "latency (us, median)", False),
    "bw": ("icbc_bw", ["--min", "64K", "--window", "8", "--iters", "20", "--warmup", "2",
                       "--min-iters", "5"], "8M", "MB/s", "bandwidth (MB/s, median)", True),
}


def build(prefix, work, prog):
    exe = os.path.join(work, prog)
    subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exe,
                    os.path.join(REPO, "benchmarks", "src", prog + ".c")], check=True)
    return exe


def run(prefix, exe, pair, o):
    prog, args = WHAT[o.what][0], WHAT[o.what][1]
    meter = CpuMeter()
    r = subprocess.run([sys.executable, os.path.join(REPO, "test", "mpich", "mpiexec_impi.py"),
                        "--prefix", prefix, "-n", "4", exe, "--stat", "median"] + args +
                       ["--max", o.max, "--pair", pair],
                       capture_output=True, text=True, timeout=600)
    cpu, cpu_s = meter.stop()
    if r.returncode != 0:
        raise SystemExit(f"{prog} --pair {pair} with {prefix} failed:\n{r.stdout}{r.stderr}")
    rows = [l.split(",") for l in r.stdout.splitlines() if l and l[0].isdigit() and "," in l]
    m = re.search(r"payload bytes sent by all ranks: ([0-9]+)", r.stdout + r.stderr)
    per_gb = cpu_s / (int(m.group(1)) / 1e9) if m and int(m.group(1)) else float("nan")
    return [(int(s), float(v)) for s, v in rows], cpu, per_gb


def measure(o, builds, csv_path):
    prog = WHAT[o.what][0]
    work = os.path.join(REPO, "_build", "bench-node-host")
    exes = {}
    for name, prefix in builds:
        os.makedirs(os.path.join(work, name), exist_ok=True)
        exes[name] = build(prefix, os.path.join(work, name), prog)
    rows = []
    for rep in range(1, o.reps + 1):
        order = builds if rep % 2 else builds[::-1]
        for name, prefix in order:
            for pname, pair in PAIRS:
                res, cpu, per_gb = run(prefix, exes[name], pair, o)
                print(f"rep {rep} {name} {pname}: {len(res)} sizes, host cpu {cpu:.0f} %, "
                      f"{per_gb:.2f} CPU s per GB", flush=True)
                rows += [(name, pname, rep, s, v, round(cpu), round(per_gb, 3)) for s, v in res]
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["build", "pair", "rep", "size", "value", "cpu_pct", "cpu_s_per_gb"])
        w.writerows(rows)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", action="append", required=True, help="NAME=DIR")
    p.add_argument("--what", choices=sorted(WHAT), default="latency")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--max", default="")
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "impi-node-host",
                                                 "local"))
    p.add_argument("--replot", action="store_true")
    o = p.parse_args()
    o.max = o.max or WHAT[o.what][2]
    _, _, _, unit, ylabel, higher = WHAT[o.what]
    builds = [tuple(x.split("=", 1)) for x in o.prefix]
    os.makedirs(o.out, exist_ok=True)
    stem = "node_host" if o.what == "latency" else "node_host_" + o.what
    csv_path = os.path.join(o.out, stem + ".csv")
    if o.replot:
        with open(csv_path) as f:
            rows = [(r["build"], r["pair"], int(r["rep"]), int(r["size"]),
                     float(r.get("value") or r["latency_us"]), int(r["cpu_pct"]),
                     float(r.get("cpu_s_per_gb") or "nan")) for r in csv.DictReader(f)]
    else:
        rows = measure(o, builds, csv_path)
    med, per_gb = {}, {}
    for b, pn, rep, s, v, _, g in rows:
        med.setdefault((b, pn, s), []).append(v)
        per_gb[(b, pn, rep)] = g
    med = {k: statistics.median(v) for k, v in med.items()}
    sizes = sorted({s for _, _, s in med})
    base = builds[0][0]
    lines = [f"command: {' '.join(sys.argv)}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
             f"cpu: {min(r[5] for r in rows)}..{max(r[5] for r in rows)} % of the host",
             f"median over reps of {WHAT[o.what][0]}'s median ({unit}); ratio = build / {base}"
             f" ({'higher' if higher else 'lower'} is better)"]
    for pn, _ in PAIRS:
        lines.append(f"\n== pair {pn}")
        lines.append("    size  " + "  ".join(f"{b:>10}" for b, _ in builds) + "  " +
                     "  ".join(f"{b + '/' + base:>12}" for b, _ in builds[1:]))
        for s in sizes:
            vals = [med[(b, pn, s)] for b, _ in builds]
            lines.append(f"{s:8d}  " + "  ".join(f"{v:10.2f}" for v in vals) + "  " +
                         "  ".join(f"{v / vals[0]:12.3f}" for v in vals[1:]))
        if o.what != "latency":
            g = [statistics.median(v for (b2, p2, _), v in per_gb.items() if b2 == b and p2 == pn)
                 for b, _ in builds]
            lines.append("  CPU s per GB of payload (the job's processes; median over reps): " +
                         ", ".join(f"{b} {v:.2f}" for (b, _), v in zip(builds, g)) +
                         "".join(f"; {b}/{base} {v / g[0]:.3f}" for (b, _), v in
                                 zip(builds[1:], g[1:])))
    text = "\n".join(lines) + "\n"
    open(os.path.join(o.out, stem + "_summary.txt"), "w").write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no PNG", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for b, _ in builds:
        for pn, _ in PAIRS:
            ax.plot(sizes, [med[(b, pn, s)] for s in sizes], marker="o",
                    linestyle="-" if pn == "first" else "--", label=f"{b}, {pn} processes")
    ax.set_xscale("log", base=2)
    if o.what == "latency":
        ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"IMPI {o.what} between two ICBC clients on one host")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.01, " ".join(sys.argv[1:])[:150], fontsize=6)
    fig.savefig(os.path.join(o.out, stem + ".png"), dpi=110)


if __name__ == "__main__":
    main()
