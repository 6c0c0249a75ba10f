#!/usr/bin/env python3
"""Compare two runs of MPICH's test/mpi suite made by run-testsuite.sh.

usage: compare.py [-o FILE] [--ref-name N] [--cand-name N] [--command CMD]
                  [--dirs "pt2pt coll ..."] REFERENCE_DIR CANDIDATE_DIR

Reads each result directory (tests.tsv, or summary.junit.xml) and writes a
markdown report: per-directory counts (total / passed / failed / timed-out)
for each build, then every test failing on either build, marked which.
--dirs keeps only the tests of those directories on both sides (a candidate
run over part of the suite, e.g. across two clusters, against a full run).

Exit status: 0 when every test that passed on the reference build also
passed on the candidate; 1 when at least one did not (failed, timed out or
did not run: a regression); 2 on bad usage or unreadable input.
Python 3 standard library only.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402  (sibling module)

FAILED = ("fail", "timeout")


def status_text(t):
    """Cell text for one test on one build."""
    if t is None:
        return "not run"
    if t.status == "pass":
        return "pass"
    if t.status == "skip":
        return "skipped"
    word = "FAIL" if t.status == "fail" else "TIMEOUT"
    return "**%s** (%s)" % (word, t.note) if t.note else "**%s**" % word


def dir_order(*test_lists):
    order = []
    for tests in test_lists:
        for t in tests:
            if t.dir not in order:
                order.append(t.dir)
    return order


def counts_by_dir(tests):
    by_dir = {}
    for t in tests:
        by_dir.setdefault(t.dir, []).append(t)
    return {d: summarize.count(ts) for d, ts in by_dir.items()}


def md_escape(s):
    return s.replace("|", "\\|")


def describe(name, path, meta):
    keys = [("device", "device"), ("prefix", "prefix"), ("date", "date"),
            ("env", "environment"), ("timeout", "default time limit (s)"),
            ("nodes", "nodes"), ("placement", "placement check"),
            ("internode_path", "inter-node path"), ("seconds", "wall time (s)"),
            ("list", "selection")]
    lines = ["- **%s**: `%s`" % (name, path)]
    for k, label in keys:
        v = meta.get(k, "").strip()
        if v:
            lines.append("  - %s: %s" % (label, md_escape(v)))
    return lines


def compare(ref_dir, cand_dir, ref_name, cand_name, command, dirs=None):
    ref = summarize.load_result_dir(ref_dir)
    cand = summarize.load_result_dir(cand_dir)
    if dirs:
        ref = [t for t in ref if t.dir in dirs]
        cand = [t for t in cand if t.dir in dirs]
    ref_meta = summarize.read_meta(ref_dir)
    cand_meta = summarize.read_meta(cand_dir)
    ref_by_id = {t.id: t for t in ref}
    cand_by_id = {t.id: t for t in cand}

    out = ["# MPICH 4.0.2 test/mpi: %s vs %s" % (ref_name, cand_name), ""]
    if command:
        out += ["Regenerate with: `%s`" % command, ""]
    if dirs:
        out += ["Directories compared: %s." % ", ".join(dirs), ""]
    out += ["Builds (reference first):", ""]
    out += describe(ref_name, ref_dir, ref_meta)
    out += describe(cand_name, cand_dir, cand_meta)
    out += ["",
            "Columns: *total* = tests run (list entries not skipped), *passed*, *failed* "
            "(wrong output, non-zero exit, crash or build failure), *timed-out* (ran into "
            "the time limit; not included in *failed*). Tests marked `xfail=` in MPICH's "
            "testlists are skipped and counted apart.", ""]

    # ---- counts table
    rc_ = counts_by_dir(ref)
    cc_ = counts_by_dir(cand)
    zero = {"total": 0, "pass": 0, "fail": 0, "timeout": 0, "skip": 0}
    hdr = ["directory"]
    for n in (ref_name, cand_name):
        hdr += ["%s total" % n, "%s passed" % n, "%s failed" % n, "%s timed-out" % n]
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    tot = {ref_name: dict(zero), cand_name: dict(zero)}
    for d in dir_order(ref, cand):
        row = [d]
        for n, cc in ((ref_name, rc_), (cand_name, cc_)):
            c = cc.get(d)
            if c is None:
                row += ["–"] * 4
                continue
            row += [str(c["total"]), str(c["pass"]), str(c["fail"]), str(c["timeout"])]
            for k in zero:
                tot[n][k] += c[k]
        out.append("| " + " | ".join(row) + " |")
    row = ["**all**"]
    for n in (ref_name, cand_name):
        c = tot[n]
        row += ["**%d**" % c["total"], "**%d**" % c["pass"], "**%d**" % c["fail"],
                "**%d**" % c["timeout"]]
    out.append("| " + " | ".join(row) + " |")
    out += ["", "Skipped (xfail): %s %d, %s %d." % (ref_name, tot[ref_name]["skip"],
                                                    cand_name, tot[cand_name]["skip"]), ""]

    # ---- failing tests
    regressions = []
    rows = []
    ids = [t.id for t in ref] + [t.id for t in cand if t.id not in ref_by_id]
    for tid in ids:
        r = ref_by_id.get(tid)
        c = cand_by_id.get(tid)
        r_bad = r is not None and r.status in FAILED
        c_bad = c is not None and c.status in FAILED
        r_pass = r is not None and r.status == "pass"
        c_pass = c is not None and c.status == "pass"
        if r_pass and not c_pass and not (c is not None and c.status == "skip"):
            mark = "**fails only on %s**" % cand_name if c is not None else \
                "**not run on %s**" % cand_name
            regressions.append(tid)
        elif r_bad and c_bad:
            mark = "both"
        elif r_bad:
            mark = "fails only on %s" % ref_name if c is not None else \
                "fails on %s, not run on %s" % (ref_name, cand_name)
        elif c_bad:
            mark = "fails only on %s (%s: %s)" % (cand_name, ref_name, status_text(r))
        else:
            continue
        rows.append((tid, status_text(r), status_text(c), mark))

    out.append("## Tests failing on either build")
    out.append("")
    if rows:
        out.append("| test (dir/program np args) | %s | %s | which |" % (ref_name, cand_name))
        out.append("|---|---|---|---|")
        for tid, a, b, mark in rows:
            out.append("| `%s` | %s | %s | %s |" % (md_escape(tid), a, b, mark))
    else:
        out.append("None.")
    out.append("")
    flaky = [(tid, ref_by_id.get(tid), cand_by_id.get(tid)) for tid in ids
             if any(t is not None and t.note.startswith("passed on retry")
                    for t in (ref_by_id.get(tid), cand_by_id.get(tid)))]
    if flaky:
        out.append("## Tests that passed only when run again")
        out.append("")
        out.append("Counted as passed above; the first run failed (often a time-out while "
                   "other jobs loaded the machine).")
        out.append("")
        out.append("| test | %s | %s |" % (ref_name, cand_name))
        out.append("|---|---|---|")
        for tid, r, c in flaky:
            cells = [(t.note if t is not None and t.note.startswith("passed on retry")
                      else status_text(t)) for t in (r, c)]
            out.append("| `%s` | %s | %s |" % (md_escape(tid), md_escape(cells[0]),
                                               md_escape(cells[1])))
        out.append("")
    if regressions:
        out.append("**%d test(s) pass on %s but not on %s.**" % (len(regressions), ref_name,
                                                                 cand_name))
    else:
        out.append("Every test that passes on %s also passes on %s." % (ref_name, cand_name))
    out.append("")
    return "\n".join(out), regressions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference")
    ap.add_argument("candidate")
    ap.add_argument("-o", "--output", help="write the markdown here (default stdout)")
    ap.add_argument("--ref-name", help="name of the reference build (default: its label)")
    ap.add_argument("--cand-name", help="name of the candidate build (default: its label)")
    ap.add_argument("--command", help="command line to print as the way to regenerate")
    ap.add_argument("--dirs", help="compare only these directories (space-separated)")
    a = ap.parse_args()
    for d in (a.reference, a.candidate):
        if not os.path.isdir(d):
            sys.stderr.write("compare.py: no such result directory: %s\n" % d)
            return 2
    ref_name = a.ref_name or summarize.read_meta(a.reference).get("label") or "reference"
    cand_name = a.cand_name or summarize.read_meta(a.candidate).get("label") or "candidate"
    if ref_name == cand_name:
        cand_name += " (candidate)"
    try:
        text, regressions = compare(a.reference, a.candidate, ref_name, cand_name, a.command,
                                    a.dirs.split() if a.dirs else None)
    except (OSError, SystemExit, Exception) as e:  # unreadable or malformed input
        sys.stderr.write("compare.py: %s\n" % e)
        return 2
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if regressions:
        sys.stderr.write("compare.py: %d test(s) pass on %s but not on %s:\n" %
                         (len(regressions), ref_name, cand_name))
        for tid in regressions:
            sys.stderr.write("  %s\n" % tid)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
