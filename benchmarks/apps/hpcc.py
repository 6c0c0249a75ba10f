"""HPCC 1.5.0: fetch it from Debian's sources, build it with an MPI's
compilers and OpenBLAS, write its input for a process grid, and read its
summary.

    python3 benchmarks/apps/hpcc.py build --prefix _install
    python3 benchmarks/apps/hpcc.py input DIR --procs 8 --n 4000 [--tests HPL,MPIFFT]
    python3 benchmarks/apps/hpcc.py parse DIR/hpccoutf.txt

fetch() runs "apt-get source hpcc" in WORK (Debian's orig tarball is all
that is used: the sources as released, no Debian patch), build() unpacks it
once into a tree of its own, adds one thing of ours to src/io.c (the choice
of tests, SELECT_TESTS), writes hpl/Make.icbc for PREFIX's mpicc and
OpenBLAS (libopenblas-dev), and runs "make arch=icbc". write_input()
writes hpccinf.txt: HPL's N, NB 80 and the most square P x Q grid of the
processes; and, when a run asks for some of HPCC's tests only, their names
in hpcc-tests.txt. parse() reads the "Summary section" of hpccoutf.txt; a
run has verified when Success=1 (the residual checks of the tests that ran
all passed).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))

MAKE_ARCH = """\
SHELL = /bin/sh
CD = cd
CP = cp
LN_S = ln -s
MKDIR = mkdir
RM = /bin/rm -f
TOUCH = touch
ARCH = $(arch)
TOPdir = ../../..
INCdir = $(TOPdir)/include
BINdir = $(TOPdir)/bin/$(ARCH)
LIBdir = $(TOPdir)/lib/$(ARCH)
HPLlib = $(LIBdir)/libhpl.a
MPinc =
MPlib =
LAinc =
LAlib = -lopenblas
F2CDEFS =
HPL_INCLUDES = -I$(INCdir) -I$(INCdir)/$(ARCH) $(LAinc) $(MPinc)
HPL_LIBS = $(HPLlib) $(LAlib) $(MPlib) -lm
HPL_OPTS = -DHPL_CALL_CBLAS
HPL_DEFS = $(F2CDEFS) $(HPL_OPTS) $(HPL_INCLUDES)
CC = {prefix}/bin/mpicc
CCNOOPT = $(HPL_DEFS)
CCFLAGS = $(HPL_DEFS) -O3 -fomit-frame-pointer -funroll-loops -fcommon
LINKER = {prefix}/bin/mpicc
LINKFLAGS = $(CCFLAGS)
ARCHIVER = ar
ARFLAGS = r
RANLIB = echo
"""

INPUT = """\
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""

# HPCC's tests by the names of their output sections, and the switch of each
# in HPCC's parameters.
TESTS = {"HPL": "RunHPL", "StarDGEMM": "RunStarDGEMM", "SingleDGEMM": "RunSingleDGEMM",
         "PTRANS": "RunPTRANS", "StarSTREAM": "RunStarStream",
         "SingleSTREAM": "RunSingleStream", "MPIRandomAccess_LCG": "RunMPIRandomAccess_LCG",
         "StarRandomAccess_LCG": "RunStarRandomAccess_LCG",
         "SingleRandomAccess_LCG": "RunSingleRandomAccess_LCG",
         "MPIRandomAccess": "RunMPIRandomAccess", "StarRandomAccess": "RunStarRandomAccess",
         "SingleRandomAccess": "RunSingleRandomAccess", "LatencyBandwidth": "RunLatencyBandwidth",
         "MPIFFT": "RunMPIFFT", "StarFFT": "RunStarFFT", "SingleFFT": "RunSingleFFT"}

# HPCC 1.5.0 switches every test on in HPCC_Init (src/io.c) and has no input
# to choose. Inserted after that line: a file hpcc-tests.txt in the working
# directory, when there is one, names the tests to run (every process reads
# it, so all agree). A skipped test's values in the summary stay at HPCC's -1.
SELECT_AFTER = "params->RunLatencyBandwidth = 1;\n"
SELECT_MARK = "/* hpcc-tests.txt */"
SELECT_TESTS = (SELECT_MARK + """
  {
    FILE *sel = fopen("hpcc-tests.txt", "r");
    char word[64];
    if (sel) {
""" + "".join(f"      params->{v} = 0;\n" for v in TESTS.values()) + """\
      while (fscanf(sel, "%63s", word) == 1) {
""" + "".join(f'        if (!strcmp(word, "{k}")) params->{v} = 1;\n' for k, v in TESTS.items())
    + """\
      }
      fclose(sel);
    }
  }
""")

# The summary values a run's row keeps (HPCC's names).
KEYS = ["HPL_Tflops", "HPL_time", "PTRANS_GBs", "MPIRandomAccess_GUPs", "MPIFFT_Gflops",
        "StarDGEMM_Gflops", "StarSTREAM_Triad", "RandomlyOrderedRingBandwidth_GBytes",
        "RandomlyOrderedRingLatency_usec", "MaxPingPongBandwidth_GBytes",
        "MaxPingPongLatency_usec"]


class HpccError(Exception):
    pass


def fetch(work):
    """The orig tarball of Debian's hpcc source package, in WORK."""
    found = glob.glob(os.path.join(work, "hpcc_*.orig.tar.gz"))
    if not found:
        with open(os.path.join(work, "apt-source.log"), "w") as f:
            # the Debian part of the package may be missing from a mirror:
            # only the orig tarball is needed
            subprocess.call(["apt-get", "source", "--download-only", "hpcc"], cwd=work,
                            stdout=f, stderr=subprocess.STDOUT)
        found = glob.glob(os.path.join(work, "hpcc_*.orig.tar.gz"))
    if not found:
        raise HpccError(f"apt-get source hpcc gave no orig tarball (log "
                        f"{os.path.join(work, 'apt-source.log')}; deb-src lines needed)")
    return sorted(found)[-1]


def build(prefix, work):
    """Builds HPCC with PREFIX's mpicc in WORK; returns the executable."""
    prefix = os.path.abspath(prefix)
    os.makedirs(work, exist_ok=True)
    tree = os.path.join(work, "hpcc-" + re.sub(r"[^A-Za-z0-9]", "_", prefix).strip("_"))
    exe = os.path.join(tree, "hpcc")
    io_c = os.path.join(tree, "src", "io.c")
    if os.access(exe, os.X_OK) and os.path.isfile(io_c) and SELECT_MARK in open(io_c).read():
        return exe
    if not os.path.isfile("/usr/include/x86_64-linux-gnu/cblas.h") and \
            not glob.glob("/usr/include/*/cblas*.h") and not os.path.isfile("/usr/include/cblas.h"):
        raise HpccError("no cblas.h: install libopenblas-dev")
    tarball = fetch(work)
    if os.path.isdir(tree):
        shutil.rmtree(tree)
    with tarfile.open(tarball) as t:
        top = t.getnames()[0].split("/")[0]
        t.extractall(work)
    os.rename(os.path.join(work, top), tree)
    with open(io_c) as f:
        src = f.read()
    if src.count(SELECT_AFTER) != 1:
        raise HpccError(f"{io_c}: not HPCC 1.5.0's HPCC_Init (no '{SELECT_AFTER.strip()}')")
    with open(io_c, "w") as f:
        f.write(src.replace(SELECT_AFTER, SELECT_AFTER + SELECT_TESTS))
    with open(os.path.join(tree, "hpl", "Make.icbc"), "w") as f:
        f.write(MAKE_ARCH.format(prefix=prefix))
    log = os.path.join(work, "hpcc.build.log")
    with open(log, "w") as f:
        rc = subprocess.call(["make", "arch=icbc"], cwd=tree, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0 or not os.access(exe, os.X_OK):
        raise HpccError(f"HPCC did not build (log {log})")
    return exe


def grid(procs):
    """The most square P x Q = PROCS with P <= Q."""
    p = int(procs ** 0.5)
    while procs % p:
        p -= 1
    return p, procs // p


def tests_of(text):
    """A list of HPCC's test names from 'HPL,MPIFFT' (all: every test)."""
    names = [x for x in text.replace(" ", ",").split(",") if x]
    if names == ["all"]:
        return list(TESTS)
    bad = [x for x in names if x not in TESTS]
    if bad or not names:
        raise HpccError(f"unknown HPCC test '{(bad or [''])[0]}' (all, or of "
                        f"{', '.join(TESTS)})")
    return names


def write_input(directory, procs, n, nb=80, tests=None):
    """hpccinf.txt, and hpcc-tests.txt when TESTS is not every test."""
    p, q = grid(procs)
    with open(os.path.join(directory, "hpccinf.txt"), "w") as f:
        f.write(INPUT.format(n=n, nb=nb, p=p, q=q))
    sel = os.path.join(directory, "hpcc-tests.txt")
    if tests and set(tests) != set(TESTS):
        with open(sel, "w") as f:
            f.write("\n".join(tests) + "\n")
    elif os.path.exists(sel):
        os.remove(sel)


def parse(text):
    """The summary of an hpccoutf.txt as a dict of strings, with 'verified'
    (Success=1); HpccError when there is no complete summary."""
    # HPCC appends to the file: the last summary is this run's
    found = re.findall(r"^Begin of Summary section\.\n(.*?)^End of Summary section\.", text,
                       re.M | re.S)
    if not found:
        raise HpccError("no complete summary section in hpccoutf.txt")
    r = dict(line.split("=", 1) for line in found[-1].splitlines() if "=" in line)
    if "Success" not in r:
        raise HpccError("no Success= in HPCC's summary")
    r["verified"] = r["Success"] == "1"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="fetch and build; prints the executable's path")
    b.add_argument("--prefix", required=True)
    b.add_argument("--work", default=os.path.join(TOP, "_build", "hpcc"))
    i = sub.add_parser("input", help="write DIR/hpccinf.txt")
    i.add_argument("dir")
    i.add_argument("--procs", type=int, required=True)
    i.add_argument("--n", type=int, required=True)
    i.add_argument("--tests", default="all", help="HPCC's tests to run: all, or of "
                   + ", ".join(TESTS))
    p = sub.add_parser("parse", help="read an hpccoutf.txt; exit 1 unless Success=1")
    p.add_argument("file")
    a = ap.parse_args()
    try:
        if a.cmd == "build":
            print(build(a.prefix, a.work))
            return 0
        if a.cmd == "input":
            write_input(a.dir, a.procs, a.n, tests=tests_of(a.tests))
            return 0
        r = parse(open(a.file, errors="replace").read())
        print(" ".join(f"{k}={r[k]}" for k in ["Success"] + KEYS if k in r))
        return 0 if r["verified"] else 1
    except HpccError as e:
        print(f"hpcc.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
