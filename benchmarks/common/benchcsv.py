"""CSV helpers shared by the ICBC benchmark runners (standard library only).

Raw files are what the benchmark programs print: optional `#` comment lines, one header
line, then rows whose first column is the message size in bytes. A comparison file has
`#` metadata lines, then `size,<series...>,ratio...` rows holding per-size medians.
"""

import csv
import math
import statistics


def read_raw(path, column=1):
    """Return {size: value} from one benchmark output file.

    `column` is the index of the value column (1 = the first after `size`). Raises
    ValueError with the file name and line number on malformed content.
    """
    values = {}
    header = None
    with open(path, newline="") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = [x.strip() for x in line.split(",")]
            if header is None:
                header = fields
                if header[0] != "size" or len(header) <= column:
                    raise ValueError(f"{path}:{lineno}: header {line!r} has no column {column}")
                continue
            if len(fields) != len(header):
                raise ValueError(f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
            try:
                size = int(fields[0])
                value = float(fields[column])
            except ValueError:
                raise ValueError(f"{path}:{lineno}: not numbers: {line!r}") from None
            if size in values:
                raise ValueError(f"{path}:{lineno}: size {size} appears twice")
            values[size] = value
    if header is None:
        raise ValueError(f"{path}: empty (no header)")
    return values


def medians(runs):
    """Per-size median, min, max and count over several {size: value} dicts.

    Returns {size: (median, lo, hi, n)}; a size missing from some runs uses the others.
    """
    sizes = sorted(set().union(*[set(r) for r in runs])) if runs else []
    out = {}
    for s in sizes:
        vals = [r[s] for r in runs if s in r]
        out[s] = (statistics.median(vals), min(vals), max(vals), len(vals))
    return out


def ratio(a, b):
    """a / b, or NaN when b is zero or either side is missing."""
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return float("nan")
    return a / b


def fmt_size(n):
    """1024 -> '1K', 8388608 -> '8M', 0 -> '0'."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def fmt_num(x, digits=3):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.{digits}f}"


def write_comparison(path, meta, labels, table, ratio_names):
    """Write metadata comments and the comparison table.

    meta: list of (key, value); labels: series names; table: list of rows
    (size, [median per label], [ratio per ratio_names]).
    """
    with open(path, "w", newline="") as f:
        for k, v in meta:
            f.write(f"# {k}: {v}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["size"] + list(labels) + list(ratio_names))
        for size, vals, ratios in table:
            w.writerow([size] + [fmt_num(v) for v in vals] + [fmt_num(r, 4) for r in ratios])


def write_rows(path, fields, rows):
    """A runner's CSV: the header FIELDS, then ROWS (dicts by field)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
