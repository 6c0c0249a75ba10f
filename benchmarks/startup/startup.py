#!/usr/bin/python3
"""How long a job takes to start and end: the shortest whole MPI job, timed
from mpiexec to its exit, several builds side by side in one run.

    benchmarks/startup/startup.py --build NAME=PREFIX[:ENV=V,...] [--build ...]
                                  [--reps N] [--layouts "2x1 8x4"] [--out DIR]
                                  [--replot]

A one-cluster testbed of two nodes (icbc-testbed up --name sup --clusters 1
--nodes 2), started as docs/testbed.md tells a user; each job is `mpiexec
-n N -ppn K icbc_startup` after ". env" (benchmarks/src/icbc_startup.c:
MPI_Init, one MPI_Barrier, MPI_Finalize), N x K for each layout of
--layouts, the builds taking turns rep by rep so that the host's load falls
on all of them alike. A build is an ICBC install or any other MPICH (stock
Debian MPICH is PREFIX /usr); ENV=V after the colon is that build's own
environment (such as MPIR_CVAR_CH4_ICBC_FABRIC_API=ofi). Stock builds get
UCX_NET_DEVICES=fab0 and UCX_TLS=tcp,sm,self (their inter-node traffic
crosses the namespaces' network; without sm stock MPICH 4.0.2 hangs in
MPI_Finalize, docs/testsuite.md), ICBC builds nothing: the router file says
what a user's job does.

Writes startup.csv (build, layout, rep, seconds, cpu_seconds: the CPU time
of mpiexec and everything it started, host_cpu_pct: the host's CPU use
during the job, all cores), startup_summary.txt (the median, min and max
per build and layout, and each build's median over the first build's) and
startup.png into OUT (default benchmarks/results/startup). --replot: the
summary and figure again from OUT's startup.csv, nothing run.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "harness"))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "common"))

from benchcsv import write_rows  # noqa: E402
from engine import CpuMeter, Install, UsageError  # noqa: E402
from plots import grouped_bars, pyplot  # noqa: E402
from testbed import Testbed  # noqa: E402

FIELDS = ["build", "layout", "rep", "seconds", "cpu_seconds", "host_cpu_pct"]


def parse_build(text):
    """NAME=PREFIX[:K=V,...] -> (name, prefix, {K: V})."""
    name, _, rest = text.partition("=")
    prefix, _, extra = rest.partition(":")
    if not name or not prefix:
        raise UsageError(f"--build {text}: want NAME=PREFIX[:K=V,...]")
    env = {}
    for kv in filter(None, extra.split(",")):
        k, _, v = kv.partition("=")
        if not k or not _:
            raise UsageError(f"--build {text}: '{kv}' is not K=V")
        env[k] = v
    return name, prefix, env


def parse_layouts(text):
    out = []
    for item in text.split():
        n, _, k = item.partition("x")
        if not (n.isdigit() and k.isdigit() and int(n) >= 1 and int(k) >= 1):
            raise UsageError(f"--layouts: '{item}' is not NxK (N processes, K per node)")
        out.append((int(n), int(k)))
    return out


def measure(o):
    work = os.path.join(REPO, "_build", "bench-startup")
    os.makedirs(work, exist_ok=True)
    builds = []
    for name, prefix, env in o.builds:
        inst = Install.find(prefix, what=f"--build {name}")
        exe = inst.compile(f"icbc_startup-{name}",
                           os.path.join(REPO, "benchmarks", "src", "icbc_startup.c"), work, work)
        if inst.kind == "stock":
            # with sm: stock MPICH 4.0.2 over UCX's tcp,self alone hangs in
            # MPI_Finalize (docs/testsuite.md, STOCK ON THE NAMESPACE NETWORK)
            env = {**dict(inst.transport_env("fab0")), "UCX_TLS": "tcp,sm,self", **env}
        builds.append((name, inst, exe, env))
    layouts = o.layout_list
    icbc = next((b[1] for b in builds if b[1].kind == "icbc"), None)
    tb = Testbed("sup", icbc.prefix if icbc else builds[0][1].prefix,
                 ["--clusters", "1", "--nodes", "2"], os.path.join(work, "testbed"))
    rows = []
    tb.up()
    try:
        user = tb.user_env()
        for n, k in layouts:
            layout = f"{n}x{k}"
            for rep in range(o.reps + 1):  # rep 0: a warm-up, not recorded
                for name, inst, exe, env in builds:
                    argv = [inst.mpiexec, "-n", str(n), "-ppn", str(k), exe]
                    meter, w0 = CpuMeter(), time.monotonic()
                    try:
                        r = subprocess.run(argv, env={**user, **env}, capture_output=True,
                                           text=True, timeout=60)
                    except subprocess.TimeoutExpired:
                        raise SystemExit(f"{name} {layout}: {' '.join(argv)} did not end "
                                         "within 60 s")
                    secs = time.monotonic() - w0
                    host, cpu = meter.stop()
                    if r.returncode != 0 or f"started {n} processes" not in r.stdout:
                        raise SystemExit(f"{name} {layout}: {' '.join(argv)} failed "
                                         f"(exit {r.returncode})\n{r.stdout}{r.stderr}")
                    if rep == 0:
                        continue
                    rows.append(dict(zip(FIELDS, [name, layout, rep, f"{secs:.4f}",
                                                  f"{cpu:.4f}", f"{host:.0f}"])))
                    print(f"{name:12} {layout:5} rep {rep:2}: {secs:.3f} s "
                          f"(cpu {cpu:.3f} s, host {host:.0f} %)", flush=True)
    finally:
        tb.down()
    write_rows(os.path.join(o.out, "startup.csv"), FIELDS, rows)
    return rows


def report(o, rows):
    builds = list(dict.fromkeys(r["build"] for r in rows))
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    secs = {(b, l): [float(r["seconds"]) for r in rows if r["build"] == b and r["layout"] == l]
            for b in builds for l in layouts}
    cpu = {(b, l): [float(r["cpu_seconds"]) for r in rows
                    if r["build"] == b and r["layout"] == l] for b in builds for l in layouts}
    lines = [f"job start to end (mpiexec to exit), seconds: median [min, max] over "
             f"{len(secs[builds[0], layouts[0]])} runs; CPU seconds of the job (median); "
             f"ratio: median over {builds[0]}'s",
             f"{'build':14} {'layout':7} {'median':>8} {'min':>8} {'max':>8} {'cpu':>7} "
             f"{'ratio':>6}"]
    for l in layouts:
        base = statistics.median(secs[builds[0], l])
        for b in builds:
            v = secs[b, l]
            m = statistics.median(v)
            lines.append(f"{b:14} {l:7} {m:8.3f} {min(v):8.3f} {max(v):8.3f} "
                         f"{statistics.median(cpu[b, l]):7.3f} {m / base:6.2f}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(o.out, "startup_summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    plt = pyplot("startup.png")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    med = {b: [statistics.median(secs[b, l]) for l in layouts] for b in builds}
    grouped_bars(ax, [f"{l.split('x')[0]} processes, {l.split('x')[1]} per node" for l in layouts],
                 med, {b: [[m - min(secs[b, l]) for m, l in zip(med[b], layouts)],
                           [max(secs[b, l]) - m for m, l in zip(med[b], layouts)]]
                       for b in builds})
    ax.set_ylabel("seconds, mpiexec to exit (median, min-max)")
    ax.set_title("The shortest MPI job (Init, Barrier, Finalize) on two nodes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(o.out, "startup.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", default=[], metavar="NAME=PREFIX[:K=V,...]",
                    help="a build to time (repeatable; the first is the ratios' base)")
    ap.add_argument("--reps", type=int, default=10, help="runs per build and layout")
    ap.add_argument("--layouts", default="2x1 8x4",
                    help="NxK: N processes, K per node (space-separated)")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "startup"))
    ap.add_argument("--replot", action="store_true")
    o = ap.parse_args()
    os.makedirs(o.out, exist_ok=True)
    try:
        if o.replot:
            with open(os.path.join(o.out, "startup.csv")) as f:
                rows = list(csv.DictReader(f))
        else:
            if not o.build:
                ap.error("--build NAME=PREFIX at least once")
            if o.reps < 1:
                ap.error("--reps wants at least 1")
            o.builds = [parse_build(b) for b in o.build]
            if len({b[0] for b in o.builds}) != len(o.builds):
                ap.error("build names must differ")
            o.layout_list = parse_layouts(o.layouts)
            rows = measure(o)
    except UsageError as e:
        ap.error(str(e))
    report(o, rows)


if __name__ == "__main__":
    main()
