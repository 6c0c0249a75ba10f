"""The application harness's own logic (benchmarks/apps/run.py), without a
testbed: what a --regime sets and what the command line overrides, which
rows of an older npb.csv a matrix keeps, and which runs count in medians and
ratios (the CPU-use rule). The runs themselves are tried by test_npb.py.
"""
import os
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "benchmarks", "apps"))

import run  # noqa: E402


def test_regime_sets_the_papers_setting():
    o = run.options(["--regime", "aggregate-router-2009"])
    # one NIC < WAN < all the nodes' NICs; the routers' NICs at most the WAN
    nic, wan = 10e6, 25e6
    assert (o.nic_rate, o.wan_rate) == ("10mbit", "25mbit")
    assert nic < wan < o.nodes * nic
    assert max(o.rl) * nic <= wan
    assert o.ppn >= 2
    assert o.dl == ["0ms", "5ms", "10ms", "15ms"]
    assert o.pols == ["aggregate", "static", "alltoall", "tcp", "stock"]
    assert o.out.endswith(os.path.join("results", "apps", "aggregate-router-2009"))
    assert o.traces is True


def test_command_line_wins_over_the_regime():
    o = run.options(["--regime", "aggregate-router-2009", "--ppn", "4", "--delays", "0ms",
                     "--no-traces", "--nic-rate", "20mbit"])
    assert (o.ppn, o.dl, o.traces, o.nic_rate) == (4, ["0ms"], False, "20mbit")
    assert o.wan_rate == "25mbit"


def test_default_regime_is_the_first_matrix():
    o = run.options([])
    assert o.regime == "matrix-2026"
    assert (o.nodes, o.ppn, o.rl, o.nic_rate, o.wan_rate) == (4, 1, [4, 2, 1], "50mbit",
                                                              "400mbit")
    assert o.out.endswith(os.path.join("results", "apps", "matrix"))


def test_rows_written_before_ppn_belong_to_one_rank_per_node():
    o = run.options([])
    old = {"bench": "CG", "cls": "A", "policy": "aggregate", "routers": "4", "delay": "0ms",
           "rep": "1", "nodes": "4", "nic_rate": "50mbit", "wan_rate": "400mbit",
           "wan_buffer": "default", "nic_queue": "default"}
    new = dict(old, **{k: str(v) for k, v in run.testbed_of(o).items()})
    assert run.run_key(old) == run.run_key(new)
    assert run.run_key(dict(old, ppn="2")) != run.run_key(new)


@pytest.mark.parametrize("row,counts", [
    ({"verified": "yes", "policy": "aggregate", "cpu_pct": "79.9"}, True),
    ({"verified": "yes", "policy": "aggregate", "cpu_pct": "80.1"}, False),
    ({"verified": "yes", "policy": "aggregate", "cpu_pct": ""}, True),  # older rows
    ({"verified": "yes", "policy": "stock", "cpu_pct": "100.0"}, True),  # it polls
    ({"verified": "no", "policy": "aggregate", "cpu_pct": "10"}, False),
])
def test_which_runs_count(row, counts):
    assert run.counted(row) is counts


def test_cpu_pct_is_busy_over_total():
    assert run.cpu_pct((100, 1000), (160, 1100)) == 60.0
    assert run.cpu_pct((5, 5), (5, 5)) == ""
    busy, total = run.cpu_ticks()
    assert 0 <= busy <= total


def test_summary_marks_a_cpu_bound_point():
    o = run.options(["--regime", "aggregate-router-2009", "--bench", "cg", "--policies",
                     "aggregate,alltoall", "--delays", "0ms"])
    base = {"bench": "CG", "cls": "A", "routers": 2, "delay": "0ms", "rep": 1,
            "verified": "yes", "why": "", **run.testbed_of(o)}
    rows = [dict(base, policy="aggregate", mops="70.0", cpu_pct="60.0"),
            dict(base, policy="alltoall", mops="50.0", cpu_pct="90.0")]
    text = "\n".join(run.summary(o, rows, "cmd", 1.0))
    assert "aggregate 70.0" in text and "[cpu 60 %]" in text
    assert "alltoall *50.0 (cpu-bound, not counted)" in text
    assert "(1.40x)" not in text  # no ratio against a run that does not count


def test_hpcc_tests_are_named_checked_and_part_of_a_runs_name(tmp_path):
    import hpcc
    o = run.options(["--regime", "aggregate-router-2009"])
    assert o.hpcc_tests == "HPL,PTRANS,MPIFFT,MPIRandomAccess"
    assert run.options(["--hpcc-tests", ",".join(hpcc.TESTS)]).hpcc_tests == "all"
    with pytest.raises(SystemExit, match="unknown HPCC test 'Linpack'"):
        run.options(["--hpcc-tests", "HPL,Linpack"])
    # an HPCC row of other tests or another N is another run; NPB rows carry neither
    row = {"bench": "HPCC", "cls": "-", "policy": "aggregate", "routers": "2", "delay": "0ms",
           "rep": "1", **run.testbed_of(o), **run.hpcc_of(o, "HPCC")}
    assert run.run_key(row) != run.run_key(dict(row, hpcc_tests="all"))
    assert run.run_key(row) != run.run_key(dict(row, hpcc_n=1000))
    assert run.run_key(dict(row, hpcc_n="", hpcc_tests="")) == run.run_key(
        {k: v for k, v in row.items() if k not in run.HPCC_KEY})
    assert run.hpcc_of(o, "cg") == {"hpcc_n": "", "hpcc_tests": ""}
    # the input: a selection is written for HPCC's io.c to read, all is no file
    hpcc.write_input(str(tmp_path), 16, 2000, tests=["HPL", "MPIFFT"])
    assert (tmp_path / "hpcc-tests.txt").read_text().split() == ["HPL", "MPIFFT"]
    assert "2000" in (tmp_path / "hpccinf.txt").read_text()
    hpcc.write_input(str(tmp_path), 16, 2000, tests=hpcc.tests_of("all"))
    assert not (tmp_path / "hpcc-tests.txt").exists()
    # every switch the inserted code names is one HPCC_Init sets
    for field in hpcc.TESTS.values():
        assert f"params->{field} = 0;" in hpcc.SELECT_TESTS


def test_a_job_is_ended_after_a_report_in_a_file_of_its_own(tmp_path):
    # HPCC writes its report to hpccoutf.txt, not to its output: a job that
    # does not leave MPI_Finalize is ended 2 s after the report's last line
    sys.path.insert(0, os.path.join(TOP, "test", "harness"))
    from mpirun import run_mpi
    (tmp_path / "bin").mkdir()
    mpiexec = tmp_path / "bin" / "mpiexec"
    mpiexec.write_text('#!/bin/sh\necho "End of HPC Challenge tests." > "$REPORT"\nsleep 60\n')
    mpiexec.chmod(0o755)
    report = tmp_path / "hpccoutf.txt"
    env = dict(os.environ, REPORT=str(report))
    res = run_mpi(str(tmp_path), env, "hpcc", 1, str(tmp_path), timeout=30,
                  until=r"^End of HPC Challenge tests\.", until_in=str(report))
    assert res.stopped and not res.timed_out
    assert res.secs < 20


def test_resume_keeps_the_hpcc_runs_it_asks_for(tmp_path):
    o = run.options(["--regime", "aggregate-router-2009", "--bench", "hpcc,cg",
                     "--policies", "aggregate", "--delays", "0ms", "--out", str(tmp_path),
                     "--resume"])
    hp, cg = o.benches
    rows = [{**{k: "" for k in run.FIELDS}, "bench": b.name.upper(), "cls": b.cls,
             "policy": "aggregate", "routers": "2", "delay": "0ms", "rep": "1",
             **run.testbed_of(o), **run.hpcc_of(o, b.name)} for b in (hp, cg)]
    old_hpcc = dict(rows[0], hpcc_n="", hpcc_tests="")  # before the columns
    o.other_rows = []
    run.write_csv(o, rows + [old_hpcc])
    kept = run.previous_rows(o)
    assert [r["bench"] for r in kept] == ["HPCC", "CG"]
    assert [(r["bench"], r["hpcc_n"]) for r in o.other_rows] == [("HPCC", "")]
    assert {run.key_of(o, b, "aggregate", 2, "0ms", 1) for b in (hp, cg)} == \
        {run.run_key(r) for r in kept}


def test_the_end_of_npbs_report_is_found_in_every_kernel():
    import re
    fortran = " Please send all errors/feedbacks to:\n\n NPB Development Team\n" \
              " Internet: npb@nas.nasa.gov\n"
    c_is = " Please send feedbacks and/or the results of this run to:\n\n" \
           " NPB Development Team\n npb@nas.nasa.gov\n"
    for text in (fortran, c_is):
        assert re.search(run.NPB_REPORT_END, text, re.M)
    assert not re.search(run.NPB_REPORT_END, " NPB Development Team\n", re.M)
