#!/usr/bin/env python3
"""A run started exactly as docs/testbed.md and the README tell a new user:

    icbc-testbed up --clusters 2 --nodes 4 --routers 4 ...
    . /run/icbc-testbed/NAME/env
    mpiexec -n 8 -ppn 1 ./app

with no UCX, ICBC or MPICH variable set (every one the caller has is
removed), under each policy of the router file (its policy line edited, as
a user would), once with embedded routers and once with icbc-router daemons
started as docs/router.md shows (router file and host, nothing else) under
the policies that route (alltoall and tcp go from process to process, past
the routers). The
nodes have three interfaces each (fabric, external NIC, management), so UCX
must keep to the fabric on its own. The app is the MPI-level conformance
test of point-to-point sizes (eager, rendezvous and striped, each rank with
the rank of the other cluster);
under aggregate the RMA and collectives test, the own-window update
order test (rma_self_order) and the PSCW completion order test
(pscw_complete_order) run too.

With --fabric-api (icbc-testbed's option, e.g. b=ofi: "fabric-api ofi" in
cluster b's section of the router file, nothing else) the same runs make a
mixed-fabric job: cluster a's processes and routers on UCX, cluster b's on
libfabric, the routers carrying messages between them; every policy runs
the stress test (every message's data checked) as well. One more run with
ICBC_LOG_LEVEL=info (the variable that makes each process print the fabric
it opened) and the routers' logs show that each cluster spoke its own API.
With --clusters 1 the apps run on one cluster (no routers, no policy).

  test/mpi/first_contact.py [--prefix DIR] [--policies "aggregate static ..."] [--keep]
                            [--name T] [--clusters N] [--nodes M] [--routers R]
                            [--fabric-api C=API,...] [--nic-rate RATE] [--wan-rate RATE]
"""

import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from testbed import TOP, Report, Testbed, die, mpicc  # noqa: E402

LIMIT_S = 300
ROUTED = ("aggregate", "static")  # the policies whose messages cross through routers


def run_app(rep, env, exe, label, work, app_args=(), np=8, ppn=1):
    log = os.path.join(work, f"{label.replace(':', '-')}.log")
    t0 = time.time()
    with open(log, "w") as f:
        try:
            r = subprocess.run(["mpiexec", "-n", str(np), "-ppn", str(ppn), exe] + list(app_args), env=env, stdout=f,
                               stderr=subprocess.STDOUT, timeout=LIMIT_S)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = "hung"
    text = open(log).read()
    ok = rc == 0 and "No Errors" in text
    tail = "" if ok else " | " + " | ".join(text.strip().splitlines()[-4:])
    rep.check(ok, label, f"(rc {rc}, {time.time() - t0:.0f} s; log {log}){tail}")
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--policies", default="aggregate static alltoall tcp")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--name", default="tfc")
    ap.add_argument("--clusters", type=int, choices=(1, 2), default=2)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--routers", type=int, default=4)
    ap.add_argument("--fabric-api", default="")
    ap.add_argument("--nic-rate", default="100mbit")
    ap.add_argument("--wan-rate", default="400mbit")
    args = ap.parse_args()
    prefix = os.path.abspath(args.prefix)
    work = os.path.join(TOP, f"_build/test-first-contact-{args.name}")
    rep = Report()
    tb_args = ["--clusters", str(args.clusters), "--nodes", str(args.nodes)]
    if args.clusters > 1:
        tb_args += ["--routers", str(args.routers), "--nic-rate", args.nic_rate,
                    "--wan-rate", args.wan_rate, "--delay", "1ms"]
    if args.fabric_api:
        tb_args += ["--fabric-api", args.fabric_api]
    tb = Testbed(args.name, prefix, tb_args, work)
    np = args.clusters * args.nodes
    apps = {}
    for name in ("p2p_sizes", "rma_coll", "rma_self_order", "pscw_complete_order", "stress"):
        exe = os.path.join(work, name)
        if not mpicc(prefix, os.path.join(TOP, f"test/mpi/{name}.c"), exe, exe + ".build.log"):
            die(f"cannot build {name} (see {exe}.build.log)")
        apps[name] = exe
    with tb.running(rep, args.keep, "first-contact test") as env:
        if args.clusters == 1:
            if args.fabric_api:
                check_fabrics(rep, tb, env, apps, work, np, args.fabric_api)
            one_cluster(rep, env, apps, work, np)
            return rep.finish()
        routers = [n for n, _, role, *_ in tb.nodes() if role == "router"]
        if args.fabric_api:
            check_fabrics(rep, tb, env, apps, work, np, args.fabric_api)
        for mode in ("embedded", "daemons"):
            if mode == "daemons":
                for n in routers:
                    tb.start_router(n, env=env)
            for pol in args.policies.split():
                if mode == "daemons" and pol not in ROUTED:
                    continue  # nothing of theirs goes through a router
                tb.set_policy(pol)
                # ranks 0..np/2-1 on cluster a, the rest on b: rank i and i+np/2 cross the WAN
                run_app(rep, env, apps["p2p_sizes"], f"p2p_sizes:{pol}:{mode}", work, ["--half"],
                        np=np)
                if args.fabric_api:
                    run_app(rep, env, apps["stress"], f"stress:{pol}:{mode}", work, ["--quick"],
                            np=np)
                if pol == "aggregate":
                    run_app(rep, env, apps["rma_coll"], f"rma_coll:{pol}:{mode}", work, np=np)
                    run_app(rep, env, apps["rma_self_order"], f"rma_self_order:{pol}:{mode}",
                            work, ["--rounds", "300", "--deadline", "10"], np=np)
                    # MPI_Win_complete's notices arrive before the barrier after it ends
                    run_app(rep, env, apps["pscw_complete_order"],
                            f"pscw_complete_order:{pol}:{mode}", work, ["--rounds", "300"], np=np)
            if mode == "daemons" and args.fabric_api:
                check_router_fabrics(rep, tb, routers, args.fabric_api)
            tb.stop_daemons()
    return rep.finish()


def apis_of(spec, clusters):
    """{cluster: api} from --fabric-api (ucx where it names no API)."""
    given = dict(item.split("=") for item in spec.split(",") if item)
    return {c: given.get(c, "ucx") for c in clusters}


def check_fabrics(rep, tb, env, apps, work, np, spec):
    """Each process opened its own cluster's fabric API: one run of
    p2p_sizes with ICBC_LOG_LEVEL=info, whose "fabric:" line every process
    prints."""
    hosts = [(n, c) for n, c, *_ in tb.nodes()]
    want = apis_of(spec, sorted({c for _, c in hosts}))
    text = run_app(rep, dict(env, ICBC_LOG_LEVEL="info"), apps["p2p_sizes"],
                   "p2p_sizes:log-level-info", work, ["--half"], np=np)
    lines = re.findall(r"fabric: (ucx|ofi)\b", text)
    got = {a: lines.count(a) for a in ("ucx", "ofi")}
    need = {a: sum(1 for _, c in hosts if want[c] == a) for a in ("ucx", "ofi")}
    rep.check(got == need, "each process opened its cluster's fabric API",
              f"(processes per API: {got}, expected {need})")


def check_router_fabrics(rep, tb, routers, spec):
    """Each router daemon said it serves its cluster on that cluster's API."""
    want = apis_of(spec, sorted({c for _, c, *_ in tb.nodes()}))
    for n in routers:
        log = os.path.join(tb.work, f"router-{n}.log")
        text = open(log).read() if os.path.exists(log) else ""
        m = re.search(r"router \S+: host \S+, fabric \S+ \((ucx|ofi)", text)
        got = m.group(1) if m else None
        cluster = tb.node(n)[1]
        rep.check(got == want[cluster], f"router {n} serves cluster {cluster} on {want[cluster]}",
                  f"(its log says {got}; {log})")


def one_cluster(rep, env, apps, work, np):
    """The apps on one cluster, two processes per node: the direct path
    alone, between nodes and inside one."""
    for name, app_args in (("p2p_sizes", ()), ("rma_coll", ()), ("stress", ("--quick",))):
        run_app(rep, env, apps[name], f"{name}:one-cluster", work, app_args, np=2 * np, ppn=2)


if __name__ == "__main__":
    sys.exit(main())
