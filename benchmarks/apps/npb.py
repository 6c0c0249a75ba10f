"""NPB 3.4-MPI: build a kernel with an MPI's compilers, and read its report.

    python3 benchmarks/apps/npb.py build --prefix _install --bench is --class S
    python3 benchmarks/apps/npb.py parse LOG

NPB is not part of this repository (nor packaged in Debian): the NPB3.4-MPI
folder of NASA's NPB 3.4 release (benchmarks/README.md, NPB). build() finds
it with find_npb(): --npb DIR, else $ICBC_NPB_DIR, where DIR is that folder
or one that holds it; there is no default. build() copies the tree once into
a work directory of its own, writes config/make.def for PREFIX's mpicc and
mpif90, and runs "make BENCH CLASS=C" there; the NPB sources stay
untouched. parse() reads what a run prints: the benchmark, class, process
count, time in seconds, Mop/s total and whether NPB's own verification
passed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
ENV_NPB = "ICBC_NPB_DIR"
NPB_TREE = "NPB3.4-MPI"
NOT_FOUND = ("NPB 3.4-MPI sources not found: give --npb DIR or set ICBC_NPB_DIR "
             "(docs: benchmarks/README.md, NPB)")

# Written for GCC 12 (Debian 12): its gfortran rejects the argument type
# mismatches of NPB's MPI calls unless -fallow-argument-mismatch is given,
# and rejects the hexadecimal constant of the randi8 random-number generator
# that NPB's sample make.def files choose, so RAND = randdp (NPB's portable
# double-precision generator). NPB 3.4 needs no NPROCS at build time.
MAKE_DEF = """\
MPIFC = {prefix}/bin/mpif90
FLINK = $(MPIFC)
FMPI_LIB =
FMPI_INC =
FFLAGS = -O3 -fallow-argument-mismatch
FLINKFLAGS = $(FFLAGS)
MPICC = {prefix}/bin/mpicc
CLINK = $(MPICC)
CMPI_LIB =
CMPI_INC =
CFLAGS = -O3
CLINKFLAGS = $(CFLAGS)
CC = gcc -g
BINDIR = ../bin
CONVERTFLAG = -DFORTRAN_REC_SIZE=1
RAND = randdp
"""


class NpbError(Exception):
    pass


def _tree_in(d):
    """The NPB3.4-MPI tree D is, or holds; None when it is neither."""
    for t in (d, os.path.join(d, NPB_TREE)):
        if os.path.isfile(os.path.join(t, "IS", "is.c")):
            return os.path.abspath(t)
    return None


def find_npb(npb=None):
    """The NPB3.4-MPI tree: NPB (--npb DIR) when given, else $ICBC_NPB_DIR;
    either may name the tree itself or a folder holding it. NpbError when
    neither is given, or what is given holds no NPB 3.4-MPI sources."""
    given = npb or os.environ.get(ENV_NPB)
    if not given:
        raise NpbError(NOT_FOUND)
    tree = _tree_in(given)
    if tree is None:
        how = "--npb" if npb else ENV_NPB
        raise NpbError(f"{how} {given}: neither it nor {os.path.join(given, NPB_TREE)} holds "
                       f"IS/is.c; {NOT_FOUND}")
    return tree


def build(prefix, bench, cls, work, npb=None):
    """Builds BENCH (is, ft, cg, ...) class CLS with PREFIX's compilers in
    WORK/<tree>; returns the executable's path. NPB is the NPB3.4-MPI tree or
    a folder holding it; None: $ICBC_NPB_DIR (find_npb). The build log is
    beside it; NpbError names it when the build fails, and says how to give
    the sources when there are none."""
    prefix = os.path.abspath(prefix)
    npb = find_npb(npb)
    tree = os.path.join(work, "NPB3.4-MPI-" + re.sub(r"[^A-Za-z0-9]", "_", prefix).strip("_"))
    if not os.path.isdir(tree):
        shutil.copytree(npb, tree + ".tmp", dirs_exist_ok=True)
        os.rename(tree + ".tmp", tree)
    with open(os.path.join(tree, "config", "make.def"), "w") as f:
        f.write(MAKE_DEF.format(prefix=prefix))
    os.makedirs(os.path.join(tree, "bin"), exist_ok=True)
    exe = os.path.join(tree, "bin", f"{bench.lower()}.{cls.upper()}.x")
    log = os.path.join(work, f"npb-{bench.lower()}.{cls.upper()}.build.log")
    with open(log, "w") as f:
        rc = subprocess.call(["make", bench.lower(), f"CLASS={cls.upper()}"], cwd=tree,
                             stdout=f, stderr=subprocess.STDOUT)
    if rc != 0 or not os.access(exe, os.X_OK):
        raise NpbError(f"NPB {bench.upper()} class {cls.upper()} did not build (log {log})")
    return exe


REPORT = {
    "bench": r"^\s*(\w+) Benchmark Completed",
    "cls": r"^\s*Class\s*=\s*(\S+)",
    "procs": r"^\s*Total processes\s*=\s*(\d+)",
    "secs": r"^\s*Time in seconds\s*=\s*([0-9.Ee+-]+)",
    "mops": r"^\s*Mop/s total\s*=\s*([0-9.Ee+-]+)",
    "verification": r"^\s*Verification\s*=\s*(\S+)",
}


def parse(output):
    """What an NPB run printed, as a dict (bench, cls, procs, secs, mops,
    verification, verified); NpbError when the report is not all there (a
    run that died before its report)."""
    r = {}
    for key, pat in REPORT.items():
        m = re.search(pat, output, re.M)
        if m is None:
            raise NpbError(f"no '{key}' in NPB's report")
        r[key] = m.group(1)
    r["procs"] = int(r["procs"])
    r["secs"] = float(r["secs"])
    r["mops"] = float(r["mops"])
    r["verified"] = r["verification"] == "SUCCESSFUL"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build one kernel; prints the executable's path")
    b.add_argument("--prefix", required=True, help="the MPI whose mpicc/mpif90 build it")
    b.add_argument("--bench", required=True, help="is, ft, cg, mg, lu, ep, ...")
    b.add_argument("--class", dest="cls", default="S", help="S, W, A, B, ... (default S)")
    b.add_argument("--npb", metavar="DIR",
                   help=f"the {NPB_TREE} folder of NPB 3.4, or a folder holding it "
                        f"(default: ${ENV_NPB}; no other default)")
    b.add_argument("--work", default=os.path.join(TOP, "_build", "npb"),
                   help="where the copy is built (default %(default)s)")
    p = sub.add_parser("parse", help="read a run's output; exit 1 unless it verified")
    p.add_argument("log")
    a = ap.parse_args()
    try:
        if a.cmd == "build":
            os.makedirs(a.work, exist_ok=True)
            print(build(a.prefix, a.bench, a.cls, a.work, a.npb))
            return 0
        r = parse(open(a.log, errors="replace").read())
        print(" ".join(f"{k}={v}" for k, v in r.items()))
        return 0 if r["verified"] else 1
    except NpbError as e:
        print(f"npb.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
