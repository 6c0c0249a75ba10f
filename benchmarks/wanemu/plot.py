#!/usr/bin/python3
"""Plot benchmarks/wanemu results: goodput and emulator CPU against the WAN rate."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path, out):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    rate = [float(r["rate_mbit"]) for r in rows]
    good = [float(r["goodput_mbit"]) for r in rows]
    cpu = [float(r["emu_cpu_pct"]) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(rate, rate, "k:", linewidth=0.8, label="WAN rate")
    ax.plot(rate, good, "o-", label="TCP goodput through icbc-wanemu")
    ax.set_xlabel("configured WAN rate (Mbit/s), 10 ms one-way delay")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(rate, cpu, "s--", color="tab:red", label="emulator CPU (% of one core)")
    ax2.set_ylabel("emulator CPU (% of one core)")
    ax2.set_ylim(0, max(100, max(cpu) * 1.1))
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [l.get_label() for l in lines], loc="upper left")
    ax.set_title("icbc-wanemu throughput and CPU use")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
