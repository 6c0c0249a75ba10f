#!/usr/bin/env python3
"""Self-test of summarize.py and compare.py on hand-written runtests output.

Builds two result directories in a temporary place, in the formats runtests
writes (per-directory summary.junit.xml, summary.xml, summary.tap), merges
them with summarize.py and compares them with compare.py.  Prints one
PASS/FAIL line per check and exits non-zero if any check fails.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402

PASS_CASE = '    <testcase name=" - ./%s %s  " time="%s"></testcase>\n'
FAIL_CASE = ('    <testcase name=" - ./%s %s  " time="%s">\n'
             '      <failure type="TestFailed"\n'
             '               message="not ok  - ./%s %s"><![CDATA[not ok  - ./%s %s\n'
             '  ---\n  Directory: ./%s\n  File: %s\n  Num-procs: %s\n  Timeout: %s\n'
             '  Date: "Sun Nov 22 10:00:00 2026"\n  ...\n'
             "## Test output (expected 'No Errors'):\n%s\n"
             '    ]]></failure>\n    </testcase>\n')
SKIP_CASE = ('    <testcase name=" - ./%s %s  ">\n'
             '      <skipped type="TodoTestSkipped">\n'
             '             message="xfail tests disabled"><![CDATA[ok  - ./%s %s  # SKIP '
             'xfail tests disabled]]></skipped>\n    </testcase>\n')


def write_dir(base, d, cases):
    """cases: list of (prog, np, status, time, output_lines)."""
    os.makedirs(os.path.join(base, "dirs", d), exist_ok=True)
    junit, tap, xml = [], [], []
    fails = skips = 0
    for prog, np, status, time, lines in cases:
        path = "%s/%s" % (d, prog)
        if status == "pass":
            junit.append(PASS_CASE % (path, np, time))
            tap.append("ok  - ./%s %s # time=%s" % (path, np, time))
        elif status == "skip":
            skips += 1
            junit.append(SKIP_CASE % (path, np, path, np))
            tap.append("ok  - ./%s %s  # SKIP xfail tests disabled" % (path, np))
        else:
            fails += 1
            out = "\n".join("## " + l for l in lines)
            junit.append(FAIL_CASE % (path, np, time, path, np, path, np, d, prog, np,
                                      status, out))
            tap.append("not ok  - ./%s %s # time=%s" % (path, np, time))
        xml.append("<MPITEST>\n<NAME>%s</NAME>\n<ARGS></ARGS>\n<NP>%s</NP>\n"
                   "<WORKDIR>./%s</WORKDIR>\n<STATUS>%s</STATUS>\n<TIME>%s</TIME>\n"
                   "</MPITEST>\n" % (prog, np, d, "pass" if status == "pass" else "fail", time))
    with open(os.path.join(base, "dirs", d, "summary.junit.xml"), "w") as f:
        f.write('<testsuites>\n  <testsuite failures="%d"\n             errors="0"\n'
                '             skipped="%d"\n             tests="%d"\n'
                '             date="2026-11-22-10-00"\n             name="summary_junit_xml">\n'
                % (fails, skips, len(cases) - skips))
        f.writelines(junit)
        f.write("    <system-out></system-out>\n    <system-err></system-err>\n"
                "  </testsuite>\n</testsuites>\n")
    with open(os.path.join(base, "dirs", d, "summary.tap"), "w") as f:
        f.write("TAP version 13\n# MPICH test suite results (TAP format)\n"
                "# date 2026-11-22-10-00\n" + "\n".join(tap) + "\n1..%d\n" % len(cases))
    with open(os.path.join(base, "dirs", d, "summary.xml"), "w") as f:
        f.write("<?xml version='1.0' ?>\n<MPITESTRESULTS>\n<DATE>2026-11-22-10-00</DATE>\n"
                + "".join(xml) + "</MPITESTRESULTS>\n")
    with open(os.path.join(base, "dirs", d, "seconds"), "w") as f:
        f.write("12\n")
    with open(os.path.join(base, "dirs", "ORDER"), "a") as f:
        f.write(d + "\n")
    with open(os.path.join(base, "dirs", d, "testlist.used"), "w") as f:
        f.write("# a comment\n")
        for prog, np, status, time, lines in cases:
            f.write("%s %s%s\n" % (prog, np, " xfail=ticket0" if status == "skip" else ""))


failures = 0


def check(name, cond):
    global failures
    print("%s: %s" % ("PASS" if cond else "FAIL", name))
    if not cond:
        failures += 1


def run_compare(ref, cand, *extra):
    p = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), ref, cand,
                        "--ref-name", "ref", "--cand-name", "cand"] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="test_compare.")
    ref = os.path.join(tmp, "ref")
    cand = os.path.join(tmp, "cand")
    same = os.path.join(tmp, "same")
    noerr = ["No Errors"]
    write_dir(ref, "pt2pt", [("a", 2, "pass", "1.0", []), ("b", 4, "pass", "2.0", []),
                             ("c", 2, "120", "115.5", ["Found 1 errors"]),
                             ("x", 1, "skip", "", [])])
    write_dir(ref, "coll", [("d", 4, "pass", "3.0", []), ("e", 8, "pass", "4.0", [])])
    write_dir(cand, "pt2pt", [("a", 2, "pass", "1.0", []),
                              ("b", 4, "120", "125.0", noerr + ["[mpiexec@x] APPLICATION "
                                                                "TIMED OUT, TIMEOUT = 120s"]),
                              ("c", 2, "pass", "1.5", []), ("x", 1, "skip", "", [])])
    write_dir(cand, "coll", [("d", 4, "120", "3.0", ["Found 3 errors"])])
    write_dir(same, "pt2pt", [("a", 2, "pass", "1.0", []), ("b", 4, "pass", "2.0", []),
                              ("c", 2, "120", "20.0", ["Found 1 errors"]),
                              ("x", 1, "skip", "", [])])
    write_dir(same, "coll", [("d", 4, "pass", "3.0", []), ("e", 8, "pass", "4.0", [])])
    for d in (ref, cand, same):
        summarize.write_outputs(d)

    rt = {t.id: t for t in summarize.load_result_dir(ref)}
    ct = {t.id: t for t in summarize.load_result_dir(cand)}
    check("ref: 6 tests parsed with ids dir/prog np", sorted(rt) ==
          ["coll/d 4", "coll/e 8", "pt2pt/a 2", "pt2pt/b 4", "pt2pt/c 2", "pt2pt/x 1"])
    check("ref: failure near its time limit counts as timeout",
          rt["pt2pt/c 2"].status == "timeout")
    check("cand: 'No Errors' then hydra time-out is a teardown hang",
          ct["pt2pt/b 4"].status == "timeout" and "No Errors" in ct["pt2pt/b 4"].note)
    check("cand: quick failure is 'fail'", ct["coll/d 4"].status == "fail")
    check("xfail entry is 'skip'", rt["pt2pt/x 1"].status == "skip")
    with open(os.path.join(ref, "counts.tsv")) as f:
        counts = [l.rstrip("\n").split("\t") for l in f]
    check("counts.tsv pt2pt: total 3, passed 2, failed 0, timed-out 1, skipped 1",
          ["pt2pt", "3", "2", "0", "1", "1", "12"] in counts)
    check("counts.tsv has an 'all' line", counts[-1][:6] == ["all", "5", "4", "0", "1", "1"])
    with open(os.path.join(ref, "summary.tap")) as f:
        tap = f.read()
    check("merged TAP numbers the tests 1..6", "ok 6 - ./coll/e 8" in tap and "1..6" in tap)

    rc, text, err = run_compare(ref, cand)
    check("compare: regressions give exit status 1", rc == 1)
    check("compare: timed-out test listed as regression",
          "`pt2pt/b 4` | pass | **TIMEOUT**" in text and "fails only on cand" in text)
    check("compare: missing test listed as not run", "**not run on cand**" in text)
    check("compare: test failing only on the reference is marked",
          "`pt2pt/c 2` | **TIMEOUT** (time limit) | pass | fails only on ref" in text)
    check("compare: counts row for pt2pt", "| pt2pt | 3 | 2 | 0 | 1 | 3 | 2 | 0 | 1 |" in text)
    check("compare: regressions named on stderr", "coll/e 8" in err and "pt2pt/b 4" in err)

    rc, text, err = run_compare(ref, same)
    check("compare: no regression gives exit status 0", rc == 0)
    check("compare: test failing on both builds is 'both'", "| both |" in text)

    # A candidate that ran only pt2pt, against the full reference.
    part = os.path.join(tmp, "part")
    write_dir(part, "pt2pt", [("a", 2, "pass", "1.0", []), ("b", 4, "pass", "2.0", []),
                              ("c", 2, "pass", "1.0", []), ("x", 1, "skip", "", [])])
    summarize.write_outputs(part)
    rc, text, err = run_compare(ref, part)
    check("compare: a directory the candidate did not run is a regression", rc == 1)
    rc, text, err = run_compare(ref, part, "--dirs", "pt2pt")
    check("compare --dirs: only the listed directories count",
          rc == 0 and "| coll |" not in text and "Directories compared: pt2pt." in text)

    rc, text, err = run_compare(ref, os.path.join(tmp, "missing"))
    check("compare: missing directory gives exit status 2", rc == 2)

    # Retry: the reference's timed-out pt2pt/c passes when run again.
    lines = summarize.retry_lines(ref)
    check("retry-list gives the testlist line of the failed test", lines == ["pt2pt/c 2"])
    retry = os.path.join(tmp, "ref-retry")
    write_dir(retry, "pt2pt", [("c", 2, "pass", "30.0", [])])
    summarize.write_outputs(retry)
    n = summarize.apply_retry(ref, retry)
    rt = {t.id: t for t in summarize.load_result_dir(ref)}
    check("apply-retry marks one test passed on retry",
          n == 1 and rt["pt2pt/c 2"].status == "pass"
          and rt["pt2pt/c 2"].note.startswith("passed on retry (first: timeout"))
    with open(os.path.join(ref, "counts.tsv")) as f:
        counts = [l.rstrip("\n").split("\t") for l in f]
    check("counts.tsv after retry: pt2pt 3 run, 3 passed",
          ["pt2pt", "3", "3", "0", "0", "1", "12"] in counts)
    check("retry-list is empty once everything passed", summarize.retry_lines(ref) == [])

    # Chunked runs (rma.1, rma.2): one directory in the tables, repeated ids
    # numbered across the chunks.
    chunked = os.path.join(tmp, "chunked")
    write_dir(chunked, "rma.1", [("f", 2, "pass", "1.0", []), ("g", 2, "pass", "1.0", [])])
    write_dir(chunked, "rma.2", [("f", 2, "120", "3.0", ["Found 1 errors"])])
    for run in ("rma.1", "rma.2"):
        for name in ("summary.junit.xml", "summary.tap"):
            path = os.path.join(chunked, "dirs", run, name)
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("./" + run + "/", "./rma/"))
    summarize.write_outputs(chunked)
    ct = {t.id: t for t in summarize.load_result_dir(chunked)}
    check("chunked: repeated line numbered across chunks",
          ct.get("rma/f 2 #2") is not None and ct["rma/f 2 #2"].status == "fail")
    with open(os.path.join(chunked, "counts.tsv")) as f:
        counts = [l.rstrip("\n").split("\t") for l in f]
    check("chunked: one counts row for rma, seconds summed",
          ["rma", "3", "2", "1", "0", "0", "24"] in counts and len(counts) == 3)
    check("chunked: retry-list finds the second 'f 2' line",
          summarize.retry_lines(chunked) == ["rma/f 2"])

    shutil.rmtree(tmp, ignore_errors=True)
    print("%d check(s) failed" % failures if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
