#!/usr/bin/python3
"""Heap allocations per message in steady state across two emulated clusters,
several builds side by side in one run.

    benchmarks/alloc/allocs.py --prefix NAME=DIR [--prefix NAME=DIR ...]
                               [--policies "aggregate static tcp"] [--out DIR]
                               [--replot]

A two-cluster testbed (icbc-testbed up --name alc --clusters 2 --nodes 3
--routers 2, 1 Gbit/s NICs, 2 Gbit/s WAN, no delay) with icbc-router daemons
on a0, a1, b0, b1, started as docs/router.md tells a user, from each build in
turn; the router file's policy set as a user edits it (policy "impi": no
routers, the two processes two ICBC clients of an IMPI job, every message an
IMPI packet on the host connection). Between a2 and b2,
test icbc_allocs (benchmarks/src/icbc_allocs.c) ping-pongs 64 B, 64 KiB and
8 MiB messages (8 MiB: 32 chunks of the default 256 KiB, striped over both
routers under aggregate) with malloc_count.so (benchmarks/alloc/malloc_count.c)
preloaded, which counts every heap allocation of the two processes, all
threads; the counts are read around the measured round trips only, after a
warm-up. The benchmark's own variable: LD_PRELOAD, the counter.

Writes allocs.csv (build, policy, size, iters, allocs_rank0, allocs_rank1,
allocs_per_message, allocs_per_chunk, cpu_pct: the host's CPU use over the
run, all cores), allocs.png and allocs_summary.txt into OUT (default
benchmarks/results/alloc). --replot: the summary and figure again from
OUT's allocs.csv, nothing run.
"""
import argparse
import csv
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "harness"))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "common"))

from benchcsv import write_rows  # noqa: E402
from engine import CpuMeter  # noqa: E402
from mpirun import run_mpi  # noqa: E402
from plots import grouped_bars, pyplot  # noqa: E402
from testbed import Testbed  # noqa: E402

SIZES = ((64, 2000, 200), (65536, 500, 50), (8 << 20, 20, 5))  # size, iters, warm-up
CHUNK = 256 << 10  # MPIR_CVAR_CH4_ICBC_CHUNK_SIZE's default
TESTBED = ["--clusters", "2", "--nodes", "3", "--routers", "2", "--nic-rate", "1gbit",
           "--wan-rate", "2gbit", "--delay", "0ms"]
FIELDS = ["build", "policy", "size", "iters", "allocs_rank0", "allocs_rank1",
          "allocs_per_message", "allocs_per_chunk", "cpu_pct"]


def chunks(policy, size):
    """Chunks of a message of SIZE: striped under aggregate and static (and
    tcp) above the stripe threshold, which 64 KiB does not reach."""
    return (size + CHUNK - 1) // CHUNK if size > 65536 and policy != "impi" else 0


def run_impi(prefix, env, exe, shim, work, name, args):
    """The two processes as two ICBC clients of an IMPI job (a2 and b2,
    through impi-server on a2's WAN address: test/mpich/mpiexec_impi.py),
    the counter preloaded into the ranks only (-genv)."""
    log = os.path.join(work, name + ".log")
    argv = [sys.executable, os.path.join(REPO, "test", "mpich", "mpiexec_impi.py"), "--prefix",
            prefix, "--hosts", "a2;b2", "-n", "2", "-genv", "LD_PRELOAD", shim, exe] + args
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    with open(log, "w") as f:
        f.write(" ".join(argv) + "\n" + r.stdout + r.stderr)
    return r.returncode, r.stdout + r.stderr, log


def measure(o, builds):
    work = os.path.join(REPO, "_build", "bench-alloc")
    os.makedirs(work, exist_ok=True)
    shim = os.path.join(work, "malloc_count.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim,
                    os.path.join(REPO, "benchmarks", "alloc", "malloc_count.c")], check=True)
    exes = {}
    for name, prefix in builds:
        exes[name] = os.path.join(work, f"icbc_allocs-{name}")
        subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-o", exes[name],
                        os.path.join(REPO, "benchmarks", "src", "icbc_allocs.c")], check=True)
    tb = Testbed("alc", builds[0][1], TESTBED, os.path.join(work, "testbed"))
    rows = []
    tb.up()
    try:
        env = tb.user_env()
        hosts = os.path.join(work, "hosts")
        with open(hosts, "w") as f:
            f.write("a2\nb2\n")
        for policy in o.policies.split():
            if policy != "impi":
                tb.set_policy(policy)
            for name, prefix in builds:
                if policy != "impi":
                    for node in ("a0", "a1", "b0", "b1"):
                        tb.start_router(node, exe=os.path.join(prefix, "bin", "icbc-router"))
                    time.sleep(1)
                for size, iters, warm in SIZES:
                    meter = CpuMeter()
                    args = ["--size", str(size), "--iters", str(iters), "--warmup", str(warm)]
                    if policy == "impi":
                        rc, output, log = run_impi(prefix, env, exes[name], shim, work,
                                                   f"{name}-{policy}-{size}", args)
                    else:
                        r = run_mpi(prefix, env, exes[name], 2, work, hosts=hosts,
                                    name=f"{name}-{policy}-{size}",
                                    extra_env={"LD_PRELOAD": shim}, args=args, timeout=300)
                        rc, output, log = r.rc, r.output, r.log
                    cpu = meter.stop()[0]
                    line = [l for l in output.splitlines() if l.startswith(f"{size},")]
                    if rc != 0 or not line:
                        raise SystemExit(f"{name} {policy} {size}: failed (see {log})\n"
                                         f"{output[-2000:]}")
                    _, it, a0, a1, per = line[0].split(",")
                    n = chunks(policy, size)
                    per_chunk = (int(a0) + int(a1)) / (2 * int(it) * n) if n else ""
                    rows.append(dict(zip(FIELDS, [name, policy, size, it, a0, a1, per,
                                                  per_chunk, f"{cpu:.0f}"])))
                    print(f"{name:8} {policy:9} {size:>8} B: {float(per):8.2f} allocations "
                          f"per message (cpu {cpu:.0f} %)", flush=True)
                if policy != "impi":
                    tb.stop_daemons()
    finally:
        tb.down()
    write_rows(os.path.join(o.out, "allocs.csv"), FIELDS, rows)
    return rows


def report(o, rows):
    builds = list(dict.fromkeys(r["build"] for r in rows))
    keys = list(dict.fromkeys((r["policy"], int(r["size"])) for r in rows))
    val = {(r["build"], r["policy"], int(r["size"])): float(r["allocs_per_message"])
           for r in rows}
    lines = ["allocations per message (both processes), steady state; per chunk in brackets",
             f"{'policy':10} {'size':>9} " + " ".join(f"{b:>16}" for b in builds)]
    for p, s in keys:
        cells = []
        for b in builds:
            v = val.get((b, p, s))
            n = chunks(p, s)
            cells.append(f"{v:8.2f}" + (f" ({v / n:5.2f})" if n and v is not None else " " * 8))
        lines.append(f"{p:10} {s:>9} " + " ".join(f"{c:>16}" for c in cells))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(o.out, "allocs_summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    plt = pyplot("allocs.png")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    grouped_bars(ax, [f"{p}\n{s if s < 1024 else str(s >> 10) + ' KiB'}" for p, s in keys],
                 {b: [val.get((b, p, s), 0) for p, s in keys] for b in builds})
    ax.set_ylabel("heap allocations per message")
    ax.set_title("Allocations per message across two clusters, steady state")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(o.out, "allocs.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--policies", default="aggregate static tcp")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "alloc"))
    ap.add_argument("--replot", action="store_true")
    o = ap.parse_args()
    os.makedirs(o.out, exist_ok=True)
    if o.replot:
        with open(os.path.join(o.out, "allocs.csv")) as f:
            rows = list(csv.DictReader(f))
    else:
        builds = [tuple(p.split("=", 1)) for p in o.prefix]
        if not builds or any(len(b) != 2 for b in builds):
            ap.error("--prefix NAME=DIR at least once")
        rows = measure(o, builds)
    report(o, rows)


if __name__ == "__main__":
    main()
