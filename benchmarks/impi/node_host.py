#!/usr/bin/env python3
"""IMPI latency between two ICBC clients on this host, for the processes that
run a node's IMPI host (the first of each node) and for the others, which
reach it over a local link; several builds side by side in one run.

    benchmarks/impi/node_host.py --prefix NAME=DIR [--prefix NAME=DIR ...]
                                 [--reps N] [--max SIZE] [--out DIR] [--replot]

Each client is one node of two processes (test/mpich/mpiexec_impi.py, no
testbed: both clients on 127.0.0.1, impi-server on 127.0.0.1); world ranks
0, 1 in client 0 and 2, 3 in client 1. icbc_latency (--stat median) runs
between 0 and 2 (the hosts' first processes: "first") and between 1 and 3
("other"), REPS times per build, interleaved. Writes node_host.csv (build,
pair, rep, size, latency_us, cpu_pct: the host's CPU use over the run, all
cores, /proc/stat), node_host.png (median over reps per size) and
node_host_summary.txt (the ratios to the first build, per pair). --replot:
the summary and figure again from OUT's node_host.csv, nothing run.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAIRS = (("first", "0,2"), ("other", "1,3"))


def cpu_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4]


def build(prefix, work):
    exe = os.path.join(work, "icbc_latency")
    subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exe,
                    os.path.join(REPO, "benchmarks", "src", "icbc_latency.c")], check=True)
    return exe


def run(prefix, exe, pair, maxsize):
    t0, i0 = cpu_ticks()
    r = subprocess.run([sys.executable, os.path.join(REPO, "test", "mpich", "mpiexec_impi.py"),
                        "--prefix", prefix, "-n", "4", exe, "--stat", "median", "--min", "1",
                        "--max", maxsize, "--iters", "2000", "--warmup", "200", "--pair", pair],
                       capture_output=True, text=True, timeout=600)
    t1, i1 = cpu_ticks()
    cpu = 100.0 * ((t1 - t0) - (i1 - i0)) / max(1, t1 - t0)
    if r.returncode != 0:
        raise SystemExit(f"icbc_latency --pair {pair} with {prefix} failed:\n{r.stdout}{r.stderr}")
    rows = [l.split(",") for l in r.stdout.splitlines() if l and l[0].isdigit() and "," in l]
    return [(int(s), float(v)) for s, v in rows], cpu


def measure(o, builds):
    work = os.path.join(REPO, "_build", "bench-node-host")
    exes = {}
    for name, prefix in builds:
        os.makedirs(os.path.join(work, name), exist_ok=True)
        exes[name] = build(prefix, os.path.join(work, name))
    rows = []
    for rep in range(1, o.reps + 1):
        for name, prefix in builds:
            for pname, pair in PAIRS:
                res, cpu = run(prefix, exes[name], pair, o.max)
                print(f"rep {rep} {name} {pname}: {len(res)} sizes, cpu {cpu:.0f} %", flush=True)
                rows += [(name, pname, rep, s, v, round(cpu)) for s, v in res]
    with open(os.path.join(o.out, "node_host.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["build", "pair", "rep", "size", "latency_us", "cpu_pct"])
        w.writerows(rows)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", action="append", required=True, help="NAME=DIR")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--max", default="64K")
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "impi-node-host",
                                                 "local"))
    p.add_argument("--replot", action="store_true")
    o = p.parse_args()
    builds = [tuple(x.split("=", 1)) for x in o.prefix]
    os.makedirs(o.out, exist_ok=True)
    if o.replot:
        with open(os.path.join(o.out, "node_host.csv")) as f:
            rows = [(r["build"], r["pair"], int(r["rep"]), int(r["size"]),
                     float(r["latency_us"]), int(r["cpu_pct"])) for r in csv.DictReader(f)]
    else:
        rows = measure(o, builds)
    med = {}
    for b, pn, _, s, v, _ in rows:
        med.setdefault((b, pn, s), []).append(v)
    med = {k: statistics.median(v) for k, v in med.items()}
    sizes = sorted({s for _, _, s in med})
    base = builds[0][0]
    lines = [f"command: {' '.join(sys.argv)}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
             f"cpu: {min(r[5] for r in rows)}..{max(r[5] for r in rows)} % of the host",
             "median over reps of icbc_latency's median (us); ratio = build / " + base]
    for pn, _ in PAIRS:
        lines.append(f"\n== pair {pn}")
        lines.append("    size  " + "  ".join(f"{b:>10}" for b, _ in builds) + "  " +
                     "  ".join(f"{b + '/' + base:>12}" for b, _ in builds[1:]))
        for s in sizes:
            vals = [med[(b, pn, s)] for b, _ in builds]
            lines.append(f"{s:8d}  " + "  ".join(f"{v:10.2f}" for v in vals) + "  " +
                         "  ".join(f"{v / vals[0]:12.3f}" for v in vals[1:]))
    text = "\n".join(lines) + "\n"
    open(os.path.join(o.out, "node_host_summary.txt"), "w").write(text)
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
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("latency (us, median)")
    ax.set_title("IMPI latency between two ICBC clients on one host")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.01, " ".join(sys.argv[1:])[:150], fontsize=6)
    fig.savefig(os.path.join(o.out, "node_host.png"), dpi=110)


if __name__ == "__main__":
    main()
