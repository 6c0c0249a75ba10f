#!/usr/bin/python3
"""Striped bandwidth against its ceiling: one row per router count R.

The ceiling of R routers per cluster is min(R x NIC rate, WAN rate): every routed byte
leaves its cluster through a router's external NIC and then crosses the WAN. For each R
the median bandwidth over the repetitions (icbc_bw output files at one message size) is
compared with the ceiling; the target is ratio >= X for every R.

Example:
  stripe.py --nic-rate 100mbit --wan-rate 400mbit --size 8M --target 0.92 \\
      --series 1 raw/stripe_R1_rep*.csv --series 2 raw/stripe_R2_rep*.csv \\
      --out routed_stripe.csv --png routed_stripe.png

Rates: 100mbit, 1gbit, 1.5gbit, 50000kbit, 10mbps (bytes per second), 0 (unlimited).
Bandwidths are MB/s (10^6 bytes per second) as the benchmarks print them. The line rate
counts frame bytes (as tbf does), so TCP payload reaches at most about 1448/1514 = 0.956
of it with 1500-byte frames; the table shows that goodput ceiling too.

Exit status: 0 when the table was written (whatever the verdict), 2 on bad input.
"""

import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import benchcsv  # noqa: E402
from compare import parse_size  # noqa: E402

GOODPUT = 1448.0 / 1514.0  # TCP payload per Ethernet frame byte (MSS 1448 with timestamps)


def parse_rate(text):
    """Bits per second from an icbc-testbed rate; 0 means unlimited (returned as None)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(kbit|mbit|gbit|bit|kbps|mbps|gbps|bps)?",
                     text.strip().lower())
    if not m:
        raise ValueError(f"rate {text!r}: expected e.g. 100mbit, 1.5gbit, 10mbps or 0")
    v = float(m.group(1))
    unit = m.group(2) or "bit"
    mult = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
            "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}[unit]
    return None if v == 0 else v * mult


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nic-rate", required=True)
    p.add_argument("--wan-rate", required=True)
    p.add_argument("--size", required=True, help="message size of the rows to use, e.g. 8M")
    p.add_argument("--target", type=float, default=0.92)
    p.add_argument("--series", nargs="+", action="append", required=True, metavar="R FILE",
                   help="router count then the icbc_bw output files of its repetitions")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", required=True)
    p.add_argument("--png")
    p.add_argument("--title")
    p.add_argument("--footer")
    args = p.parse_args(argv)
    try:
        nic = parse_rate(args.nic_rate)
        wan = parse_rate(args.wan_rate)
        size = parse_size(args.size)
        rows = []
        for s in args.series:
            if len(s) < 2:
                raise ValueError(f"--series {s[0]}: needs a router count and files")
            r = int(s[0])
            vals = []
            for f in s[1:]:
                data = benchcsv.read_raw(f)
                if size not in data:
                    raise ValueError(f"{f}: no row for size {size}")
                vals.append(data[size])
            caps = [x for x in ((nic * r) if nic else None, wan) if x is not None]
            ceil_mbs = min(caps) / 8e6 if caps else float("nan")
            med = statistics.median(vals)
            rows.append((r, med, min(vals), max(vals), len(vals), ceil_mbs,
                         med / ceil_mbs if caps else float("nan")))
    except (ValueError, OSError) as e:
        print(f"stripe.py: {e}", file=sys.stderr)
        return 2
    rows.sort()

    lines = []
    hdr = (f"{'routers':>7}  {'MB/s':>8}  {'min':>8}  {'max':>8}  {'reps':>4}  "
           f"{'ceiling':>8}  {'goodput':>8}  {'ratio':>6}  target")
    lines.append(hdr)
    failing = []
    for r, med, lo, hi, n, ceil_mbs, ratio in rows:
        ok = ratio == ratio and round(ratio, 4) >= args.target
        if not ok:
            failing.append(f"R={r}: {ratio:.3f}")
        lines.append(f"{r:>7}  {med:8.2f}  {lo:8.2f}  {hi:8.2f}  {n:>4}  {ceil_mbs:8.2f}  "
                     f"{ceil_mbs * GOODPUT:8.2f}  {ratio:6.3f}  {'ok' if ok else 'MISS'}")
    rng = ", ".join(str(r[0]) for r in rows)
    head = (f"VERDICT striped bandwidth at {benchcsv.fmt_size(size)}: "
            f"bw / min(R x NIC, WAN) >= {args.target:g} for R = {rng}:")
    verdict = f"{head} FAIL ({'; '.join(failing)})" if failing else f"{head} PASS"
    lines.append(verdict)
    print("\n".join(lines))

    with open(args.out, "w") as f:
        for m in args.meta:
            k, _, v = m.partition("=")
            f.write(f"# {k.strip()}: {v.strip()}\n")
        f.write(f"# values: bandwidth in MB/s (10^6 B/s) at {size} bytes, median over reps; "
                f"ceiling = min(R x NIC, WAN) line rate; goodput = ceiling x 1448/1514\n")
        f.write(f"# verdict: {verdict[len('VERDICT '):]}\n")
        f.write("routers,bandwidth_mbps,min_mbps,max_mbps,reps,ceiling_mbps,goodput_mbps,ratio\n")
        for r, med, lo, hi, n, ceil_mbs, ratio in rows:
            f.write(f"{r},{med:.3f},{lo:.3f},{hi:.3f},{n},{ceil_mbs:.3f},"
                    f"{ceil_mbs * GOODPUT:.3f},{ratio:.4f}\n")

    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = [str(r[0]) for r in rows]
        ax.bar(xs, [r[1] for r in rows], color="tab:blue", label="aggregate (median)",
               yerr=[[r[1] - r[2] for r in rows], [r[3] - r[1] for r in rows]], capsize=4)
        ax.plot(xs, [r[5] for r in rows], "k_", ms=40, mew=2, label="min(R x NIC, WAN)")
        ax.plot(xs, [r[5] * args.target for r in rows], "r_", ms=40, mew=1.5,
                label=f"target {args.target:g} x ceiling")
        for i, r in enumerate(rows):
            ax.annotate(f"{r[1]:.1f} MB/s\nratio {r[6]:.3f}", (i, r[1] / 2), ha="center",
                        va="center", fontsize=8, color="white")
        ax.set_xlabel("routers per cluster (R)")
        ax.set_ylabel("bandwidth (MB/s)")
        ax.set_title(args.title or f"striped bandwidth at {benchcsv.fmt_size(size)}")
        ax.legend(fontsize="small", markerscale=0.4, loc="upper left")
        ax.grid(True, axis="y", alpha=0.3)
        bottom = 0.0
        if args.footer:
            import textwrap
            text = "\n".join(textwrap.wrap(args.footer, 130))
            bottom = 0.02 * (text.count("\n") + 1) + 0.01
            fig.text(0.01, 0.005, text, fontsize=6.5, color="dimgray", ha="left", va="bottom")
        fig.tight_layout(rect=(0, bottom, 1, 1))
        fig.savefig(args.png, dpi=110)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
