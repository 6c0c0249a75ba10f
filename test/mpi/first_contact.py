#!/usr/bin/env python3
"""A run started exactly as docs/testbed.md and the README tell a new user:

    icbc-testbed up --clusters 2 --nodes 4 --routers 4 ...
    . /run/icbc-testbed/NAME/env
    mpiexec -n 8 -ppn 1 ./app

with no UCX, ICBC or MPICH variable set (every one the caller has is
removed), under each policy of the router file (its policy line edited, as
a user would), once with embedded routers and once with icbc-router daemons
started as docs/router.md shows (router file and host, nothing else). The
nodes have three interfaces each (fabric, external NIC, management), so UCX
must keep to the fabric on its own. The app is the MPI-level conformance
test of point-to-point sizes (eager, rendezvous and striped, each rank with
the rank of the other cluster);
under aggregate the RMA and collectives test, the own-window update
order test (rma_self_order) and the PSCW completion order test
(pscw_complete_order) run too.

  test/mpi/first_contact.py [--prefix DIR] [--policies "aggregate static ..."] [--keep]
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from testbed import TOP, Report, Testbed, die, mpicc  # noqa: E402

LIMIT_S = 300


def run_app(rep, env, exe, label, work, app_args=()):
    log = os.path.join(work, f"{label}.log")
    t0 = time.time()
    with open(log, "w") as f:
        try:
            r = subprocess.run(["mpiexec", "-n", "8", "-ppn", "1", exe] + list(app_args), env=env, stdout=f,
                               stderr=subprocess.STDOUT, timeout=LIMIT_S)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = "hung"
    text = open(log).read()
    ok = rc == 0 and "No Errors" in text
    tail = "" if ok else " | " + " | ".join(text.strip().splitlines()[-4:])
    rep.check(ok, label, f"(rc {rc}, {time.time() - t0:.0f} s; log {log}){tail}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--policies", default="aggregate static alltoall tcp")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    prefix = os.path.abspath(args.prefix)
    work = os.path.join(TOP, "_build/test-first-contact")
    rep = Report()
    tb = Testbed("tfc", prefix, ["--clusters", "2", "--nodes", "4", "--routers", "4",
                                 "--nic-rate", "100mbit", "--wan-rate", "400mbit",
                                 "--delay", "1ms"], work)
    apps = {}
    for name in ("p2p_sizes", "rma_coll", "rma_self_order", "pscw_complete_order"):
        exe = os.path.join(work, name)
        if not mpicc(prefix, os.path.join(TOP, f"test/mpi/{name}.c"), exe, exe + ".build.log"):
            die(f"cannot build {name} (see {exe}.build.log)")
        apps[name] = exe
    with tb.running(rep, args.keep, "first-contact test") as env:
        routers = [n for n, _, role, *_ in tb.nodes() if role == "router"]
        for mode in ("embedded", "daemons"):
            if mode == "daemons":
                for n in routers:
                    tb.start_router(n, env=env)
            for pol in args.policies.split():
                tb.set_policy(pol)
                # ranks 0-3 on cluster a, 4-7 on b: rank i and i+4 cross the WAN
                run_app(rep, env, apps["p2p_sizes"], f"p2p_sizes:{pol}:{mode}", work, ["--half"])
                if pol == "aggregate":
                    run_app(rep, env, apps["rma_coll"], f"rma_coll:{pol}:{mode}", work)
                    run_app(rep, env, apps["rma_self_order"], f"rma_self_order:{pol}:{mode}",
                            work, ["--rounds", "300", "--deadline", "10"])
                    # MPI_Win_complete's notices arrive before the barrier after it ends
                    run_app(rep, env, apps["pscw_complete_order"],
                            f"pscw_complete_order:{pol}:{mode}", work, ["--rounds", "300"])
            tb.stop_daemons()
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
