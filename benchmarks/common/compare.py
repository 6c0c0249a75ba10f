#!/usr/bin/python3
"""Side-by-side comparison of benchmark series: per-size medians, ratios, verdict, plot.

Each series is a label and the raw CSV files of its repetitions (the output of one
benchmark program per file). For every size the median over repetitions is taken; the
ratio of every other series to the reference series (default: the second) is computed; an
optional target (ratio <= X for lower-is-better metrics, >= X for higher-is-better) is checked
over a size range; the result is written as CSV (with `#` metadata lines), printed as a
table with one VERDICT line, and drawn as a PNG (values on log-log axes, ratio panel
with the target line).

Example:
  compare.py --name latency --kind lower --unit us \\
      --series icbc raw/lat_icbc_rep*.csv --series stock raw/lat_stock_rep*.csv \\
      --target 1.10 --out p2p_latency.csv --png p2p_latency.png

Exit status: 0 when the comparison was written (whatever the verdict), 2 on bad input.
Plotting needs matplotlib (Debian: python3-matplotlib, run with /usr/bin/python3).
"""

import argparse
import math
import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchcsv  # noqa: E402


def parse_size(s):
    s = s.strip()
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if s.upper().endswith(suffix):
            mult, s = m, s[:-1]
            break
    return int(s) * mult


def build(args):
    labels = [lab for lab, _ in args.series]
    if len(set(labels)) != len(labels):
        raise ValueError(f"series labels must differ: {labels}")
    if len(labels) < 2:
        raise ValueError("need at least two --series")
    ref = args.ref or labels[1]
    if ref not in labels:
        raise ValueError(f"--ref {ref} is not a series label ({', '.join(labels)})")
    stats = {}
    for lab, files in args.series:
        runs = [benchcsv.read_raw(f, args.column) for f in files]
        if not runs:
            raise ValueError(f"series {lab}: no files")
        stats[lab] = benchcsv.medians(runs)
    others = [lab for lab in labels if lab != ref]
    ratio_names = ["ratio"] if len(others) == 1 else [f"ratio_{lab}" for lab in others]
    sizes = sorted(set().union(*[set(stats[lab]) for lab in labels]))
    table = []
    for s in sizes:
        vals = [stats[lab][s][0] if s in stats[lab] else float("nan") for lab in labels]
        refv = stats[ref][s][0] if s in stats[ref] else None
        ratios = [benchcsv.ratio(stats[o][s][0] if s in stats[o] else None, refv) for o in others]
        table.append((s, vals, ratios))
    return labels, ref, others, ratio_names, stats, table


def in_range(size, args):
    return size >= args.target_from and (args.target_to is None or size <= args.target_to)


def verdict(args, ref, others, table):
    """One VERDICT line per non-reference series (none without --target). Returns the lines."""
    lines = []
    if args.target is None:
        return lines
    op = "<=" if args.kind == "lower" else ">="
    if args.target_from <= 0 and args.target_to is None:
        rng = "all sizes"
    else:
        rng = f"sizes {benchcsv.fmt_size(args.target_from)}"
        rng += f"..{benchcsv.fmt_size(args.target_to)}" if args.target_to is not None else " and up"
    for i, lab in enumerate(others):
        checked, failing, worst = 0, [], None
        for size, _, ratios in table:
            r = ratios[i]
            if not in_range(size, args) or math.isnan(r):
                continue
            checked += 1
            if not target_ok(args, r):
                failing.append((size, r))
            bad = (worst is None or (r > worst[1] if args.kind == "lower" else r < worst[1]))
            if bad:
                worst = (size, r)
        head = f"VERDICT {args.name}: {lab}/{ref} {op} {args.target:g} for {rng}:"
        if checked == 0:
            lines.append(f"{head} NO DATA (no size in range)")
            continue
        w = f"worst {worst[1]:.3f} at {benchcsv.fmt_size(worst[0])}"
        if failing:
            lst = ", ".join(f"{benchcsv.fmt_size(s)}={r:.3f}" for s, r in failing)
            lines.append(f"{head} FAIL ({len(failing)} of {checked} sizes miss: {lst}; {w})")
        else:
            lines.append(f"{head} PASS ({checked} sizes; {w})")
    return lines


def target_ok(args, r):
    if args.target is None:
        return True
    r = round(r, 4)  # the precision written to the CSV
    return r <= args.target if args.kind == "lower" else r >= args.target


def print_table(args, labels, ratio_names, stats, table, out):
    unit = f" ({args.unit})" if args.unit else ""
    cols = ["size"] + [f"{lab}{unit}" for lab in labels] + ratio_names + ["reps", "target"]
    widths = [max(8, len(c)) for c in cols]
    out.write("  ".join(c.rjust(w) for c, w in zip(cols, widths)) + "\n")
    for size, vals, ratios in table:
        reps = "/".join(str(stats[lab][size][3]) if size in stats[lab] else "0" for lab in labels)
        if args.target is None or not in_range(size, args) or all(math.isnan(r) for r in ratios):
            mark = "-"
        else:
            mark = "ok" if all(math.isnan(r) or target_ok(args, r) for r in ratios) else "MISS"
        cells = [benchcsv.fmt_size(size)] + [benchcsv.fmt_num(v, 2) for v in vals]
        cells += [benchcsv.fmt_num(r, 3) for r in ratios] + [reps, mark]
        out.write("  ".join(c.rjust(w) for c, w in zip(cells, widths)) + "\n")


def plot(args, labels, ref, others, stats, table, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, FixedLocator

    fig, (ax, axr) = plt.subplots(2, 1, sharex=True, figsize=(8, 7),
                                  gridspec_kw={"height_ratios": [2, 1]})
    sizes = [s for s, _, _ in table if s > 0]
    for lab in labels:
        xs = [s for s in sizes if s in stats[lab] and stats[lab][s][0] > 0]
        med = [stats[lab][s][0] for s in xs]
        lo = [stats[lab][s][0] - stats[lab][s][1] for s in xs]
        hi = [stats[lab][s][2] - stats[lab][s][0] for s in xs]
        ax.errorbar(xs, med, yerr=[lo, hi], marker="o", ms=3, capsize=2, label=lab)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel(f"{args.name} ({args.unit})" if args.unit else args.name)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="median, bars: min..max of reps")
    ax.set_title(args.title or f"{args.name}: {' vs '.join(labels)}")

    # Ratio panel on a log scale, bounded to [1/16, 16]: points beyond are drawn on the
    # border as triangles so one wild size does not flatten the rest.
    lo_lim, hi_lim = 1.0 / 16, 16.0
    all_r = []
    for i, lab in enumerate(others):
        pts = [(s, r[i]) for s, _, r in table if s > 0 and not math.isnan(r[i]) and r[i] > 0]
        xs = [s for s, _ in pts]
        ys = [min(max(r, lo_lim), hi_lim) for _, r in pts]
        all_r += ys
        line, = axr.plot(xs, ys, marker="o", ms=3, label=f"{lab}/{ref}")
        for s, r in pts:
            if r > hi_lim or r < lo_lim:
                axr.plot([s], [hi_lim if r > hi_lim else lo_lim], marker="^" if r > hi_lim else "v",
                         ms=8, color=line.get_color())
    lo_x = max(args.target_from, 1)
    hi_x = args.target_to if args.target_to is not None else (max(sizes) if sizes else 1)
    op = "<=" if args.kind == "lower" else ">="
    where = "all sizes" if args.target_from <= 1 else f"{benchcsv.fmt_size(lo_x)} and up"
    if args.target is not None:
        axr.hlines(args.target, lo_x, hi_x, colors="red", linestyles="--",
                   label=f"target {op} {args.target:g} ({where})")
    tgt = [] if args.target is None else [args.target]
    axr.set_yscale("log", base=2)
    ymin = min(all_r + [0.5] + tgt) / 1.15
    ymax = max(all_r + [2.0] + tgt) * 1.15
    axr.set_ylim(max(ymin, lo_lim / 1.2), min(ymax, hi_lim * 1.2))
    axr.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axr.axhline(1.0, color="gray", lw=0.8)
    if args.target is not None and sizes and args.target_from > min(sizes):
        axr.axvspan(min(sizes), args.target_from, color="gray", alpha=0.12)
    axr.set_xscale("log", base=2)
    axr.set_ylabel("ratio")
    axr.set_xlabel("message size (bytes)")
    axr.grid(True, which="both", alpha=0.3)
    axr.legend(fontsize="small")
    ticks = [s for s in sizes if (s.bit_length() - 1) % 2 == 0] or sizes
    axr.xaxis.set_major_locator(FixedLocator(ticks))
    axr.xaxis.set_major_formatter(FuncFormatter(lambda v, _: benchcsv.fmt_size(int(round(v)))))
    bottom = 0.0
    if args.footer:
        text = "\n".join(textwrap.wrap(args.footer, 150))
        bottom = 0.016 * (text.count("\n") + 1) + 0.01
        fig.text(0.01, 0.005, text, fontsize=6.5, color="dimgray", ha="left", va="bottom")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="metric name, e.g. latency")
    p.add_argument("--kind", choices=("lower", "higher"), required=True,
                   help="lower: smaller is better (target is a maximum ratio); "
                        "higher: the opposite")
    p.add_argument("--unit", default="", help="unit of the values, for labels")
    p.add_argument("--series", nargs="+", action="append", required=True, metavar="LABEL FILE",
                   help="a label then the raw CSV files of its repetitions (repeat per series)")
    p.add_argument("--ref", help="label of the reference series (default: the second)")
    p.add_argument("--column", type=int, default=1, help="value column index (default 1)")
    p.add_argument("--target", type=float, default=None,
                   help="ratio threshold (default: none, no verdict: a plain comparison)")
    p.add_argument("--target-from", type=parse_size, default=0, help="smallest size checked")
    p.add_argument("--target-to", type=parse_size, default=None, help="largest size checked")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="metadata line for the CSV (repeatable)")
    p.add_argument("--out", required=True, help="comparison CSV to write")
    p.add_argument("--png", help="plot to write")
    p.add_argument("--title", help="plot title")
    p.add_argument("--footer", help="small text at the bottom of the plot")
    args = p.parse_args(argv)
    series = []
    for s in args.series:
        if len(s) < 2:
            p.error(f"--series {s[0]}: needs a label and at least one file")
        series.append((s[0], s[1:]))
    args.series = series
    try:
        labels, ref, others, ratio_names, stats, table = build(args)
    except (ValueError, OSError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    meta = []
    for m in args.meta:
        k, _, v = m.partition("=")
        meta.append((k.strip(), v.strip()))
    vlines = verdict(args, ref, others, table)
    meta += [("reps", ", ".join(f"{lab}={len(f)}" for lab, f in args.series)),
             ("values", f"{args.name} in {args.unit or 'units'}, median over reps; "
                        f"ratio = series / {ref}")]
    meta += [("verdict", v[len("VERDICT "):]) for v in vlines]
    benchcsv.write_comparison(args.out, meta, labels, table, ratio_names)
    print_table(args, labels, ratio_names, stats, table, sys.stdout)
    for v in vlines:
        print(v)
    if args.png:
        plot(args, labels, ref, others, stats, table, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
