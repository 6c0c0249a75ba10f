#!/usr/bin/env python3
"""Choose the CI subset of MPICH's test/mpi suite from a full run's results.

usage: make-ci-subset.py [--max-time S] [--per-dir N] [--out DIR] RESULT_DIR

RESULT_DIR is a result directory of run-testsuite.sh (tests.tsv and
dirs/<dir>/testlist.used), normally the stock baseline.  For every test
directory the subset keeps the testlist lines of tests that

  * passed on the first run (not "passed on retry", not skipped), and
  * took at most --max-time seconds (default 1.0) there;

when more than --per-dir (default 60) qualify, it keeps --per-dir of them
spread evenly over the list order, so that every part of the directory's
list stays represented.  Writes DIR/<dir>/testlist (default
test/mpich/ci-subset) in MPICH's testlist format, with a header saying how
it was made, and prints the number of tests and their run time on the
reference run per directory.  Python 3 standard library only.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402


def spread(items, n):
    """n items of the list, evenly spaced over it (all when n >= len)."""
    if n >= len(items):
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("result_dir")
    ap.add_argument("--max-time", type=float, default=1.0)
    ap.add_argument("--per-dir", type=int, default=60)
    ap.add_argument("--out", default=os.path.join(HERE, "ci-subset"))
    a = ap.parse_args()

    tests = {t.id: t for t in summarize.load_result_dir(a.result_dir)}
    meta = summarize.read_meta(a.result_dir)
    total_n, total_t = 0, 0.0
    for d, lists in summarize.dir_lists(a.result_dir):
        if not lists:
            sys.stderr.write("make-ci-subset: no testlist.used for %s\n" % d)
            return 2
        chosen = []
        for tid, line in summarize.list_ids(d, lists):
            t = tests.get(tid)
            if (t is not None and t.status == "pass" and not t.note
                    and t.time is not None and t.time <= a.max_time):
                chosen.append((line, t.time))
        chosen = spread(chosen, a.per_dir)
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
        secs = sum(t for _, t in chosen)
        with open(os.path.join(a.out, d, "testlist"), "w") as f:
            f.write("# CI subset of test/mpi/%s/testlist, made by test/mpich/make-ci-subset.py\n"
                    "# --max-time %g --per-dir %d, from the run labelled %s on %s (%s, env: %s).\n"
                    "# %d tests, %.0f s of run time there.\n"
                    % (d, a.max_time, a.per_dir, meta.get("label", "?"), meta.get("date", "?"),
                       meta.get("device", "?"), meta.get("env", "").strip(), len(chosen), secs))
            for line, _ in chosen:
                f.write(line + "\n")
        print("%-9s %4d tests %6.1f s" % (d, len(chosen), secs))
        total_n += len(chosen)
        total_t += secs
    print("%-9s %4d tests %6.1f s" % ("all", total_n, total_t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
