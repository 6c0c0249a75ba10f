#!/usr/bin/env python3
"""The trust boundary, tested from outside as an attacker would meet it.

Two clusters of three nodes with one router each (docs/router.md: icbc-router
daemons started with the router file and the host, nothing else), and a job
started as a user starts it (". env", mpiexec, no UCX or ICBC variable) that
keeps checked traffic flowing across the WAN. Then:

* from b2, a compute node of the other cluster, every TCP port of the WAN
  addresses of a0 (router daemon and a rank) and a1 (a rank) is tried: each
  open port must greet with bt_lib's HELLO, i.e. no UCX port faces the WAN;
* the two inputs that abort UCX 1.13 and the generic hostile ones are sent to
  every open port: the router daemons and the job must live on, and the job
  must end with its data right;
* from a2, a node of the router's own cluster without a registered process,
  1,000 silent connections are held to the router's UCX ports: all must be
  closed within --register-timeout (5 s) plus the guard's scan period (0.25 s),
  while a second job through the same router passes.

With --fabric-api a=ofi (icbc-testbed's option: "fabric-api ofi" in cluster
a's section of the router file) cluster a speaks libfabric, and the same
checks hold for the ports libfabric opens: none faces the WAN, the guard
closes silent connections to them, and from a2 the UCX inputs and the
generic hostile ones (a header claiming data that never comes, random bytes,
zeros) are sent to every fabric port of the router and of the ranks on a0
and a1: the router and the job live on, the data stays right.

  test/mpi/trust_boundary.py [--prefix DIR] [--keep] [--name T] [--fabric-api C=API]
                                                       ends with "N passed, N failed"
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from testbed import TOP, Report, Testbed, alive, die, mpicc  # noqa: E402

PROBE = os.path.join(TOP, "test/harness/netprobe.py")
REGISTER_TIMEOUT_S = 5.0  # icbc-router's default --register-timeout
GUARD_PERIOD_S = 0.25     # its scan period: register-timeout / 20, at most 250 ms


def probe(tb, node, args, timeout):
    r = tb.run_on(node, ["python3", PROBE] + args, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"netprobe {args[0]} on {node} failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def fabric_ports(tb, node, pid, addr):
    """The listening ports of process PID on ADDR, as ss shows them in NODE."""
    r = tb.run_on(node, ["ss", "-Hltnp"])
    ports = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) < 6 or f"pid={pid}," not in line:
            continue
        host, port = f[3].rsplit(":", 1)
        if host == addr:
            ports.append(int(port))
    return ports


def ranks_on(tb, node, program):
    """The pids of PROGRAM's processes in NODE's namespace."""
    r = tb.run_on(node, ["ss", "-Hltnp"])
    pids = set(int(m) for m in re.findall(rf'"{program}",pid=(\d+),', r.stdout))
    return sorted(pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--name", default="tbnd")
    ap.add_argument("--fabric-api", default="")
    args = ap.parse_args()
    prefix = os.path.abspath(args.prefix)
    work = os.path.join(TOP, f"_build/test-trust-{args.name}")
    rep = Report()
    api = dict(i.split("=") for i in args.fabric_api.split(",") if i).get("a", "ucx")
    tb = Testbed(args.name, prefix, ["--clusters", "2", "--nodes", "3", "--routers", "1",
                                     "--nic-rate", "100mbit", "--wan-rate", "400mbit",
                                     "--delay", "1ms"] +
                 (["--fabric-api", args.fabric_api] if args.fabric_api else []), work)
    soak = os.path.join(work, "soak")
    if not mpicc(prefix, os.path.join(TOP, "test/mpi/soak.c"), soak, soak + ".build.log"):
        die(f"cannot build soak (see {soak}.build.log)")
    with tb.running(rep, args.keep, "trust boundary test") as env:
        pids = {n: tb.start_router(n, env=env) for n in ("a0", "b0")}
        a0, a1, a2 = tb.node("a0"), tb.node("a1"), tb.node("a2")
        stop = os.path.join(work, "soak.stop")
        if os.path.exists(stop):
            os.unlink(stop)
        joblog = open(os.path.join(work, "soak.log"), "w")
        job = subprocess.Popen(["mpiexec", "-n", "4", "-ppn", "1", "-hosts", "a0,a1,b0,b1",
                                soak, "--until", stop], env=env, stdout=joblog,
                               stderr=subprocess.STDOUT)
        tb.at_exit(lambda: job.poll() is None and job.kill())
        time.sleep(4)
        rep.check(job.poll() is None, "job across the clusters is running before the scan")

        # -- every port of the WAN-facing addresses, from the other cluster
        scan = probe(tb, "b2", ["scan", a0[4], a1[4]], timeout=900)
        opened = []
        for s in scan["scans"]:
            host = s["host"]
            tried = len(s["open"]) + s["refused"] + len(s["unanswered"])
            rep.check(tried == 65535 and not s["unanswered"],
                      f"scan of {host}: all 65535 ports answered (open or refused)",
                      f"({len(s['open'])} open, {s['refused']} refused, "
                      f"{len(s['unanswered'])} unanswered, {scan['seconds']} s for both)")
            bad = [o["port"] for o in s["open"] if not o["bt_lib"]]
            rep.check(not bad, f"scan of {host}: every open port is a bt_lib port",
                      f"(open: {[o['port'] for o in s['open']]}; not bt_lib: {bad})")
            opened += [f"{host}:{o['port']}" for o in s["open"]]
        rep.check(f"{a0[4]}:7200" in opened,
                  f"scan found the router's WAN port {a0[4]}:7200 (the scan sees open ports)")

        # -- the inputs that abort UCX, to every open port
        poison = probe(tb, "b2", ["poison", "--generic"] + opened, timeout=120)
        inputs = sorted({p["input"] for p in poison["poison"]})
        rep.check(all(p["sent"] for p in poison["poison"]) and
                  len(poison["poison"]) == len(inputs) * len(opened) and len(inputs) >= 6,
                  f"the UCX-aborting and the generic hostile inputs sent to each of the "
                  f"{len(opened)} open port(s)", f"({', '.join(inputs)})")
        time.sleep(2)
        for n, pid in pids.items():
            rep.check(alive(pid), f"router daemon {n} alive after the hostile inputs")
        rep.check(job.poll() is None, "job alive after the scan and the hostile inputs")

        # -- 1,000 silent connections to the router's fabric ports, from inside
        ports = fabric_ports(tb, "a0", pids["a0"], a0[3])
        rep.check(len(ports) >= (2 if api == "ucx" else 1),
                  f"router a0's {api} listens on its fabric address {a0[3]}",
                  f"(ports {ports}: " + ("the connection manager and the TCP transport)"
                                         if api == "ucx" else "libfabric's tcp provider)"))
        idle = subprocess.Popen(tb.exec_cmd("a2", ["python3", PROBE, "idle", "--count", "1000",
                                                   "--hold", "30"] +
                                            [f"{a0[3]}:{p}" for p in ports]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        second = subprocess.run(["mpiexec", "-n", "4", "-ppn", "1", "-hosts", "a0,a1,b0,b1",
                                 soak, "--seconds", "3"], env=env, capture_output=True,
                                text=True, timeout=180)
        rep.check(second.returncode == 0 and "No Errors" in second.stdout,
                  "a second job through router a0 passes while the silent connections are held",
                  "" if second.returncode == 0 else f"(rc {second.returncode}: {second.stderr[-300:]})")
        out, err = idle.communicate(timeout=120)
        res = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        # ages count from the scan that first saw a connection; 1 s for the
        # scheduling of the router and the probe on a loaded two-core host
        limit = REGISTER_TIMEOUT_S + GUARD_PERIOD_S + 1.0
        rep.check(res.get("opened") == 1000 and res.get("closed") == 1000,
                  f"all 1,000 silent connections to the {api} ports were closed by the router",
                  f"({json.dumps(res) if res else err[-300:]})")
        rep.check(res.get("max_close_s") is not None and res["max_close_s"] <= limit,
                  f"each within register-timeout + scan period ({limit:.2f} s)",
                  f"(closed after {res.get('min_close_s')} .. {res.get('max_close_s')} s)")
        rep.check(alive(pids["a0"]), "router daemon a0 alive after the silent connections")

        # -- hostile bytes to every fabric port of cluster a, from inside
        if api != "ucx":
            targets = [f"{a0[3]}:{p}" for p in ports]
            for node, row in (("a0", a0), ("a1", a1)):
                for pid in ranks_on(tb, node, "soak"):
                    targets += [f"{row[3]}:{p}" for p in fabric_ports(tb, node, pid, row[3])]
            hostile = probe(tb, "a2", ["poison", "--generic"] + targets, timeout=300)
            sent = [p for p in hostile["poison"] if p["sent"]]
            rep.check(len(sent) == len(hostile["poison"]) and len(targets) >= 3,
                      f"hostile inputs sent to the {len(targets)} {api} port(s) of a0's router "
                      f"and the ranks on a0 and a1",
                      f"({len(sent)} of {len(hostile['poison'])} sent; {' '.join(targets)})")
            time.sleep(2)
            rep.check(alive(pids["a0"]), "router daemon a0 alive after the hostile inputs")
            rep.check(job.poll() is None, "job alive after the hostile inputs to its fabric ports")

        # -- the job ends with its data right
        open(stop, "w").close()
        try:
            rc = job.wait(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            rc = "hung"
        joblog.close()
        text = open(os.path.join(work, "soak.log")).read()
        rep.check(rc == 0 and "No Errors" in text,
                  "the job that ran through it all ends with its data right",
                  f"(rc {rc}; {text.strip().splitlines()[-1] if text.strip() else 'no output'})")
        tb.stop_daemons()
        log = open(os.path.join(work, "router-a0.log")).read()
        m = re.findall(r"unregistered fabric connections closed (\d+)", log)
        rep.check(bool(m) and int(m[-1]) >= 1000,
                  "router a0's stats count the connections it closed",
                  f"({m[-1] if m else 'no stats line'})")
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
