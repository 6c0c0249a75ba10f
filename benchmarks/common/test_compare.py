#!/usr/bin/python3
"""Self-test of benchcsv.py and compare.py on synthetic benchmark output.

Runs without MPI. Prints one PASS/FAIL line per check and a closing
'N passed, N failed' line; exit status 1 if any check failed.
Run: /usr/bin/python3 benchmarks/common/test_compare.py
"""

import io
import math
import os
import sys
import tempfile
import contextlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchcsv  # noqa: E402
import compare  # noqa: E402

RESULTS = []


def check(name, cond, detail=""):
    RESULTS.append(bool(cond))
    print(f"{'PASS' if cond else 'FAIL'}: {name}{'' if cond else ' -- ' + detail}")


def write(d, name, text):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def run_compare(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = compare.main(argv)
    return rc, out.getvalue()


def read_table(path):
    meta, rows, header = [], [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                meta.append(line)
            elif header is None:
                header = line.split(",")
            else:
                rows.append(line.split(","))
    return meta, header, rows


def main():
    with tempfile.TemporaryDirectory(prefix="icbc-compare-test-") as d:
        return run_checks(d)


def run_checks(d):

    # read_raw: comments, header, values; errors name file and line
    p = write(d, "ok.csv", "# comment\nsize,latency_us\n1,2.5\n2,3.5\n")
    check("read_raw parses rows after # comments", benchcsv.read_raw(p) == {1: 2.5, 2: 3.5})
    bad = write(d, "bad.csv", "size,latency_us\n1,2.5\n2,x\n")
    try:
        benchcsv.read_raw(bad)
        check("read_raw rejects a non-number", False, "no error raised")
    except ValueError as e:
        check("read_raw rejects a non-number with file:line", "bad.csv:3" in str(e), str(e))
    dup = write(d, "dup.csv", "size,v\n1,1\n1,2\n")
    try:
        benchcsv.read_raw(dup)
        check("read_raw rejects a repeated size", False, "no error raised")
    except ValueError as e:
        check("read_raw rejects a repeated size", "twice" in str(e), str(e))
    empty = write(d, "empty.csv", "# only a comment\n")
    try:
        benchcsv.read_raw(empty)
        check("read_raw rejects a file without header", False, "no error raised")
    except ValueError as e:
        check("read_raw rejects a file without header", "empty" in str(e), str(e))

    # medians over reps, ratio edge cases, size formatting
    m = benchcsv.medians([{1: 1.0, 2: 10.0}, {1: 3.0, 2: 30.0}, {1: 2.0}])
    check("medians: odd count", m[1] == (2.0, 1.0, 3.0, 3), str(m[1]))
    check("medians: size missing in one rep uses the others", m[2] == (20.0, 10.0, 30.0, 2),
          str(m[2]))
    check("ratio: zero denominator is NaN", math.isnan(benchcsv.ratio(1.0, 0.0)))
    check("fmt_size", [benchcsv.fmt_size(x) for x in (0, 3, 1024, 65536, 8 << 20)]
          == ["0", "3", "1K", "64K", "8M"])

    # latency comparison: median of 3 reps per side, ratio = A/B, target <= 1.10
    a = [write(d, f"lat_a{i}.csv", f"size,latency_us\n1,{v1}\n1024,{v2}\n")
         for i, (v1, v2) in enumerate([(10, 20), (11, 21), (100, 22)])]
    a_lat = a
    b = [write(d, f"lat_b{i}.csv", f"size,latency_us\n1,{v1}\n1024,{v2}\n")
         for i, (v1, v2) in enumerate([(10, 20), (10, 20), (10, 20)])]
    out = os.path.join(d, "lat.csv")
    rc, text = run_compare(["--name", "latency", "--kind", "lower", "--unit", "us",
                            "--series", "icbc", *a, "--series", "stock", *b, "--target", "1.10",
                            "--meta", "command=x y", "--out", out])
    meta, header, rows = read_table(out)
    check("compare exits 0", rc == 0, text)
    check("comparison header is size,icbc,stock,ratio",
          header == ["size", "icbc", "stock", "ratio"], str(header))
    check("median, not mean, per size (outlier rep ignored)", rows[0][1] == "11.000", str(rows))
    check("ratio column = icbc/stock", rows[0][3] == "1.1000" and rows[1][3] == "1.0500", str(rows))
    check("metadata lines carry the command", "# command: x y" in meta, str(meta))
    check("latency verdict PASS at ratio exactly 1.10",
          "VERDICT latency: icbc/stock <= 1.1 for all sizes: PASS" in text, text)

    # a miss is reported with its size
    b2 = [write(d, "lat_b_fast.csv", "size,latency_us\n1,5\n1024,20\n")]
    rc, text = run_compare(["--name", "latency", "--kind", "lower", "--series", "icbc", *a,
                            "--series", "stock", *b2, "--target", "1.10",
                            "--out", os.path.join(d, "lat2.csv")])
    check("latency verdict FAIL names the size", "FAIL (1 of 2 sizes miss: 1=2.200" in text, text)

    # without --target: a plain comparison, no verdict, plot still drawn
    png0 = os.path.join(d, "plain.png")
    rc, text = run_compare(["--name", "latency", "--kind", "lower", "--series", "icbc", *a_lat,
                            "--series", "stock", *b2, "--out", os.path.join(d, "plain.csv"),
                            "--png", png0])
    check("no --target: exits 0 without a VERDICT line, plot written",
          rc == 0 and "VERDICT" not in text and os.path.getsize(png0) > 0, text)

    # bandwidth: target >= 0.95 only from 64K; smaller sizes do not count
    a = [write(d, "bw_a.csv", "size,bandwidth_mbps\n1,1\n65536,96\n1048576,100\n")]
    b = [write(d, "bw_b.csv", "size,bandwidth_mbps\n1,10\n65536,100\n1048576,100\n")]
    png = os.path.join(d, "bw.png")
    rc, text = run_compare(["--name", "bandwidth", "--kind", "higher", "--unit", "MB/s",
                            "--series", "icbc", *a, "--series", "stock", *b,
                            "--target", "0.95", "--target-from", "64K",
                            "--out", os.path.join(d, "bw.csv"), "--png", png,
                            "--footer", "test"])
    check("bandwidth verdict ignores sizes below 64K",
          "for sizes 64K and up: PASS (2 sizes; worst 0.960 at 64K)" in text, text)
    check("bandwidth plot written", os.path.getsize(png) > 10000 if os.path.exists(png) else False)
    a = [write(d, "bw_a2.csv", "size,bandwidth_mbps\n65536,90\n")]
    rc, text = run_compare(["--name", "bandwidth", "--kind", "higher", "--series", "icbc", *a,
                            "--series", "stock", *b, "--target", "0.95", "--target-from", "64K",
                            "--out", os.path.join(d, "bw2.csv")])
    check("bandwidth verdict FAIL below 0.95", "FAIL (1 of 1 sizes miss: 64K=0.900" in text, text)

    # bad input: exit 2 with the file named
    rc, text = run_compare(["--name", "x", "--kind", "lower", "--series", "a", bad,
                            "--series", "b", p, "--target", "1", "--out", os.path.join(d, "x.csv")])
    check("malformed input exits 2 naming the file", rc == 2 and "bad.csv:3" in text, text)

    passed = sum(RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
