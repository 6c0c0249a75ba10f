"""Running MPI jobs and reading routers, for the pytest suites and benchmarks.

run_mpi() starts a job as a user does (mpiexec from the prefix, the
testbed's environment) and returns what happened as data: exit status,
seconds, whether it was killed at its time limit, and the output.
router_stats() reads the JSON line a router logs with its counters;
router_stats_now() asks a running router daemon for a fresh one (SIGUSR1).
"""
import dataclasses
import json
import os
import re
import signal
import subprocess
import time


@dataclasses.dataclass
class MpiResult:
    name: str
    rc: int
    secs: float
    timed_out: bool
    output: str
    log: str
    watched_secs: float = None  # when the watched pattern first appeared
    stopped: bool = False  # killed by us 2 s after the UNTIL pattern appeared

    @property
    def ok(self):
        """Exit 0 and the test's own success line."""
        return (self.rc == 0 and not self.timed_out and
                re.search(r"^(No Errors|demo succeeded)$", self.output, re.M) is not None)

    def failed_with(self, pattern):
        """Ended by itself, non-zero, with output matching PATTERN (the error
        promised, not any error)."""
        return (not self.timed_out and self.rc != 0 and
                re.search(pattern, self.output, re.M) is not None)

    def tail(self, n=8):
        """The last N lines, after what names the cause: the first lines that
        report a crash or an assertion (MPICH, UCX, the C library), the
        job's last icbc lines, and the process manager's exit report (which
        names the rank and signal)."""
        lines = self.output.splitlines()
        head = lines[:-n]
        causes = [l for l in head if CAUSE.search(l) and not l.startswith(("[proxy", "[mpiexec"))]
        marks = [l for l in head if l.startswith("[icbc") or "EXIT CODE" in l
                 or "KILLED BY SIGNAL" in l or "PID " in l][-12:]
        return "\n".join(causes[:10] + [l for l in marks if l not in causes[:10]] + lines[-n:])

    def describe(self):
        state = "killed at its time limit" if self.timed_out else f"rc {self.rc}"
        return f"{self.name}: {state} after {self.secs:.0f} s (log {self.log})\n{self.tail()}"


# What a crashing process prints before it dies: MPICH's and UCX's assertion
# and fatal-error lines, the C library's heap checks, a backtrace's header.
CAUSE = re.compile(r"Assertion|assert|Fatal|fatal error|Abort|abort\(|corrupt|"
                   r"free\(\)|malloc\(\)|double free|Segmentation|backtrace|Caught signal")


def run_mpi(prefix, env, exe, np, work, name=None, hosts=None, extra_env=None, args=(),
            timeout=240, mpiexec_args=(), watch=None, until=None, until_in=None):
    """Runs EXE on NP ranks with mpiexec from PREFIX in environment ENV
    (a testbed's user_env()), plus EXTRA_ENV (named by the test that needs
    it). The job is killed after TIMEOUT seconds. WATCH: a pattern whose
    first appearance in the output is timed (watched_secs). UNTIL: a pattern
    after whose first appearance the job is killed 2 s later (the result is
    not timed_out), for a test whose job need not end by itself once it has
    shown what the test asserts; UNTIL_IN: the file UNTIL is looked for in
    instead of the output (a program that reports into a file of its own)."""
    name = name or os.path.basename(exe)
    log = os.path.join(work, f"{name}.log")
    argv = [os.path.join(prefix, "bin", "mpiexec")]
    if hosts:
        argv += ["-f", hosts]
    argv += list(mpiexec_args) + ["-n", str(np), exe] + list(args)
    job_env = dict(env)
    job_env.update(extra_env or {})
    start = time.time()
    timed_out = False
    watched = None
    stop_at = None
    stopped = False
    with open(log, "w") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=job_env,
                             start_new_session=True)
        while True:
            try:
                rc = p.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if watch and watched is None:
                with open(log, errors="replace") as g:
                    if re.search(watch, g.read(), re.M):
                        watched = time.time() - start
            if until and stop_at is None:
                try:
                    with open(until_in or log, errors="replace") as g:
                        if re.search(until, g.read(), re.M):
                            stop_at = time.time() + 2
                except FileNotFoundError:
                    pass
            if stop_at is not None and time.time() > stop_at:
                os.killpg(p.pid, 9)
                rc = p.wait()
                stopped = True
                break
            if time.time() - start > timeout:
                timed_out = True
                os.killpg(p.pid, 9)
                rc = p.wait()
                break
    secs = time.time() - start
    with open(log, errors="replace") as f:
        output = f.read()
    if watch and watched is None and re.search(watch, output, re.M):
        watched = secs
    return MpiResult(name, rc, secs, timed_out, output, log, watched, stopped)


def router_stats(logfile):
    """The last counters a router logged (its stats-json line), as a dict;
    None when it logged none."""
    last = None
    try:
        with open(logfile, errors="replace") as f:
            for line in f:
                i = line.find("stats-json ")
                if i >= 0:
                    last = line[i + len("stats-json "):].strip()
    except OSError:
        return None
    return json.loads(last) if last else None


def router_stats_now(pid, logfile, timeout=5.0):
    """The counters of the running router daemon PID: SIGUSR1 makes it log a
    stats line, and this returns that line's JSON form. AssertionError when
    no new line appears in LOGFILE within TIMEOUT seconds (the router is
    gone, hung, or logs elsewhere), so that a caller never reads an older
    line in its place."""
    def lines():
        try:
            with open(logfile, errors="replace") as f:
                return sum(1 for line in f if "stats-json " in line)
        except OSError:
            return 0

    before = lines()
    os.kill(pid, signal.SIGUSR1)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if lines() > before:
            return router_stats(logfile)
        time.sleep(0.05)
    raise AssertionError(f"router {pid} logged no stats line within {timeout:.0f} s of "
                         f"SIGUSR1 (log {logfile})")


def vm_kib(pid, field):
    """A Vm* line of /proc/PID/status (VmRSS, VmHWM), in KiB; None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
