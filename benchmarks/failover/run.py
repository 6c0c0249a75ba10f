#!/usr/bin/python3
"""Router failover measured: what router kills cost a stream, and a soak.

    python3 benchmarks/failover/run.py [--kills 24] [--policies aggregate,static]
        [--size 64Mi] [--count 90] [--small-count 1500000] [--soak SECONDS] [--asan]
        [--repeat N [--busy K]] [--prefix _install] [--out benchmarks/results/failover]

One testbed: two clusters of four nodes, all of them router nodes (icbc-testbed
up --clusters 2 --nodes 4 --routers 4 --nic-rate 1gbit --wan-rate 8gbit
--delay 1ms), icbc-router daemons started as docs/router.md says, jobs
started with the testbed's env file and mpiexec (MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER=0:
the daemons are the routers; MPIR_CVAR_CH4_ICBC_POLICY per run: one testbed
for every policy).

Kills (--kills K, default 24; 0 when --soak or --repeat is given alone):
per policy, test/mpi/failover_stream (rank 0 in cluster a, rank 1 in b, both ways, every byte, the order and duplicates checked) runs once
without kills and once while a router drawn at random is killed with
SIGKILL every 1-3 s and restarted 1.5 s later, until --kills kills; then
the same with 64-byte messages (ordered lane; --small-count 0: not). Row per
case in kills.csv (a case run again replaces its row, the others stay):
seconds with and without kills, the penalty per kill, the longest batch.

Soak (--soak S): failover_stream --vary (16 B .. 16 MiB) for S seconds
under aggregate while routers a1-a3 and b1-b3 are killed and restarted at
random (a0 and b0 stay up, their resident size sampled every 10 s into
soak_rss.csv); --asan runs the daemons built with AddressSanitizer and
LeakSanitizer (_build/asan/icbc-router), whose reports are searched in
their logs when they stop.

Repeat (--repeat N): N short streams (30 messages of --size, each with its own
seed) alternating over --policies, a router killed every 0.5-2 s and
restarted 1.5 s later, while K processes (--busy K, default 2) keep the CPUs
busy as a loaded host's neighbours do: a process that dies where a router
dies shows up here long before it does once in a test suite. A row per run
in repeat.csv (policy, seed, kills, seconds, delivered, and the line that
names the cause of a failure); the first failure ends the loop.

Exit status 0 when every run delivered everything (and the soak's routers
reported nothing), 1 otherwise.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "test", "harness"))

from mpirun import run_mpi, vm_kib  # noqa: E402
from routerkill import Killer, RouterDaemons  # noqa: E402
from testbed import Testbed, mpicc  # noqa: E402

ROUTERS = [f"{c}{i}" for c in "ab" for i in range(4)]
TESTBED = ["--clusters", "2", "--nodes", "4", "--routers", "4", "--nic-rate", "1gbit",
           "--wan-rate", "8gbit", "--delay", "1ms"]


def size_arg(text):
    m = re.fullmatch(r"([0-9]+)(Ki|Mi|Gi)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text}")
    return int(m.group(1)) << {None: 0, "Ki": 10, "Mi": 20, "Gi": 30}[m.group(2)]


def figures(r):
    return [(float(a), float(b)) for a, b in re.findall(
        r"in ([0-9.]+) s \([0-9.]+ MB/s\); longest batch of [0-9]+: ([0-9.]+) s", r.output)]


def stream(o, tb, exe, name, args, policy, timeout=900):
    env = {"MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER": "0", "MPIR_CVAR_CH4_ICBC_POLICY": policy}
    return run_mpi(o.prefix, tb.user_env(), exe, 2, tb.work, name=name, hosts=o.hosts,
                   extra_env=env, args=args, timeout=timeout)


def kills(o, tb, exe, daemons):
    rows, ok = [], True
    cases = [(p, o.size, o.count, 2) for p in o.policies]
    if o.small_count:
        cases.append(("aggregate", 64, o.small_count, 64))
    for policy, size, count, window in cases:
        args = ("--size", str(size), "--count", str(count), "--window", str(window))
        base = stream(o, tb, exe, f"base-{policy}-{size}", args, policy)
        killer = Killer(daemons, o.kills, seed=size + len(policy), nodes=ROUTERS)
        killer.start()
        try:
            r = stream(o, tb, exe, f"kills-{policy}-{size}", args, policy)
        finally:
            killer.stop_flag.set()
            killer.join()
        good = base.ok and r.ok
        ok &= good
        bs = max((s for s, _ in figures(base)), default=float("nan"))
        ks = max((s for s, _ in figures(r)), default=float("nan"))
        n = len(killer.done)
        rows.append({"policy": policy, "size": size, "count": count, "kills": n,
                     "secs_no_kills": f"{bs:.2f}", "secs_kills": f"{ks:.2f}",
                     "penalty_per_kill": f"{(ks - bs) / n:.3f}" if n else "",
                     "longest_batch": f"{max((l for _, l in figures(r)), default=0):.2f}",
                     "delivered": "yes" if good else "no",
                     "killed": " ".join(killer.done),
                     "why": "" if good else (r.describe() if not r.ok else base.describe())
                     .splitlines()[0]})
        print(f"{policy} {size} B x {count}: {n} kills, {ks:.1f} s (without {bs:.1f} s), "
              f"{'delivered' if good else 'FAILED'}", flush=True)
    # rows of cases not run this time stay (a case is its policy and size)
    path = os.path.join(o.out, "kills.csv")
    keep = []
    if os.path.exists(path):
        with open(path, newline="") as f:
            new = {(r["policy"], str(r["size"])) for r in rows}
            keep = [r for r in csv.DictReader(f) if (r["policy"], r["size"]) not in new]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep + rows)
    return ok


def repeat(o, tb, exe, daemons):
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(o.busy)]
    rows, ok = [], True
    try:
        for i in range(o.repeat):
            policy = o.policies[i % len(o.policies)]
            seed = 1000 + i
            killer = Killer(daemons, 10 ** 6, seed=seed, nodes=ROUTERS, start=1.0,
                            period=(0.5, 2.0))
            killer.start()
            try:
                r = stream(o, tb, exe, f"repeat-{i}", ("--size", str(o.size), "--count", "30",
                                                      "--window", "2"), policy, timeout=300)
            finally:
                killer.stop_flag.set()
                killer.join()
            cause = "" if r.ok else r.describe().splitlines()[1]
            rows.append({"run": i, "policy": policy, "seed": seed, "kills": len(killer.done),
                         "secs": f"{r.secs:.1f}", "delivered": "yes" if r.ok else "no",
                         "cause": cause})
            print(f"repeat {i}: {policy}, seed {seed}, {len(killer.done)} kills, "
                  f"{r.secs:.0f} s, {'delivered' if r.ok else 'FAILED: ' + cause}", flush=True)
            if not r.ok:
                ok = False
                break
    finally:
        for b in busy:
            b.kill()
            b.wait()
    with open(os.path.join(o.out, "repeat.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"repeat: {sum(r['delivered'] == 'yes' for r in rows)} of {len(rows)} runs delivered, "
          f"{sum(r['kills'] for r in rows)} kills", flush=True)
    return ok


def soak(o, tb, exe, daemons):
    args = ("--size", str(16 << 20), "--vary", "--seconds", str(o.soak), "--window", "4")
    samples = []
    killer = Killer(daemons, 10 ** 6, seed=42, nodes=[n for n in ROUTERS if n[1] != "0"],
                    period=(5.0, 15.0))
    stop = threading.Event()

    def sample():
        t0 = time.time()
        while not stop.wait(10):
            samples.append([f"{time.time() - t0:.0f}"] +
                           [vm_kib(daemons.pids[n], "VmRSS") for n in ("a0", "b0")])

    s = threading.Thread(target=sample)
    killer.start()
    s.start()
    try:
        r = stream(o, tb, exe, "soak", args, "aggregate", timeout=o.soak + 300)
    finally:
        killer.stop_flag.set()
        stop.set()
        killer.join()
        s.join()
    tb.stop_daemons()
    reports = []
    for node in ROUTERS:
        for path in [p for p in os.listdir(tb.work) if p.startswith(f"asan-{node}")]:
            with open(os.path.join(tb.work, path), errors="replace") as f:
                text = f.read()
            if "Sanitizer" in text:
                reports.append(f"{path}: {text.splitlines()[0] if text else ''}")
    with open(os.path.join(o.out, "soak_rss.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["secs", "a0_rss_kib", "b0_rss_kib"])
        w.writerows(samples)
    rss = [x for row in samples for x in row[1:] if x]
    ran = max((t for t, _ in figures(r)), default=0)
    full = ran >= 0.9 * o.soak
    print(f"soak: {o.soak} s, {len(killer.done)} kills and restarts, "
          f"{'delivered' if r.ok else 'FAILED: ' + r.describe()}; sanitizer reports: "
          f"{len(reports)}; a0/b0 RSS first {samples[0][1:] if samples else '-'} KiB, "
          f"last {samples[-1][1:] if samples else '-'} KiB", flush=True)
    for line in reports:
        print("  " + line)
    with open(os.path.join(o.out, "soak.txt"), "w") as f:
        f.write(" ".join(sys.argv) + "\n")
        f.write(f"{o.soak} s, {len(killer.done)} kills: {' '.join(killer.done)}\n")
        f.write(f"delivered: {r.ok}\nsanitizer reports: {len(reports)}\n" +
                "".join(x + "\n" for x in reports))
        f.write("\n".join(l for l in r.output.splitlines() if l.startswith("rank ")) + "\n")
    if not full:
        print(f"soak: the stream ran {ran:.0f} s of {o.soak}", flush=True)
    return r.ok and full and not reports and bool(rss)


def plot(out):
    """failover.png: seconds per case with and without kills; the soak's
    router sizes over time, when there was a soak."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("run.py: no matplotlib here (use /usr/bin/python3): no plot", file=sys.stderr)
        return
    rows, rss = [], []
    if os.path.exists(os.path.join(out, "kills.csv")):
        with open(os.path.join(out, "kills.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
    if os.path.exists(os.path.join(out, "soak_rss.csv")):
        with open(os.path.join(out, "soak_rss.csv"), newline="") as f:
            rss = [r for r in csv.DictReader(f) if r["a0_rss_kib"] and r["b0_rss_kib"]]
    fig, axes = plt.subplots(1, 2 if rss else 1, figsize=(11 if rss else 6, 4), squeeze=False)
    ax = axes[0][0]
    names = [f"{r['policy']}\n{int(r['size']) >> 20 or r['size']}{' MiB' if int(r['size']) >= 1 << 20 else ' B'}"
             for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [float(r["secs_no_kills"]) for r in rows], 0.4, label="no kills")
    ax.bar([i + 0.2 for i in x], [float(r["secs_kills"]) for r in rows], 0.4,
           label="routers killed and restarted")
    for i, r in zip(x, rows):
        ax.text(i + 0.2, float(r["secs_kills"]), f"{r['kills']} kills", ha="center",
                va="bottom", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names)
    ax.set_ylabel("seconds for the stream (both ranks)")
    ax.set_title("failover_stream, 2 clusters x 4 routers")
    ax.legend(fontsize=8)
    if rss:
        ax = axes[0][1]
        t = [float(r["secs"]) for r in rss]
        ax.plot(t, [int(r["a0_rss_kib"]) / 1024 for r in rss], label="router a0")
        ax.plot(t, [int(r["b0_rss_kib"]) / 1024 for r in rss], label="router b0")
        ax.set_xlabel("seconds into the soak")
        ax.set_ylabel("resident MiB")
        ax.set_ylim(bottom=0)
        ax.set_title("soak: routers never killed")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "failover.png"), dpi=110)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--policies", default="aggregate,static")
    ap.add_argument("--size", type=size_arg, default=64 << 20)
    ap.add_argument("--count", type=int, default=90)
    ap.add_argument("--small-count", type=int, default=1500000)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--out", default=os.path.join(TOP, "benchmarks", "results", "failover"))
    o = ap.parse_args(argv)
    o.policies = [p for p in o.policies.split(",") if p]
    if o.kills is None:  # 24 unless another mode was asked for
        o.kills = 0 if o.repeat or o.soak else 24
    if not o.kills and not o.soak and not o.repeat:
        raise SystemExit("run.py: nothing to do (--kills 0, no --soak, no --repeat)")
    o.prefix = os.path.abspath(o.prefix)
    os.makedirs(o.out, exist_ok=True)
    work = os.path.join(TOP, "_build", "bench-failover")
    tb = Testbed("fb", o.prefix, TESTBED, work)
    exe = os.path.join(work, "failover_stream")
    if not mpicc(o.prefix, os.path.join(TOP, "test", "mpi", "failover_stream.c"), exe,
                 exe + ".build.log"):
        raise SystemExit(f"failover_stream does not build (see {exe}.build.log)")
    binary = os.path.join(TOP, "_build", "asan", "icbc-router") if o.asan else None
    if binary and not os.access(binary, os.X_OK):
        raise SystemExit(f"--asan: {binary} is not built (./quickstart.sh test builds it)")
    tb.up()
    ok = True
    try:
        o.hosts = os.path.join(work, "hosts")
        with open(o.hosts, "w") as f:
            f.write("a0\nb0\n")
        daemons = RouterDaemons(tb, binary)
        for n in ROUTERS:
            daemons.start(n)
        if o.kills:
            ok &= kills(o, tb, exe, daemons)
        if o.soak:
            ok &= soak(o, tb, exe, daemons)
        if o.repeat:
            ok &= repeat(o, tb, exe, daemons)
    finally:
        tb.down()
    plot(o.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
