#!/usr/bin/python3
"""Two or more MPICH+icbc builds side by side on the inter-cluster benchmarks.

Runs benchmarks/routed/routed.py once per build and repetition, the builds
interleaved (rep 1: A B, rep 2: B A, ...) on one testbed brought up here
with the last build's icbc-testbed (or ICBC_TESTBED_BIN; every run uses it), each build with its own icbc-router daemons
and its own compiled benchmark programs; then compares every part, policy
and router count across the builds (benchmarks/common/compare.py), the
first build as the reference: ratio = build / first build.

Usage:
  builds.py --build old=PREFIX --build new=PREFIX [--reps N] [--out DIR]
            [--work DIR] [ROUTED OPTIONS ...]

  --build LABEL=PREFIX   an MPICH+icbc install (repeat; the first is the reference)
  --reps N               repetitions of each build (default 2)
  --out DIR              results (default benchmarks/results/routed-builds)
  --work DIR             binaries and logs (default <repo>/_build/bench-builds)
  ROUTED OPTIONS         passed to every routed.py run (e.g. --parts latency,bw,stripe
                         --policies "aggregate static tcp"); not --prefix, --router,
                         --reps, --out, --build, --testbed-name

Output (--out): builds_<part>_<policy>_R<r>.{csv,png} (per-size medians of each
build, ratios to the first), builds_summary.txt (command, machine, each run's host
CPU use before it and duration, the tables, and the CPU seconds of the jobs'
processes per GB of payload), runs/<label>-rep<k>/ (every routed.py output).
"""

import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "common"))
import engine  # noqa: E402

TESTBED = "rbuilds"
# routed.py's default testbed shape (its --help); other shapes are passed on.
SHAPE = {"--nodes": "4", "--routers": "4", "--nic-rate": "100mbit", "--wan-rate": "400mbit",
         "--delay": "2ms"}
# part: (value name, unit, lower is better)
PARTS = {"latency": ("latency", "us", True), "bw": ("bandwidth", "MB/s", False),
         "stripe": ("bandwidth", "MB/s", False), "mbw": ("bandwidth", "MB/s", False),
         "alltoall": ("time per call", "us", True)}
OWN = ("--prefix", "--router", "--reps", "--out", "--build", "--testbed-name")


def usage(msg=None):
    if msg:
        print(f"builds.py: {msg}", file=sys.stderr)
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    sys.exit(2)


def parse(argv):
    builds, reps, out, work, rest = [], 2, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        if a in ("--build", "--reps", "--out", "--work"):
            if i + 1 >= len(argv):
                usage(f"{a} needs a value")
            v = argv[i + 1]
            if a == "--build":
                label, eq, prefix = v.partition("=")
                if not eq or not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
                    usage(f"--build {v}: expected LABEL=PREFIX")
                if not os.path.isfile(os.path.join(prefix, "bin", "icbc-router")):
                    usage(f"--build {v}: {prefix}/bin/icbc-router not found")
                builds.append((label, os.path.abspath(prefix)))
            elif a == "--reps":
                if not v.isdigit() or int(v) < 1:
                    usage("--reps: a positive integer")
                reps = int(v)
            elif a == "--out":
                out = v
            else:
                work = v
            i += 2
            continue
        if a.split("=")[0] in OWN:
            usage(f"{a} is set per build here")
        rest.append(a)
        i += 1
    if len(builds) < 2:
        usage("give at least two --build")
    if len({lab for lab, _ in builds}) != len(builds):
        usage("build labels must differ")
    out = os.path.abspath(out or os.path.join(REPO, "benchmarks", "results", "routed-builds"))
    work = os.path.abspath(work or os.path.join(REPO, "_build", "bench-builds"))
    return builds, reps, out, work, rest


def testbed_args(rest):
    shape = dict(SHAPE)
    for i, a in enumerate(rest):
        if (a in shape or a in ("--tcp-cc", "--buffer", "--fabric-api")) and i + 1 < len(rest):
            shape[a] = rest[i + 1]
    args = ["--clusters", "2"]
    for k, v in shape.items():
        args += [k, v]
    return args


def run_routed(label, prefix, rep, out, work, rest, log):
    cmd = [sys.executable, os.path.join(HERE, "routed.py"), "--prefix", prefix,
           "--router", os.path.join(prefix, "bin", "icbc-router"), "--reps", "1",
           "--testbed-name", TESTBED, "--out", os.path.join(out, "runs", f"{label}-rep{rep}"),
           "--build", os.path.join(work, label)] + rest
    t0 = time.time()
    busy0 = engine.cpu_busy()
    with open(log, "a") as f:
        f.write(f"\n== {label} rep {rep}: {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    return rc, time.time() - t0, busy0


def raw_series(out, builds):
    """{(part, policy, R): {label: [raw CSV files]}} over every run."""
    found = {}
    for label, _ in builds:
        for path in sorted(glob.glob(os.path.join(out, "runs", f"{label}-rep*", "raw",
                                                  "routed_*_rep*.csv"))):
            m = re.fullmatch(r"routed_([a-z]+)_([a-z-]+)_R([0-9]+)_rep[0-9]+\.csv",
                             os.path.basename(path))
            if m and m.group(1) in PARTS:
                key = (m.group(1), m.group(2), int(m.group(3)))
                found.setdefault(key, {}).setdefault(label, []).append(path)
    return found


def cpu_table(out, builds):
    """CPU of the jobs' processes per payload byte sent, per part and
    policy, from each run's routed_traffic.csv (runs that were ok)."""
    acc = {}
    for label, _ in builds:
        for path in glob.glob(os.path.join(out, "runs", f"{label}-rep*", "routed_traffic.csv")):
            with open(path) as f:
                head = f.readline().rstrip("\n").split(",")
                if "job_cpu_s" not in head:
                    continue
                col = {h: i for i, h in enumerate(head)}
                for line in f:
                    c = line.rstrip("\n").split(",")
                    if c[col["status"]] != "ok" or not c[col["payload_sent"]]:
                        continue
                    key = (c[col["part"]], c[col["series"]], c[col["routers"]])
                    a = acc.setdefault(key, {}).setdefault(label, [0.0, 0])
                    a[0] += float(c[col["job_cpu_s"]])
                    a[1] += int(c[col["payload_sent"]])
    if not acc:
        return []
    ref = builds[0][0]
    lines = [f"== CPU seconds of the job's processes (mpiexec, ranks) per GB of payload sent; "
             f"ratio = build / {ref}",
             f"{'part':<10}{'policy':<11}{'R':>3}" +
             "".join(f"{lab + ' (s/GB)':>16}" for lab, _ in builds) + f"{'ratio':>9}"]
    for (part, pol, r), per in sorted(acc.items()):
        vals = [per[lab][0] / per[lab][1] * 1e9 if lab in per and per[lab][1] else None
                for lab, _ in builds]
        ratio = (f"{vals[-1] / vals[0]:9.3f}" if vals[0] and vals[-1] else f"{'-':>9}")
        lines.append(f"{part:<10}{pol:<11}{r:>3}" +
                     "".join(f"{v:16.2f}" if v is not None else f"{'-':>16}" for v in vals) +
                     ratio)
    return lines + [""]


def main(argv):
    builds, reps, out, work, rest = parse(argv)
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "runs.log")
    summary = [f"command: {engine.cmdline('benchmarks/routed/builds.py', argv)}",
               f"date: {engine.utc_now()}", f"machine: {engine.machine()}",
               "builds: " + ", ".join(f"{lab}={p}" for lab, p in builds),
               f"testbed: icbc-testbed up --name {TESTBED} {' '.join(testbed_args(rest))}",
               f"each run: routed.py --reps 1 {' '.join(rest)}", ""]
    # one testbed tool for every build's runs: the last build's (an older
    # build's may lack its options, e.g. --tcp-cc), or ICBC_TESTBED_BIN
    tool = os.environ.get("ICBC_TESTBED_BIN") or os.path.join(builds[-1][1], "bin",
                                                               "icbc-testbed")
    os.environ["ICBC_TESTBED_BIN"] = tool
    subprocess.call([tool, "down", "--name", TESTBED], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    up = subprocess.run([tool, "up", "--name", TESTBED] + testbed_args(rest),
                        capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stdout + up.stderr, file=sys.stderr)
        return 2
    failed = 0
    try:
        for rep in range(1, reps + 1):
            order = builds if rep % 2 else list(reversed(builds))
            for label, prefix in order:
                engine.note(f"{label} rep {rep} (log: {log})")
                rc, secs, busy = run_routed(label, prefix, rep, out, work, rest, log)
                summary.append(f"run {label} rep {rep}: exit {rc}, {secs:.0f} s, host CPU busy "
                               f"before it {busy:.0f}%")
                failed += rc != 0
    finally:
        subprocess.call([tool, "down", "--name", TESTBED], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    summary.append("")
    ref = builds[0][0]
    for (part, pol, r), series in sorted(raw_series(out, builds).items()):
        if len(series) < 2:
            summary.append(f"{part} {pol} R{r}: only {', '.join(series)} gave data")
            continue
        name, unit, lower = PARTS[part]
        base = os.path.join(out, f"builds_{part}_{pol}_R{r}")
        cmd = [sys.executable, os.path.join(REPO, "benchmarks", "common", "compare.py"),
               "--name", f"{part} {name}", "--kind", "lower" if lower else "higher",
               "--unit", unit, "--ref", ref, "--out", base + ".csv", "--png", base + ".png",
               "--title", f"{part}, policy {pol}, {r} router(s) per cluster: builds side by side",
               "--meta", f"command={engine.cmdline('benchmarks/routed/builds.py', argv)}"]
        for label, _ in builds:
            if label in series:
                cmd += ["--series", label] + series[label]
        res = subprocess.run(cmd, capture_output=True, text=True)
        summary.append(f"== {part}, policy {pol}, R={r} (ratio = build / {ref}; "
                       f"{'lower' if lower else 'higher'} is better)")
        summary.append(res.stdout.rstrip() or res.stderr.rstrip())
        summary.append("")
    summary += cpu_table(out, builds)
    with open(os.path.join(out, "builds_summary.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")
    print("\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
