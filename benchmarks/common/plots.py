"""What the benchmarks' figures share: matplotlib without a display, and
bars of several builds side by side per group."""
import sys


def pyplot(png):
    """matplotlib.pyplot on the Agg backend, or None (said on stderr: PNG
    is not written) when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib missing: no {png}", file=sys.stderr)
        return None
    return plt


def grouped_bars(ax, groups, series, errors=None):
    """One bar per series in each group, side by side. SERIES: {label:
    [value per group]}; ERRORS: {label: [[below...], [above...]]}."""
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        ax.bar([k + i * width for k in range(len(groups))], values, width, label=label,
               yerr=(errors or {}).get(label), capsize=3 if errors else 0)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=8)
