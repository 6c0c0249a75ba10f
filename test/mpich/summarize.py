#!/usr/bin/env python3
"""Summaries of MPICH test/mpi runs made by run-testsuite.sh (stdlib only).

run-testsuite.sh runs MPICH's `runtests` once per test directory, each run
writing DIR/dirs/<dir>/summary.{xml,tap,junit.xml}.  This module

  * parses a runtests JUnit file into one record per test
    (id, directory, status, time, timeout, note);
  * merges the per-directory files into DIR/summary.xml, DIR/summary.tap
    and DIR/summary.junit.xml (the formats runtests itself writes);
  * writes DIR/counts.tsv (per directory: total, passed, failed, timed-out,
    skipped, wall seconds) and DIR/tests.tsv (one line per test).

Status of a test:
  pass     runtests reported it passed;
  fail     runtests reported it failed, and it did not run into its time limit;
  timeout  it failed after running for at least its time limit minus 10 s
           (the rule runtests uses to count time-outs), or hydra reported
           "APPLICATION TIMED OUT";
  skip     runtests skipped it (tests marked xfail= in the testlist).

A failed test can be run again (run-testsuite.sh --retries N): the runner
asks for the testlist lines of the failed tests (retry-list), runs them into
OUTDIR/retryN, and apply-retry marks the tests that passed on the second run
as passed, with the note "passed on retry (first: ...)".  The summary.*
files keep the first run as runtests wrote it; tests.tsv and counts.tsv hold
the final status.

Usage:
  summarize.py merge OUTDIR            merge OUTDIR/dirs/* into OUTDIR
  summarize.py counts OUTDIR           print the counts table of OUTDIR
  summarize.py retry-list OUTDIR       print "dir/prog np key=value..." lines of
                                       the failed tests of OUTDIR
  summarize.py apply-retry OUTDIR RDIR take passes in RDIR (a merged retry
                                       run) into OUTDIR/tests.tsv, counts.tsv
"""

import os
import re
import sys
import xml.etree.ElementTree as ET

STATUSES = ("pass", "fail", "timeout", "skip")


class Test:
    """One test run as recorded by runtests."""

    def __init__(self, tid, directory, status, time, timeout, note, output):
        self.id = tid            # e.g. "pt2pt/sendrecv2 2 MPIR_CVAR_ASYNC_PROGRESS=1 ..."
        self.dir = directory     # top-level test directory, e.g. "pt2pt"
        self.status = status     # one of STATUSES
        self.time = time         # seconds (float) or None
        self.timeout = timeout   # seconds (int) or None
        self.note = note         # short reason, "" when none
        self.output = output     # captured output of a failing test ("" otherwise)


def _test_id(name):
    """Test id from a runtests JUnit testcase name ' - ./dir/prog np args env'."""
    name = re.sub(r"^\s*\d*\s*-\s*", "", name)
    name = re.sub(r"^\./", "", name)
    return " ".join(name.split())


def _classify_failure(text, time, timeout):
    """Return (status, note) of a failed test from its JUnit failure text."""
    output = "\n".join(line[3:] if line.startswith("## ") else line
                       for line in text.splitlines() if line.startswith("##"))
    no_errors = re.search(r"^\s*No [Ee]rrors\s*$", output, re.M) is not None
    timed_out = "APPLICATION TIMED OUT" in output
    if timeout and time is not None and timeout > 0 and time >= timeout - 10:
        timed_out = True
    if "Failed to build" in output:
        return "fail", "build failed", output
    if timed_out:
        if no_errors:
            return "timeout", "hang after 'No Errors' (teardown)", output
        return "timeout", "time limit", output
    if re.search(r"exited with signal|signal \d+|Segmentation fault|core dumped", output):
        return "fail", "signal", output
    if no_errors:
        return "fail", "extra output or non-zero exit", output
    return "fail", "no 'No Errors'", output


def parse_junit(path):
    """List of Test records from one runtests JUnit file."""
    text = _read(path)
    # Test output lands in the file verbatim: drop characters XML does not allow.
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "?", text)
    tree = ET.ElementTree(ET.fromstring(text))
    tests = []
    seen = {}
    for case in tree.iter("testcase"):
        tid = _test_id(case.get("name", ""))
        seen[tid] = seen.get(tid, 0) + 1
        if seen[tid] > 1:
            tid = "%s #%d" % (tid, seen[tid])
        directory = tid.split("/", 1)[0] if "/" in tid else "."
        time = case.get("time")
        try:
            time = float(time) if time not in (None, "") else None
        except ValueError:
            time = None
        status, note, timeout, output = "pass", "", None, ""
        failure = case.find("failure")
        skipped = case.find("skipped")
        if failure is not None:
            text = failure.text or ""
            m = re.search(r"^\s*Timeout:\s*(\d+)", text, re.M)
            timeout = int(m.group(1)) if m else None
            status, note, output = _classify_failure(text, time, timeout)
        elif skipped is not None:
            status = "skip"
            text = (skipped.text or "") + " " + (skipped.get("message") or "")
            m = re.search(r"# (?:SKIP|TODO) (.*?)(?:\]\]>|$)", text.strip())
            note = m.group(1).strip() if m else "skipped"
            if len(note) > 60:
                note = note[:57] + "..."
        tests.append(Test(tid, directory, status, time, timeout, note, output))
    return tests


def count(tests):
    """Counts of one list of tests: dict status -> n, plus 'total' (run tests)."""
    c = {s: 0 for s in STATUSES}
    for t in tests:
        c[t.status] += 1
    c["total"] = c["pass"] + c["fail"] + c["timeout"]
    return c


def read_tests_tsv(path):
    """Test records from a tests.tsv written by write_outputs()."""
    tests = []
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            time = float(row["time"]) if row.get("time") else None
            timeout = int(row["timeout"]) if row.get("timeout") else None
            tests.append(Test(row["test"], row["dir"], row["status"], time, timeout,
                              row.get("note", ""), ""))
    return tests


def load_result_dir(path):
    """Tests of a result directory: tests.tsv if present, else its JUnit file(s)."""
    tsv = os.path.join(path, "tests.tsv")
    if os.path.exists(tsv):
        return read_tests_tsv(tsv)
    junit = os.path.join(path, "summary.junit.xml")
    if os.path.exists(junit):
        return parse_junit(junit)
    tests = []
    for d in _dir_runs(path):
        tests += parse_junit(os.path.join(path, "dirs", d, "summary.junit.xml"))
    if not tests:
        raise SystemExit("summarize: no tests.tsv or summary.junit.xml in %s" % path)
    return tests


def read_meta(path):
    """key=value lines of DIR/run-info.txt (empty dict when missing)."""
    meta = {}
    try:
        with open(os.path.join(path, "run-info.txt")) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.rstrip("\n").split("=", 1)
                    meta.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return meta


def _dir_runs(outdir):
    """Per-directory run subdirectories of OUTDIR/dirs, in the order they ran."""
    base = os.path.join(outdir, "dirs")
    if not os.path.isdir(base):
        return []
    order = []
    order_file = os.path.join(outdir, "dirs", "ORDER")
    if os.path.exists(order_file):
        with open(order_file) as f:
            order = [l.strip() for l in f if l.strip()]
    rest = sorted(d for d in os.listdir(base) if d not in order)
    return [d for d in order + rest
            if os.path.exists(os.path.join(base, d, "summary.junit.xml"))]


def run_dir(run):
    """Test directory of a run subdirectory name: "rma" or "rma.3" -> "rma"."""
    return run.split(".", 1)[0]


def dir_lists(outdir):
    """[(dir, [testlist.used of each of its runs])] in run order."""
    out = []
    for run in _dir_runs(outdir):
        d = run_dir(run)
        if not out or out[-1][0] != d:
            out.append((d, []))
        used = os.path.join(outdir, "dirs", run, "testlist.used")
        if os.path.exists(used):
            out[-1][1].append(used)
    return out


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _merge_xml(outdir, runs):
    parts = []
    date = ""
    for d in runs:
        text = _read(os.path.join(outdir, "dirs", d, "summary.xml"))
        if not date:
            m = re.search(r"<DATE>(.*?)</DATE>", text)
            date = m.group(1) if m else ""
        parts += re.findall(r"<MPITEST>.*?</MPITEST>\r?\n", text, re.S)
    with open(os.path.join(outdir, "summary.xml"), "w") as f:
        f.write("<?xml version='1.0' ?>\n")
        f.write('<?xml-stylesheet href="TestResults.xsl" type="text/xsl" ?>\n')
        f.write("<MPITESTRESULTS>\n<DATE>%s</DATE>\n<MPISOURCE></MPISOURCE>\n" % date)
        f.writelines(parts)
        f.write("</MPITESTRESULTS>\n")


def _merge_tap(outdir, runs):
    lines = ["TAP version 13", "# MPICH test suite results (TAP format)"]
    n = 0
    for d in runs:
        for line in _read(os.path.join(outdir, "dirs", d, "summary.tap")).splitlines():
            m = re.match(r"^(not ok|ok)\s*\d*\s+-\s+(.*)$", line)
            if m:
                n += 1
                lines.append("%s %d - %s" % (m.group(1), n, m.group(2)))
            elif line.startswith("# date"):
                if not any(l.startswith("# date") for l in lines):
                    lines.append(line)
            elif line.startswith(("TAP version", "# MPICH test suite", "1..")):
                continue
            else:
                lines.append(line)
    lines.append("1..%d" % n)
    with open(os.path.join(outdir, "summary.tap"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _merge_junit(outdir, runs):
    cases = []
    failures = skipped = tests = 0
    date = ""
    for d in runs:
        text = _read(os.path.join(outdir, "dirs", d, "summary.junit.xml"))
        m = re.search(r'failures="(\d+)"', text)
        failures += int(m.group(1)) if m else 0
        m = re.search(r'skipped="(\d+)"', text)
        skipped += int(m.group(1)) if m else 0
        m = re.search(r'tests="(\d+)"', text)
        tests += int(m.group(1)) if m else 0
        m = re.search(r'date="([^"]*)"', text)
        date = date or (m.group(1) if m else "")
        cases += re.findall(r"    <testcase .*?(?:</testcase>\n)", text, re.S)
    with open(os.path.join(outdir, "summary.junit.xml"), "w") as f:
        f.write('<testsuites>\n  <testsuite failures="%d"\n             errors="0"\n'
                '             skipped="%d"\n             tests="%d"\n'
                '             date="%s"\n             name="summary_junit_xml">\n'
                % (failures, skipped, tests, date))
        f.writelines(cases)
        f.write("    <system-out></system-out>\n    <system-err></system-err>\n"
                "  </testsuite>\n</testsuites>\n")


def write_tables(outdir, tests):
    """Write OUTDIR/tests.tsv and OUTDIR/counts.tsv from the test records."""
    runs = _dir_runs(outdir)
    with open(os.path.join(outdir, "tests.tsv"), "w") as f:
        f.write("test\tdir\tstatus\ttime\ttimeout\tnote\n")
        for t in tests:
            f.write("%s\t%s\t%s\t%s\t%s\t%s\n" % (
                t.id, t.dir, t.status, "" if t.time is None else "%.2f" % t.time,
                "" if t.timeout is None else t.timeout, t.note))
    by_dir = {}
    for t in tests:
        by_dir.setdefault(t.dir, []).append(t)
    with open(os.path.join(outdir, "counts.tsv"), "w") as f:
        f.write("dir\ttotal\tpassed\tfailed\ttimed_out\tskipped\tseconds\n")
        allc = {k: 0 for k in ("total", "pass", "fail", "timeout", "skip")}
        all_secs = 0.0
        secs_of = {}
        order = []
        for run in runs:
            d = run_dir(run)
            if d not in order:
                order.append(d)
            secs_of[d] = secs_of.get(d, 0.0) + float(
                _read(os.path.join(outdir, "dirs", run, "seconds")).strip() or "0")
        for d in order + [d for d in by_dir if d not in order]:
            c = count(by_dir.get(d, []))
            secs = secs_of.get(d, 0.0)
            all_secs += secs
            for k in allc:
                allc[k] += c[k]
            f.write("%s\t%d\t%d\t%d\t%d\t%d\t%.0f\n" % (d, c["total"], c["pass"], c["fail"],
                                                       c["timeout"], c["skip"], secs))
        f.write("all\t%d\t%d\t%d\t%d\t%d\t%.0f\n" % (allc["total"], allc["pass"],
                                                    allc["fail"], allc["timeout"],
                                                    allc["skip"], all_secs))


def list_line_id(directory, line, default_np="2"):
    """Test id runtests gives to one testlist line, or None for non-test lines."""
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("!"):
        return None
    tok = line.split()
    np = tok[1] if len(tok) > 1 else default_np
    args = [t[4:] for t in tok[2:] if t.startswith("arg=")]
    envs = [t[4:] for t in tok[2:] if t.startswith("env=")]
    return " ".join(["%s/%s" % (directory, tok[0]), np] + args + envs)


def retry_lines(outdir):
    """Testlist lines ("dir/prog np key=value ...") of the failed tests of OUTDIR.

    Lines come from OUTDIR/dirs/<dir>/testlist.used, the list runtests read."""
    tests = load_result_dir(outdir)
    failed = {t.id for t in tests if t.status in ("fail", "timeout")}
    out = []
    for d, lists in dir_lists(outdir):
        for tid, line in list_ids(d, lists):
            if tid in failed:
                out.append("%s/%s" % (d, line))
    return out


def list_ids(d, lists):
    """[(test id, testlist line)] of the list files of test directory d, in order;
    a repeated id gets " #2", " #3" ... as runtests' results do."""
    out = []
    seen = {}
    for used in lists:
        with open(used) as f:
            for line in f:
                tid = list_line_id(d, line)
                if tid is None:
                    continue
                seen[tid] = seen.get(tid, 0) + 1
                if seen[tid] > 1:
                    tid = "%s #%d" % (tid, seen[tid])
                out.append((tid, line.split("#", 1)[0].strip()))
    return out


def apply_retry(outdir, retrydir):
    """Mark tests of OUTDIR that passed in RETRYDIR as passed; rewrite the tables."""
    tests = load_result_dir(outdir)
    again = {t.id: t for t in load_result_dir(retrydir)}
    n = 0
    for t in tests:
        r = again.get(t.id)
        if t.status in ("fail", "timeout") and r is not None and r.status == "pass":
            first = t.status + (": " + t.note if t.note else "")
            t.status, t.time, t.note = "pass", r.time, "passed on retry (first: %s)" % first
            n += 1
    write_tables(outdir, tests)
    return n


def write_outputs(outdir):
    """Merge OUTDIR/dirs/* and write counts.tsv and tests.tsv; return the tests."""
    runs = _dir_runs(outdir)
    if not runs:
        raise SystemExit("summarize: no per-directory results under %s/dirs" % outdir)
    _merge_xml(outdir, runs)
    _merge_tap(outdir, runs)
    _merge_junit(outdir, runs)
    tests = parse_junit(os.path.join(outdir, "summary.junit.xml"))
    write_tables(outdir, tests)
    # Output of failed tests, one file, for reading without the XML.
    with open(os.path.join(outdir, "failures.txt"), "w") as f:
        for t in tests:
            if t.status in ("fail", "timeout"):
                f.write("=== %s: %s (%s)\n%s\n" % (t.id, t.status, t.note, t.output.rstrip()))
    return tests


def main(argv):
    if len(argv) == 3 and argv[1] == "retry-list":
        for line in retry_lines(argv[2]):
            print(line)
        return 0
    if len(argv) == 4 and argv[1] == "apply-retry":
        n = apply_retry(argv[2], argv[3])
        print("%d test(s) passed on retry" % n)
        return 0
    if len(argv) != 3 or argv[1] not in ("merge", "counts"):
        sys.stderr.write(__doc__)
        return 2
    outdir = argv[2]
    if argv[1] == "merge":
        write_outputs(outdir)
    with open(os.path.join(outdir, "counts.tsv")) as f:
        sys.stdout.write(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
