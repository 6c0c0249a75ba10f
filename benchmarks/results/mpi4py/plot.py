#!/usr/bin/python3
"""Bars of mpi4py suite runs from CSV files (test/mpi/mpi4py_suite.py --csv,
plus a 'note' column): seconds per run, one bar per run, grouped by layout
and policy, failed runs hatched, the mean one-cluster time as a line.

    benchmarks/results/mpi4py/plot.py OUT.png RUNS.csv [RUNS.csv ...]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"-": "#777777", "aggregate": "#1f77b4", "static": "#ff7f0e", "alltoall": "#2ca02c",
          "tcp": "#d62728"}


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = []
    for path in files:
        with open(path) as f:
            rows += list(csv.DictReader(f))
    rows.sort(key=lambda r: (r["layout"] != "one", r["policy"]))
    one = [float(r["seconds"]) for r in rows if r["layout"] == "one" and r["passed"] == "1"]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(rows)), 4))
    for i, r in enumerate(rows):
        ok = r["passed"] == "1"
        ax.bar(i, float(r["seconds"]), color=COLORS.get(r["policy"], "#999999"),
               hatch="" if ok else "//", edgecolor="black" if not ok else None)
    handles = [Patch(color=c, label="one cluster" if pol == "-" else pol)
               for pol, c in COLORS.items() if any(r["policy"] == pol for r in rows)]
    if one:
        handles.append(ax.axhline(sum(one) / len(one), color="#777777", linestyle="--",
                                  linewidth=1, label=f"one cluster, mean {sum(one) / len(one):.0f} s"))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['policy']} {r['run']}" + (f" ({r['build']})" if r.get("build") else "")
                        for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("seconds per run (2,071 tests, 4 ranks)")
    ax.set_title("mpi4py's test suite: one cluster vs two clusters (hatched: failed)")
    ax.legend(handles=handles, fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
