#!/usr/bin/env python3
"""IMPI through trunks of impi-relay (docs/impi-relay.md, TRUNKING), beside no
relay: MPI_Alltoall and NPB IS and FT between a cluster with private
addresses and a public one, with K = 1, 2, 4 relays, in one run.

    /usr/bin/python3 benchmarks/impi/relay_trunks.py [--prefix DIR] [--out DIR]
        [--trunks "1 2 4"] [--reps N] [--nic-rate R] [--wan-rate R] [--delay T]
        [--nic-queue T] [--a-hosts H] [--npb DIR] [--is-class A] [--ft-class W]
        [--alltoall-size 64K] [--no-gg]

Testbed "trk": 2 clusters x (4 + H) nodes, 4 routers each (the router nodes
are a cluster's front-ends), cluster a private (icbc-testbed --private a:
only a0..a3 reach the WAN). Client 0 (cluster a): 8 processes on a4 ..
a{3+H} (--a-hosts, default 4), through a trunk of K relays on a0..a{K-1}
(test/mpich/mpiexec_impi.py --relay). Client 1 (cluster b): 8 processes on
b2..b5. Every external NIC is shaped to --nic-rate, so a trunk of K relays
gives cluster a K NICs to the WAN (up to --wan-rate). --nic-queue (default
the testbed's 10ms) is how long a frame may wait in a NIC's queue before it
is dropped: a real host's 1000-frame queue holds 600ms at 20 Mbit/s, and
with 10ms the NICs drop a large part of what TCP sends (the summary says
how much). Outside, the relays
stand for client 0's hosts in min(K, H) blocks (docs/impi-relay.md,
TRUNKING): with H < K only H relays carry what client 0 sends. The series
"gg" runs the same on testbed "trg", cluster a public and no relay (client
0's nodes reach the WAN with their own NICs).

Each run: icbc_alltoall (--alltoall-size to every rank), NPB IS and FT (16
processes). MPIR_CVAR_CH4_ICBC_YIELD=1: 16 ranks share 2 cores, and a rank
that spins while it waits would take them from the others. Results:
relay_trunks.csv (series, program, rep, seconds, CPU seconds of the job and
its relays, the bytes each WAN-facing NIC of cluster a sent and received in
the run, the frames the tbf queues dropped and the TCP segments resent on
the testbed), relay_trunks_summary.txt (medians, T1 / TK, TK x K / T1, the
relays' shares of the traffic) and relay_trunks.png (time against K, as the
paper's Figure 7).
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "test", "harness"))
sys.path.insert(0, os.path.join(TOP, "benchmarks", "apps"))
from testbed import Testbed  # noqa: E402
import npb  # noqa: E402

CLIENT_B = "b2,b3,b4,b5"
NP = 16


def run(prefix, env, work, name, relay_nodes, argv, timeout, client_a):
    """One IMPI job of two clients through mpiexec_impi.py: (rc, output,
    seconds, CPU seconds of everything it waited for)."""
    cmd = [sys.executable, os.path.join(TOP, "test", "mpich", "mpiexec_impi.py"),
           "--prefix", prefix, "--hosts", f"{client_a};{CLIENT_B}"]
    if relay_nodes:
        cmd += ["--relay", ",".join(relay_nodes)]
    cmd += ["-n", str(NP), "-genv", "MPIR_CVAR_CH4_ICBC_YIELD", "1"] + argv
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or "") if isinstance(e.stdout, str) else ""
    secs = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    with open(os.path.join(work, name + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + out)
    return rc, out, secs, cpu


def parse_size(text):
    m = re.fullmatch(r"([0-9]+)([KM]?)", text)
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1 << 20}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", default=os.path.join(TOP, "_install"))
    ap.add_argument("--out", default=os.path.join(TOP, "benchmarks", "results", "impi-trunks"))
    ap.add_argument("--trunks", default="1 2 4")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--nic-rate", default="20mbit")
    ap.add_argument("--wan-rate", default="80mbit")
    ap.add_argument("--delay", default="1ms")
    ap.add_argument("--a-hosts", type=int, default=4)
    ap.add_argument("--nic-queue", default="")
    ap.add_argument("--npb", default=None)
    ap.add_argument("--is-class", default="A")
    ap.add_argument("--ft-class", default="W")
    ap.add_argument("--alltoall-size", default="64K")
    ap.add_argument("--no-gg", action="store_true", help="leave out the series without relay")
    ap.add_argument("--timeout", type=int, default=900)
    o = ap.parse_args()
    prefix = os.path.abspath(o.prefix)
    trunks = [int(k) for k in o.trunks.split()]
    if any(k < 1 or k > 4 for k in trunks):
        sys.exit("relay_trunks: --trunks takes 1..4 (cluster a has four front-ends)")
    if not 1 <= o.a_hosts <= 8:
        sys.exit("relay_trunks: --a-hosts takes 1..8")
    client_a = ",".join(f"a{4 + i}" for i in range(o.a_hosts))
    os.makedirs(o.out, exist_ok=True)
    work = os.path.join(TOP, "_build", "bench-trunks")
    os.makedirs(work, exist_ok=True)

    # the programs
    a2a = os.path.join(work, "icbc_alltoall")
    subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2", "-I",
                    os.path.join(TOP, "benchmarks", "src"), "-o", a2a,
                    os.path.join(TOP, "benchmarks", "src", "icbc_alltoall.c")], check=True)
    size = parse_size(o.alltoall_size)
    progs = {"alltoall": [a2a, "--min", str(size), "--max", str(size), "--iters", "10",
                          "--warmup", "2", "--min-iters", "10"]}
    try:
        progs[f"is.{o.is_class}"] = [npb.build(prefix, "is", o.is_class, work, o.npb)]
        progs[f"ft.{o.ft_class}"] = [npb.build(prefix, "ft", o.ft_class, work, o.npb)]
    except npb.NpbError as e:
        print(f"relay_trunks: NPB left out: {e}", flush=True)

    series = ([("gg", "trg", [])] if not o.no_gg else []) + \
        [(f"k{k}", "trk", [f"a{j}" for j in range(k)]) for k in trunks]
    rows = []
    for bed_name in ("trg", "trk"):
        mine = [s for s in series if s[1] == bed_name]
        if not mine:
            continue
        args = ["--clusters", "2", "--nodes", str(max(6, 4 + o.a_hosts)), "--routers", "4",
                "--nic-rate", o.nic_rate, "--wan-rate", o.wan_rate, "--delay", o.delay]
        if o.nic_queue:
            args += ["--nic-queue", o.nic_queue]
        if bed_name == "trk":
            args += ["--private", "a"]
        tb = Testbed(bed_name, prefix, args, os.path.join(work, bed_name))
        tb.up()
        try:
            env = tb.user_env()
            env["MPIEXEC_TIMEOUT"] = str(o.timeout)
            for rep in range(1, o.reps + 1):
                for s, _bed, relays in (mine if rep % 2 else list(reversed(mine))):
                    # the NICs cluster a reaches the WAN with: the relays', or
                    # (no relay) client 0's own
                    wan_nics = relays or client_a.split(",")
                    for prog, argv in progs.items():
                        name = f"{s}_{prog}_rep{rep}"
                        nic0 = [tb.nic_bytes(n) for n in wan_nics]
                        drops0, retrans0 = tb.nic_drops(), tb.tcp_retrans()
                        rc, out, secs, cpu = run(prefix, env, work, name, relays, argv,
                                                 o.timeout, client_a)
                        nic = [(t1 - t0, r1 - r0) for (t0, r0), (t1, r1) in
                               zip(nic0, [tb.nic_bytes(n) for n in wan_nics])]
                        drops, retrans = tb.nic_drops() - drops0, tb.tcp_retrans() - retrans0
                        value = None
                        if rc == 0 and prog == "alltoall":
                            m = re.search(rf"^{size},([0-9.]+)$", out, re.M)
                            value = float(m.group(1)) / 1e6 if m else None
                        elif rc == 0:
                            try:
                                r = npb.parse(out)
                                value = r["secs"] if r["verified"] else None
                            except npb.NpbError:
                                value = None
                        status = "ok" if value is not None else f"failed (rc {rc})"
                        print(f"[{time.strftime('%H:%M:%S')}] {name}: {status}, "
                              f"{value if value is not None else '-'} s, wall {secs:.1f} s, "
                              f"CPU {cpu:.1f} s", flush=True)
                        print(f"    NIC bytes sent/received: " + ", ".join(
                            f"{n} {t / 1e6:.1f}/{r / 1e6:.1f} MB" for n, (t, r) in
                            zip(wan_nics, nic)) + f"; tbf drops {drops}, TCP resent {retrans}",
                            flush=True)
                        rows.append((s, prog, rep, value, secs, cpu, wan_nics, nic, drops,
                                     retrans))
        finally:
            tb.down()

    csv = os.path.join(o.out, "relay_trunks.csv")
    with open(csv, "w") as f:
        f.write("series,program,rep,seconds,wall_s,cpu_s,nics,nic_tx_mb,nic_rx_mb,tbf_drops,"
                "tcp_resent\n")
        for s, prog, rep, v, secs, cpu, nics, nic, drops, retrans in rows:
            f.write(f"{s},{prog},{rep},{'' if v is None else f'{v:.6f}'},{secs:.2f},{cpu:.2f},"
                    f"{'/'.join(nics)},{'/'.join(f'{t / 1e6:.2f}' for t, _ in nic)},"
                    f"{'/'.join(f'{r / 1e6:.2f}' for _, r in nic)},{drops},{retrans}\n")
    med = {}
    for s, prog, rep, v, *_ in rows:
        if v is not None:
            med.setdefault((s, prog), []).append(v)
    med = {k: statistics.median(v) for k, v in med.items()}
    lines = [f"command: {' '.join(sys.argv)}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
             f"testbed: 2 clusters x {max(6, 4 + o.a_hosts)} nodes, 4 routers, NIC {o.nic_rate} "
             f"(queue {o.nic_queue or '10ms'}), WAN {o.wan_rate}, "
             f"{o.delay} one way; client 0 on {client_a}, client 1 on {CLIENT_B} "
             "(8 processes each)", "",
             "median seconds (alltoall: per call at "
             f"{o.alltoall_size} to each rank; NPB: its own time); T1/TK; TK x K / T1"]
    names = [s for s, _b, _r in series]
    for prog in progs:
        t1 = med.get(("k1", prog))
        cells = []
        for s in names:
            v = med.get((s, prog))
            if v is None:
                cells.append(f"{s} -")
                continue
            cell = f"{s} {v:.3f}"
            if t1 and s.startswith("k"):
                k = int(s[1:])
                cell += f" (T1/T{k} {t1 / v:.2f}, T{k}xK/T1 {v * k / t1:.2f})"
            elif t1:
                cell += f" (T1/Tgg {t1 / v:.2f})"
            cells.append(cell)
        lines.append(f"{prog:10s} " + "; ".join(cells))
    lines.append("")
    lines.append("cluster a's WAN-facing NICs per run (median over reps; MB sent / received, "
                 "and each NIC's share of what they sent); tbf drops, TCP segments resent:")
    by = {}
    for s, prog, rep, v, secs, cpu, nics, nic, drops, retrans in rows:
        by.setdefault((s, prog), []).append((nics, nic, drops, retrans))
    for (s, prog), runs in sorted(by.items()):
        nics = runs[0][0]
        tx = [statistics.median(r[1][i][0] for r in runs) for i in range(len(nics))]
        rx = [statistics.median(r[1][i][1] for r in runs) for i in range(len(nics))]
        tot = sum(tx) or 1
        lines.append(f"  {s} {prog}: " + ", ".join(
            f"{n} {t / 1e6:.1f}/{r / 1e6:.1f} ({100 * t / tot:.0f} %)" for n, t, r in
            zip(nics, tx, rx)) + f"; drops {statistics.median(r[2] for r in runs):.0f}, "
            f"resent {statistics.median(r[3] for r in runs):.0f}")
    cpu_by = {}
    for s, prog, rep, v, secs, cpu, *_ in rows:
        cpu_by.setdefault((s, prog), []).append(cpu / secs if secs else 0)
    lines.append("")
    lines.append("CPU use (CPU seconds of the job and its relays per wall second, 2 cores):")
    for (s, prog), v in sorted(cpu_by.items()):
        lines.append(f"  {s} {prog}: {statistics.median(v):.2f}")
    with open(os.path.join(o.out, "relay_trunks_summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(progs), figsize=(4 * len(progs), 3.4))
        axes = axes if len(progs) > 1 else [axes]
        for ax, prog in zip(axes, progs):
            ks = [k for k in trunks if ("k%d" % k, prog) in med]
            ax.plot(ks, [med[("k%d" % k, prog)] for k in ks], "o-", label="through K relays")
            if ("k1", prog) in med:
                ax.plot(ks, [med[("k1", prog)] / k for k in ks], ":", color="gray",
                        label="T1 / K")
            if ("gg", prog) in med:
                ax.axhline(med[("gg", prog)], color="red", linestyle="--", label="no relay")
            ax.set_xticks(trunks)
            ax.set_xlabel("relays (K)")
            ax.set_ylabel("seconds")
            ax.set_title(prog)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(o.out, "relay_trunks.png"), dpi=110)
    except ImportError:
        print("relay_trunks: no matplotlib here (use /usr/bin/python3): no PNG", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
