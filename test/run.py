#!/usr/bin/env python3
"""The test command, in tiers (docs/testsuite.md, TIERS).

    python3 test/run.py [--tier default|full] [--slice K] [--slice-of COMMIT]
                        [--only NAME,...] [--list] [--prefix DIR] [--build DIR]
                        [--npb DIR] [--logs DIR]

default   what protects a user, in about 23 minutes on 2 cores: format, unit
          tests (normal and ASan+UBSan), fuzz smoke, benchmark tools,
          testbed, one cluster,
          first contact, trust boundary, the two-cluster quick set under
          every policy (half of MPICH's CI subset for two clusters through
          the routers, the other half over IMPI), failover (short), IMPI
          clients, LAM interop (a representative subset), mpi4py once
          across clusters, MPICH's CI subset on one cluster.
full      every suite: the default tier and every slice below.
--slice K only slice K of the full tier (0 <= K < number of slices).
--slice-of COMMIT
          the default tier, then the slice COMMIT chooses: the first eight
          hexadecimal digits of the commit id modulo the number of slices.
          .ci/run uses the commit it tests, so that the full tier never rots.

Every suite prints per-test lines and ends with "N passed, N failed" or
"N passed, N failed, N skipped"; a skipped test is named on a line
"SKIP: TEST: REASON". A skip counts as a failure unless its reason starts
with "hardware:" (the machine lacks a device), "input:" (sources the
user supplies, such as NPB's) or "upstream xfail:" (a line MPICH's own
testlists mark xfail=). The summary lists every suite with its
counts and time, every skip with its reason, and ends with
"N passed, N failed, N skipped". Exit status 0 when nothing failed.
"""
import argparse
import dataclasses
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
PY = sys.executable or "python3"

SUMMARY = re.compile(r"^(?:[A-Za-z0-9 ()+_-]+: )?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?")
SKIP = re.compile(r"^SKIP: (.*)$")
FAILED_LINE = re.compile(r"FAILED|^FAIL: ")
# docs/testsuite.md, SUMMARY AND SKIPS: what a skip may give as its reason
ALLOWED_SKIPS = ("hardware:", "input:", "upstream xfail:")


@dataclasses.dataclass
class Suite:
    name: str
    argv: list
    what: str
    needs: tuple = ()   # one-time builds (prepare_steps) the suite uses


def prepare_steps(a):
    """One-time builds of what some suites use, each a no-op when done:
    test/run.py runs those the chosen suites need before the first suite,
    two at a time (the longest first). Each is mostly one process (LAM's
    configure, Cython, one C file of 280,000 lines, the test suite's
    configure), so two of them fill the two cores. A step that fails is
    reported, and the suites that need it build it again and fail with the
    reason."""
    return {
        "lam": ([PY, os.path.join(TOP, "test", "pytest", "test_impi_lam.py"), "--build-only",
                 a.build], "LAM/MPI 7.1.4, 32-bit, with IMPI (contrib/lam/build-lam.sh)"),
        "mpi4py": ([PY, os.path.join(TOP, "test", "mpi", "mpi4py_suite.py"), "--prefix",
                    a.prefix, "--build-only"], "mpi4py against this prefix"),
        "mpich-tests": ([os.path.join(TOP, "test", "mpich", "run-testsuite.sh"), "--mpi",
                         a.prefix, "--label", "icbc", "--build-only"],
                        "MPICH's test suite configured against this prefix"),
    }


def pytest(*files, mark=None, extra=()):
    # the slowest cases in each suite's log, to see where its time goes
    argv = [PY, "-m", "pytest", "--durations=5"] + \
        [os.path.join(TOP, "test", "pytest", f) for f in files]
    if mark:
        argv += ["-m", mark]
    return argv + list(extra)


def default_suites(a):
    # MPICH's CI subset for two clusters is halved between the two paths
    # across clusters: its even lines through the routers, its odd ones
    # over IMPI (--mpich-shard); the slices run the whole lists on both.
    p = ["--prefix", a.prefix]
    return [
        Suite("format", [os.path.join(TOP, "contrib", "check-format.sh")],
              "every C and C++ file against .clang-format"),
        Suite("unit", [os.path.join(TOP, "test", "unit", "run.sh"), "--build", a.build],
              "GoogleTest, normal and ASan+UBSan builds"),
        Suite("fuzz", [os.path.join(TOP, "test", "fuzz", "run.sh"), "--build", a.build,
                       "--seconds", "4"], "each libFuzzer target 4 s over its corpus"),
        Suite("bench-tools", [os.path.join(TOP, "benchmarks", "routed", "selftest.sh")],
              "the benchmark runners' option checks, comparison tables and verdicts (no "
              "testbed)"),
        Suite("testbed", [os.path.join(TOP, "test", "testbed", "run.sh")],
              "the emulated testbed's own tests"),
        Suite("one-cluster", pytest("test_one_cluster.py", extra=p),
              "MPI tests on one cluster of two nodes, and its error paths"),
        Suite("first-contact", [PY, os.path.join(TOP, "test", "mpi", "first_contact.py")] + p,
              "2 x 4 nodes started as a user does, every policy"),
        Suite("mixed-fabric", [PY, os.path.join(TOP, "test", "mpi", "first_contact.py"), "--name",
                               "tmf", "--nodes", "2", "--routers", "2", "--fabric-api", "b=ofi",
                               "--nic-rate", "1gbit", "--wan-rate", "2gbit"] + p,
              "2 x 2 nodes, cluster a on UCX and b on libfabric (router file), every policy"),
        Suite("one-cluster-ofi", [PY, os.path.join(TOP, "test", "mpi", "first_contact.py"),
                                  "--name", "toc", "--clusters", "1", "--nodes", "2",
                                  "--fabric-api", "a=ofi"] + p,
              "one cluster of two nodes on libfabric (router file)"),
        Suite("trust-boundary", [PY, os.path.join(TOP, "test", "mpi", "trust_boundary.py")] + p,
              "the WAN side seen from the other cluster"),
        Suite("clusters", pytest("test_clusters.py", "test_mpich_clusters.py",
                                 "test_apps_results.py", "test_testbed_counters.py",
                                 "test_pacing.py", "test_bind.py", "test_mixed_fabric.py",
                                 mark="not full", extra=p + ["--mpich-shard", "0/2"]),
              "two clusters: every policy, routers, failure paths, MPICH CI subset, pacing, "
              "placement and pacing with a UCX and a libfabric cluster",
              ("mpich-tests",)),
        Suite("npb", pytest("test_npb.py", "test_apps_harness.py", mark="not full",
                            extra=p + npb_args(a)),
              "NPB IS class S across two clusters, every policy (sources: --npb); the "
              "application harness's regimes and CPU rule"),
        Suite("failover", pytest("test_failover.py", mark="not full", extra=p),
              "routers killed and restarted under a stream"),
        Suite("impi-clients", pytest("test_impi_clients.py", "test_impi_cli.py", mark="not full",
                                     extra=p),
              "ICBC jobs as IMPI clients of one MPI_COMM_WORLD; impi-server's and "
              "impi-relay's command lines"),
        Suite("impi-relay", pytest("test_impi_relay.py", "test_impi_relay_router.py",
                                   mark="not full", extra=p + ["--build", a.build]),
              "ICBC clients through impi-relay (P-G, P-P), a relay killed, hostile input; "
              "the relay run by a private cluster's routers from the router file"),
        Suite("impi-lam", pytest("test_impi_lam.py", mark="not full",
                                 extra=p + ["--build", a.build]),
              "LAM/MPI 7.1.4 as the foreign IMPI client (subset)", ("lam",)),
        Suite("mpich-impi", pytest("test_mpich_impi.py", mark="not full",
                                   extra=p + ["--mpich-shard", "1/2"]),
              "MPICH tests split over two IMPI clients", ("mpich-tests",)),
        Suite("mpi4py", [PY, os.path.join(TOP, "test", "mpi", "mpi4py_suite.py")] + p +
              ["--layout", "clusters", "--policies", "aggregate", "--delay", "100us",
               "--exclude", "test_rma|test_datatype",
               "--csv", os.path.join(a.logs, "mpi4py-times.csv")],
              "mpi4py's suite across two clusters under aggregate, 100 us one way, but its "
              "one-sided and its datatype modules (the slices run them)",
              ("mpi4py",)),
        Suite("mpich-testsuite", [os.path.join(TOP, "test", "mpich", "run-testsuite.sh"), "--ci",
                                  "--mpi", a.prefix, "--label", "icbc"],
              "MPICH's CI subset on one cluster", ("mpich-tests",)),
    ]


def slices(a):
    """The full tier beyond the default one, in slices of about 5 minutes
    each (docs/testsuite.md, TIERS, lists them with their measured times):
    .ci/run adds one to the default tier, so each must stay short."""
    p = ["--prefix", a.prefix]
    mpich = [os.path.join(TOP, "test", "mpich", "run-testsuite.sh"), "--mpi", a.prefix,
             "--label", "icbc", "--retries", "1"]
    m4 = [PY, os.path.join(TOP, "test", "mpi", "mpi4py_suite.py")] + p

    # pt2pt/sendflood is 100,000 round trips between rank 0 and seven ranks,
    # eight busy-polling processes on two cores: 97 s on one cluster, 55 s
    # over IMPI and 70 s through impi-relay on this machine (stock MPICH
    # times out at 120 s on one cluster, test/mpich/results/stock), and over
    # 120 s twice in a row in one CI run through the relay. The pt2pt
    # directory gets 300 s per test; a hang still ends, later.
    def limit(dirs, opt):
        return [opt, "300"] if "pt2pt" in dirs.split() else []

    def one(dirs, tag=None):
        tag = tag or dirs.replace(" ", "-")
        return Suite(f"mpich-one-{tag}", mpich + limit(dirs, "--timeout") + [
            "--dirs", dirs, "--out", os.path.join(a.build, "testsuite", f"full-{tag}")],
            f"MPICH's full testlists of {dirs}, one cluster of two nodes", ("mpich-tests",))

    long_rma = os.path.join(TOP, "test", "mpich", "long-rma.list")

    def across(dirs, shard=None):
        tag = dirs.replace(" ", "-") + (f"-{shard.replace('/', 'of')}" if shard else "")
        rma = "rma" in dirs.split()
        part = (["--mpich-shard", shard] if shard else []) + \
            (["--mpich-exclude", long_rma] if rma else []) + limit(dirs, "--mpich-timeout")
        return Suite(f"mpich-2clusters-{tag}", pytest(
            "test_mpich_clusters.py",
            extra=p + ["--mpich-list", "full", "--mpich-dirs", dirs] + part),
            f"MPICH's full testlists of {dirs}" + (f" (lines {shard})" if shard else "") +
            (" but the two of long-rma.list" if rma else "") +
            ", ranks alternating two clusters", ("mpich-tests",))

    with open(long_rma) as f:
        long_lines = [x.split()[0] for x in f if x.strip() and not x.startswith("#")]

    def long(test, limit):
        # one line of long-rma.list alone (a shard of one line): its time is the
        # volume it moves
        k = long_lines.index(f"rma/{test}")
        return Suite(f"mpich-2clusters-{test}", pytest(
            "test_mpich_clusters.py",
            extra=p + ["--mpich-list", long_rma, "--mpich-dirs", "rma", "--mpich-shard",
                       f"{k}/{len(long_lines)}", "--mpich-timeout", str(limit)]),
            f"MPICH's rma/{test} alone across two clusters, limit {limit} s "
            "(test/mpich/long-rma.list)", ("mpich-tests",))

    def m4py(policy):
        # 500 us one way: 1 ms makes a run about 7 minutes, too long for a slice
        return Suite(f"mpi4py-{policy}", m4 + ["--layout", "clusters", "--policies", policy,
                                               "--delay", "500us"],
                     f"mpi4py's suite across two clusters under {policy}, 500 us one way",
                     ("mpi4py",))

    def impi(dirs, shard=None, relay=False):
        tag = dirs.replace(" ", "-") + (f"-{shard.replace('/', 'of')}" if shard else "") + \
            ("-relay" if relay else "")
        part = (["--mpich-shard", shard] if shard else []) + (["--impi-relay"] if relay else []) + \
            limit(dirs, "--mpich-timeout")
        if "rma" in dirs.split():
            # without the two tests that move gigabytes (as across clusters), and
            # 300 s per test: atomic_rmw_gacc's rank 0 runs 150,000
            # Get_accumulate+flush round trips to rank 2, a process of the other
            # client across the WAN (162 s at 100 us one way)
            part += ["--mpich-exclude", long_rma, "--mpich-timeout", "300"]
        return Suite(f"mpich-impi-{tag}", pytest(
            "test_mpich_impi.py", extra=p + ["--mpich-list", "full", "--impi-dirs", dirs] + part),
            f"MPICH's full testlists of {dirs}" + (f" (lines {shard})" if shard else "") +
            (" but the two of long-rma.list" if "rma" in dirs.split() else "") +
            ", split over two IMPI clients" +
            (", the first private, through impi-relay" if relay else ""), ("mpich-tests",))

    return [
        [one("attr basic errhan group info init topo part datatype comm pt2pt",
             "small-comm-pt2pt")],
        [one("coll")],
        [one("rma")],
        [across("pt2pt")],
        [across("coll", "0/2")],
        [across("coll", "1/2")],
        [across("comm")],
        [across("datatype part")],
        [across("rma", "0/3")],
        [across("rma", "1/3")],
        [across("rma", "2/3")],
        [long("rma_contig", 900)],
        [long("large_acc_flush_local", 600)],
        [impi("pt2pt datatype"), impi("pt2pt datatype", relay=True)],
        [impi("coll"), impi("coll", relay=True)],
        [impi("comm"), impi("comm", relay=True),
         Suite("mpich-testsuite-ofi", [os.path.join(TOP, "test", "mpich", "run-testsuite.sh"),
                                       "--ci", "--mpi", a.prefix, "--label", "icbc",
                                       "--fabric-api", "ofi", "--out",
                                       os.path.join(a.build, "testsuite", "ci-ofi")],
               "MPICH's CI subset on one cluster on libfabric (the router file's fabric-api)",
               ("mpich-tests",))],
        [impi("rma", "0/3")],
        [impi("rma", "1/3")],
        [impi("rma", "2/3")],
        [m4py("aggregate")],
        [Suite("mpi4py-one", m4 + ["--layout", "one"], "mpi4py's suite on one cluster",
               ("mpi4py",)),
         Suite("failover-ofi", pytest("test_failover.py", mark="not full",
                                      extra=p + ["--fabric-api", "b=ofi"]),
               "failover with cluster a on UCX and b on libfabric: routers of both killed "
               "and restarted under a stream")],
        [m4py("static")],
        [m4py("alltoall")],
        [m4py("tcp")],
        [Suite("clusters-full", pytest("test_clusters.py", mark="full", extra=p),
               "two clusters: stress under every policy through bounded routers, small "
               "chunks, more placements"),
         Suite("trust-boundary-ofi", [PY, os.path.join(TOP, "test", "mpi", "trust_boundary.py"),
                                      "--name", "tbo", "--fabric-api", "a=ofi"] + p,
               "the trust boundary with cluster a on libfabric: its ports, the guard, "
               "hostile bytes to every libfabric port")],
        [Suite("failover-full", pytest("test_failover.py", mark="full", extra=p),
               "failover: the static and the small-message streams under kills"),
         Suite("impi-relay-full", pytest("test_impi_relay.py", "test_impi_relay_router.py",
                                         mark="full", extra=p + ["--build", a.build]),
               "a router that runs the IMPI relay killed in the middle of a job")],
        [Suite("impi-lam-full", pytest("test_impi_lam.py", mark="full",
                                       extra=p + ["--build", a.build]),
               "the whole LAM/MPI matrix", ("lam",))],
        [Suite("fuzz-long", [os.path.join(TOP, "test", "fuzz", "run.sh"), "--build", a.build,
                             "--seconds", "20"], "each libFuzzer target 20 s")],
    ]


def npb_args(a):
    return ["--npb", a.npb] if a.npb else []


def slice_of(commit, n):
    return int(commit[:8], 16) % n


def prepare(chosen, a):
    """Runs the one-time builds CHOSEN needs, two at a time; returns
    (seconds, notes)."""
    steps = prepare_steps(a)
    want = [n for n in steps if any(n in s.needs for s in chosen)]
    if not want:
        return 0, []
    print(f"\n==> prepare: {', '.join(want)}, two at a time (logs: "
          f"{os.path.join(a.logs, 'prepare-NAME.log')})", flush=True)
    t0 = time.time()
    todo, running, notes = list(want), {}, []
    # LAM's and mpi4py's compilers through ccache when it is installed, as
    # MPICH's build is (contrib/mpich): a new clone builds them again
    env = dict(os.environ)
    if os.path.isdir("/usr/lib/ccache"):
        env["PATH"] = "/usr/lib/ccache:" + env.get("PATH", "")
    while todo or running:
        while todo and len(running) < 2:
            n = todo.pop(0)
            f = open(os.path.join(a.logs, f"prepare-{n}.log"), "w")
            running[n] = (subprocess.Popen(steps[n][0], stdout=f, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, cwd=TOP, env=env), f,
                          time.time())
        time.sleep(0.5)
        for n, (proc, f, start) in list(running.items()):
            if proc.poll() is None:
                continue
            f.close()
            del running[n]
            took = time.time() - start
            if proc.returncode == 0:
                print(f"  {n}: {steps[n][1]}: ready ({took:.0f} s)", flush=True)
            else:
                note = (f"prepare {n} failed (exit {proc.returncode}, "
                        f"log {os.path.join(a.logs, f'prepare-{n}.log')}); "
                        "the suites that need it report it")
                print(f"  {note}", flush=True)
                notes.append(note)
    return time.time() - t0, notes


def run_suite(s, a):
    """Runs one suite, its output to the terminal and to its log; returns
    (passed, failed, skips, failed lines, seconds)."""
    log = os.path.join(a.logs, f"test-{s.name}.log")
    print(f"\n==> tests: {s.name}: {s.what} (log: {log})", flush=True)
    t0 = time.time()
    lines = []
    with open(log, "w") as f:
        proc = subprocess.Popen(s.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace",
                                cwd=TOP)
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            f.write(line)
            lines.append(line.rstrip("\n"))
        rc = proc.wait()
    secs = time.time() - t0
    passed = failed = None
    skipped = 0
    for line in reversed(lines):
        m = SUMMARY.match(line)
        if m:
            passed, failed = int(m.group(1)), int(m.group(2))
            skipped = int(m.group(3) or 0)
            break
    skips = [m.group(1) for m in map(SKIP.match, lines) if m]
    notes = []
    if passed is None:
        passed, failed = 0, 1
        notes.append(f"printed no summary line (exit status {rc})")
    elif rc != 0 and failed == 0:
        failed = 1
        notes.append(f"exited with status {rc}")
    if skipped != len(skips):
        failed += 1
        notes.append(f"counted {skipped} skipped but named {len(skips)}")
    if failed:
        notes += [ln[:200] for ln in lines if FAILED_LINE.search(ln) and
                  not ln.startswith("=")][:6]
    return passed, failed, skips, notes, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", choices=("default", "full"), default="default")
    ap.add_argument("--slice", type=int, metavar="K", help="only slice K of the full tier")
    ap.add_argument("--slice-of", metavar="COMMIT",
                    help="the default tier and the slice this commit id chooses")
    ap.add_argument("--only", default="", help="comma-separated suite names")
    ap.add_argument("--list", action="store_true", help="list the suites and slices")
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--build", default=os.path.join(TOP, "_build"))
    ap.add_argument("--npb", default="",
                    help="NPB 3.4-MPI sources (else the suites read $ICBC_NPB_DIR; "
                         "benchmarks/README.md, NPB)")
    ap.add_argument("--logs", default="")
    a = ap.parse_args()
    a.prefix, a.build = os.path.abspath(a.prefix), os.path.abspath(a.build)
    a.logs = os.path.abspath(a.logs or os.path.join(a.build, "logs"))
    os.makedirs(a.logs, exist_ok=True)
    if a.npb:
        a.npb = os.path.abspath(a.npb)

    base, parts = default_suites(a), slices(a)
    if a.list:
        print("default tier:")
        for s in base:
            print(f"  {s.name:22} {s.what}")
        print(f"full tier: the default tier and slices 0..{len(parts) - 1}:")
        for k, sl in enumerate(parts):
            for s in sl:
                print(f"  slice {k:2}  {s.name:22} {s.what}")
        return 0
    if a.slice is not None:
        if not 0 <= a.slice < len(parts):
            ap.error(f"--slice wants 0..{len(parts) - 1}")
        chosen, title = parts[a.slice], f"slice {a.slice} of {len(parts)}"
    elif a.slice_of:
        if not re.fullmatch(r"[0-9a-fA-F]{8,40}", a.slice_of):
            ap.error("--slice-of wants a commit id (8 to 40 hexadecimal digits)")
        k = slice_of(a.slice_of, len(parts))
        chosen = base + parts[k]
        title = f"default tier and slice {k} of {len(parts)} (commit {a.slice_of[:12]})"
    elif a.tier == "full":
        chosen, title = base + [s for sl in parts for s in sl], "full tier"
    else:
        chosen, title = base, "default tier"
    if a.only:
        names = a.only.split(",")
        unknown = set(names) - {s.name for s in base + [s for sl in parts for s in sl]}
        if unknown:
            ap.error(f"unknown suites: {', '.join(sorted(unknown))} (see --list)")
        chosen = [s for s in base + [s for sl in parts for s in sl] if s.name in names]

    print(f"==> {title}: {', '.join(s.name for s in chosen)}", flush=True)
    t0 = time.time()
    rows, total = [], [0, 0, 0]
    prep_secs, prep_notes = prepare(chosen, a)
    for s in chosen:
        p, f, skips, notes, secs = run_suite(s, a)
        bad = [x for x in skips if not x.split(": ", 1)[-1].startswith(ALLOWED_SKIPS)]
        if bad:
            notes.append(f"{len(bad)} skip(s) without a hardware or input reason count as failed")
            f += len(bad)
        rows.append((s.name, p, f, skips, notes, secs))
        total[0] += p
        total[1] += f
        total[2] += len(skips)

    print(f"\n==> summary: {title}, {(time.time() - t0) / 60:.1f} min")
    if prep_secs:
        print(f"  prepare: {prep_secs:.0f} s")
        for x in prep_notes:
            print(f"    {x}")
    for name, p, f, skips, notes, secs in rows:
        print(f"  {name}: {p} passed, {f} failed, {len(skips)} skipped ({secs:.0f} s)")
        for x in skips:
            print(f"    skipped: {x}")
        for x in notes:
            print(f"    {x}")
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 0 if total[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
