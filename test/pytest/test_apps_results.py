"""The application harness's results file (benchmarks/apps/run.py): npb.csv
holds the runs of several matrices, and neither --report nor a matrix run
may lose the rows of another; the table it prints comes from the rows of
the matrix asked for, HPCC's values beyond HPL included.

Nothing runs on a testbed here: --report reads a hand-written npb.csv, and
the matrix's writer is called with the rows a run would have made.
"""
import csv
import os
import subprocess
import sys

APPS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "benchmarks", "apps")
sys.path.insert(0, APPS)
import run  # noqa: E402

TESTBED = {"nodes": "4", "nic_rate": "50mbit", "wan_rate": "400mbit", "wan_buffer": "default"}
HPCC_SUMMARY = ("HPL_Tflops=0.0034 HPL_time=5.2 PTRANS_GBs=0.04 MPIRandomAccess_GUPs=0.00077 "
                "MPIFFT_Gflops=0.11 RandomlyOrderedRingBandwidth_GBytes=0.0087 "
                "RandomlyOrderedRingLatency_usec=325.2")


def row(bench, cls, policy, routers, mops, **extra):
    r = {"bench": bench, "cls": cls, "policy": policy, "routers": routers, "delay": "0ms",
         "procs": 8, "rep": 1, "secs": 10, "mops": mops, "verified": "yes", "why": "",
         "wan_drops": 0, "hpcc_summary": "", **TESTBED}
    r.update(extra)
    return r


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=run.FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in run.FIELDS})


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


ROWS = [row("IS", "A", "aggregate", 4, 12.0), row("IS", "A", "static", 4, 10.0),
        row("IS", "A", "aggregate", 2, 9.0),  # another matrix: R = 2
        # HPCC's rows name their input (the default regime's N and tests)
        row("HPCC", "-", "aggregate", 4, 3400.0, hpcc_summary=HPCC_SUMMARY, hpcc_n=3000,
            hpcc_tests="all"),
        row("HPCC", "-", "static", 4, 3200.0, hpcc_summary=HPCC_SUMMARY.replace(
            "PTRANS_GBs=0.04", "PTRANS_GBs=0.02"), hpcc_n=3000, hpcc_tests="all")]


def test_report_reads_the_matrix_and_leaves_the_file_alone(tmp_path):
    path = tmp_path / "npb.csv"
    write(path, ROWS)
    before = path.read_bytes()
    r = subprocess.run([sys.executable, os.path.join(APPS, "run.py"), "--bench", "is,hpcc",
                        "--policies", "aggregate,static", "--routers", "4", "--delays", "0ms",
                        "--out", str(tmp_path), "--report"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == before
    table = (tmp_path / "npb_summary.txt").read_text()
    assert "IS.A R=4 delay 0ms: aggregate 12.0, static 10.0 (1.20x)" in table
    assert "HPCC R=4 delay 0ms: aggregate 3400.0, static 3200.0 (1.06x)" in table
    assert "PTRANS GB/s 0.04 / 0.02" in table
    assert "R=2" not in table
    assert "4 verified, 0 not" in r.stdout


def test_a_matrix_run_keeps_the_rows_of_other_matrices(tmp_path):
    write(tmp_path / "npb.csv", ROWS)
    o = run.options(["--bench", "is", "--policies", "aggregate,static", "--routers", "4",
                     "--delays", "0ms", "--out", str(tmp_path)])
    assert run.previous_rows(o) == []  # without --resume the matrix runs again
    fresh = [row("IS", "A", "aggregate", 4, 13.0), row("IS", "A", "static", 4, 11.0)]
    run.write_csv(o, fresh)
    got = {(r["bench"], r["policy"], r["routers"]): r["mops"] for r in read(tmp_path / "npb.csv")}
    assert got == {("IS", "aggregate", "4"): "13.0", ("IS", "static", "4"): "11.0",
                   ("IS", "aggregate", "2"): "9.0", ("HPCC", "aggregate", "4"): "3400.0",
                   ("HPCC", "static", "4"): "3200.0"}

    o = run.options(["--bench", "is", "--policies", "aggregate,static", "--routers", "4",
                     "--delays", "0ms", "--out", str(tmp_path), "--resume"])
    kept = run.previous_rows(o)
    assert sorted(r["mops"] for r in kept) == ["11.0", "13.0"]
    run.write_csv(o, kept)
    assert len(read(tmp_path / "npb.csv")) == len(ROWS)
