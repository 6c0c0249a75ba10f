#!/usr/bin/env python3
"""Routers bound (router-bind auto) against unbound, side by side in one run.

  benchmarks/bind/run.py [--prefix DIR] [--reps N] [--iters N] [--ppn N]
                         [--delay TIME] [--out DIR]

One testbed of two clusters of two nodes, one router each, embedded in the
first process of a0 and b0 (the aggregate-router paper's routers on compute
nodes). Each repetition runs, in turn, the unbound and the bound variant:
the testbed's router file as icbc-testbed writes it, and the same file with
"router-bind auto" in both clusters' sections (a copy, which the job finds
through ICBC_ROUTERFILE). Every node runs --ppn processes (default 2), so a
router shares its node with compute processes; the other ranks wait in a
barrier while the timed pair works, as ranks of an application do.

Measured per variant and repetition: icbc_latency between the first rank of
a0 and of b0 (cross-cluster, through both routers), 8 B, --iters round
trips (default 10,000), once with --stat median and once with --stat p99;
and the CPU seconds of the job's processes (their rusage). CSV and PNG go to
--out (default benchmarks/results/bind): bind.csv, bind.png, bind_summary.txt
with the bound ÷ unbound ratios. The placements the routers and processes
reported (ICBC_LOG_LEVEL=info, set to read them) are kept in placements.txt.
"""
import argparse
import csv
import os
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "test", "harness"))
from testbed import Report, Testbed, die, mpicc  # noqa: E402


def bound_routerfile(src, dst):
    text = open(src).read()
    text = re.sub(r"(?m)^cluster (\S+)$", r"cluster \1\n    router-bind auto", text)
    key = os.path.join(os.path.dirname(src), "routers.key")
    text = re.sub(r"(?m)^key .*$", f"key {key}", text)
    with open(dst, "w") as f:
        f.write(text)


def run_job(env, exe, np, ppn, args, log):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    with open(log, "w") as f:
        r = subprocess.run(["mpiexec", "-n", str(np), "-ppn", str(ppn), exe] + args, env=env,
                           stdout=subprocess.PIPE, stderr=f, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        die(f"{exe} failed (rc {r.returncode}, log {log})")
    rows = [l.split(",") for l in r.stdout.splitlines() if re.match(r"^[0-9]+,", l)]
    return float(rows[-1][1]), cpu, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10000)
    ap.add_argument("--ppn", type=int, default=2)
    ap.add_argument("--delay", default="0ms")
    ap.add_argument("--out", default=os.path.join(TOP, "benchmarks", "results", "bind"))
    o = ap.parse_args()
    if o.iters < 10000:
        die("--iters: at least 10,000 round trips, for a 99th percentile of 100 of them")
    prefix = os.path.abspath(o.prefix)
    work = os.path.join(TOP, "_build", "bench-bind")
    os.makedirs(o.out, exist_ok=True)
    exe = os.path.join(work, "icbc_latency")
    tb = Testbed("bind", prefix, ["--clusters", "2", "--nodes", "2", "--routers", "1",
                                  "--nic-rate", "1gbit", "--wan-rate", "2gbit", "--delay",
                                  o.delay], work)
    if not mpicc(prefix, os.path.join(TOP, "benchmarks", "src", "icbc_latency.c"), exe,
                 exe + ".build.log"):
        die(f"cannot build icbc_latency (see {exe}.build.log)")
    np = 4 * o.ppn
    pair = f"0,{2 * o.ppn}"  # the first rank of a0 and of b0
    rows = []
    rep_ = Report()
    with tb.running(rep_, False, "bind benchmark") as env:
        plain = env["ICBC_ROUTERFILE"]
        bound = os.path.join(work, "routers-bound.conf")
        bound_routerfile(plain, bound)
        variants = {"unbound": plain, "bound": bound}
        # where each variant's routers and processes run, as they say
        with open(os.path.join(o.out, "placements.txt"), "w") as f:
            for name, rf in variants.items():
                log = os.path.join(work, f"placement-{name}.log")
                run_job(dict(env, ICBC_ROUTERFILE=rf, ICBC_LOG_LEVEL="info"), exe, np, o.ppn,
                        ["--pair", pair, "--min", "8", "--max", "8", "--iters", "1000"], log)
                lines = [l.strip() for l in open(log)
                         if re.search(r"bound to CPU|not bound|runs on CPUs", l)
                         and "stats" not in l]
                f.write(f"== {name}\n" + "\n".join(sorted(set(lines))) + "\n")
        for rep in range(1, o.reps + 1):
            for name, rf in variants.items():
                for stat in ("median", "p99"):
                    log = os.path.join(work, f"{name}-{stat}-{rep}.log")
                    us, cpu, secs = run_job(
                        dict(env, ICBC_ROUTERFILE=rf), exe, np, o.ppn,
                        ["--pair", pair, "--min", "8", "--max", "8", "--iters", str(o.iters),
                         "--stat", stat], log)
                    rows.append(dict(variant=name, rep=rep, stat=stat, size=8,
                                     iters=o.iters, latency_us=us, job_cpu_s=round(cpu, 2),
                                     wall_s=round(secs, 2), ppn=o.ppn, delay=o.delay))
                    print(f"rep {rep} {name:8s} {stat:6s} {us:9.2f} us  (job CPU {cpu:.1f} s "
                          f"in {secs:.1f} s)", flush=True)
    with open(os.path.join(o.out, "bind.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    med = {(v, s): statistics.median(r["latency_us"] for r in rows
                                     if r["variant"] == v and r["stat"] == s)
           for v in variants for s in ("median", "p99")}
    cpu = {v: statistics.median(r["job_cpu_s"] for r in rows if r["variant"] == v)
           for v in variants}
    lines = [f"command: {' '.join(sys.argv)}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
             f"8 B cross-cluster ping-pong (half round trip), {o.iters} round trips per run, "
             f"{o.reps} reps, {np} processes ({o.ppn} per node), delay {o.delay}; "
             "median over reps:",
             f"{'':10s}{'unbound us':>12s}{'bound us':>12s}{'bound/unbound':>15s}"]
    for s in ("median", "p99"):
        a, b = med[("unbound", s)], med[("bound", s)]
        lines.append(f"{s:10s}{a:12.2f}{b:12.2f}{b / a:15.3f}")
    lines.append(f"job CPU s per run (median): unbound {cpu['unbound']:.1f}, "
                 f"bound {cpu['bound']:.1f}")
    text = "\n".join(lines) + "\n"
    open(os.path.join(o.out, "bind_summary.txt"), "w").write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, s in enumerate(("median", "p99")):
            for j, v in enumerate(variants):
                vals = [r["latency_us"] for r in rows if r["variant"] == v and r["stat"] == s]
                ax.bar(i * 3 + j, statistics.median(vals), color=("#999", "#36c")[j],
                       label=v if i == 0 else None)
                ax.plot([i * 3 + j] * len(vals), vals, "k.")
        ax.set_xticks([0.5, 3.5], ["median", "99th percentile"])
        ax.set_ylabel("8 B half round trip, us")
        ax.set_title("routers unbound vs bound (router-bind auto)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(o.out, "bind.png"), dpi=110)
    except ImportError:
        print("matplotlib missing: no bind.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
