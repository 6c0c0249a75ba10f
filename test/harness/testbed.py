"""Testbed fixtures for the Python harnesses: bring an emulated cluster of
clusters up and down, read its env file the way ". env" does, run commands
on its nodes, start icbc-router daemons as docs/router.md tells a user, and
count PASS/FAIL lines ("N passed, N failed" at the end)."""

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Report:
    """PASS/FAIL lines and the closing count."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        line = ("PASS: " if ok else "FAIL: ") + what
        if detail:
            line += " " + detail
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 and self.passed > 0 else 1


class Testbed:
    def __init__(self, name, prefix, args, work):
        self.name = name
        self.prefix = prefix
        self.args = args
        self.work = work
        self.state = f"/run/icbc-testbed/{name}"
        # ICBC_TESTBED_BIN: one tool for runs of several builds (benchmarks/routed/builds.py)
        tb = os.environ.get("ICBC_TESTBED_BIN") or os.path.join(prefix, "bin", "icbc-testbed")
        self.tool = tb if os.access(tb, os.X_OK) else os.path.join(TOP, "contrib/testbed/icbc-testbed")
        self.daemons = []  # (node, pidfile)
        self.cleanups = []
        os.makedirs(work, exist_ok=True)

    @contextlib.contextmanager
    def running(self, rep, keep=False, what="test"):
        """The testbed up for the block, which gets the user's environment
        (". env"); down after it, whatever happened (with keep, only the
        daemons stop). A testbed that does not come up ends the harness;
        an exception in the block is a failed check naming WHAT."""
        try:
            self.up()
        except Exception as e:  # noqa: BLE001
            die(str(e))
        try:
            yield self.user_env()
        except Exception as e:  # noqa: BLE001
            rep.check(False, f"{what} aborted: {e}")
        finally:
            for fn in reversed(self.cleanups):
                fn()
            self.cleanups = []
            if keep:
                self.stop_daemons()
            else:
                self.down()

    def at_exit(self, fn):
        """FN runs when the running() block ends, before the testbed goes."""
        self.cleanups.append(fn)

    def up(self):
        self.down()
        log = os.path.join(self.work, "testbed.log")
        with open(log, "w") as f:
            r = subprocess.run([self.tool, "up", "--name", self.name] + self.args,
                               stdout=f, stderr=subprocess.STDOUT, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"icbc-testbed up failed (see {log})")

    def down(self):
        self.stop_daemons()
        subprocess.run([self.tool, "down", "--name", self.name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def user_env(self):
        """The environment after ". env": this process's, plus the env file's
        exports, with every ICBC and UCX variable of the caller removed (a
        user who just sourced the file has none)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("UCX_", "MPIR_CVAR_", "ICBC_", "HYDRA_"))}
        env["PATH"] = os.path.join(self.prefix, "bin") + ":" + env.get("PATH", "")
        out = subprocess.run(["bash", "-c", f". {shlex.quote(self.state)}/env && env -0"],
                             capture_output=True, check=True, env=env).stdout
        for item in out.split(b"\0"):
            if b"=" in item:
                k, v = item.decode().split("=", 1)
                env[k] = v
        return env

    def nodes(self):
        """(node, cluster, role, fab, ext, mgmt) from the nodes file."""
        rows = []
        with open(os.path.join(self.state, "nodes")) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                rows.append(tuple(line.split()[:6]))
        return rows

    def node(self, name):
        return next(r for r in self.nodes() if r[0] == name)

    def exec_cmd(self, node, argv):
        return [self.tool, "exec", "--name", self.name, node, "--"] + list(argv)

    def run_on(self, node, argv, timeout=120, env=None, **kw):
        return subprocess.run(self.exec_cmd(node, argv), timeout=timeout, env=env,
                              capture_output=True, text=True, **kw)

    def start_router(self, node, extra=(), env=None, exe=None):
        """icbc-router as docs/router.md starts it: the router file and the
        host, as a daemon; returns its pid. EXE: another build of it (the
        sanitizer build of a soak)."""
        pidfile = os.path.join(self.work, f"router-{node}.pid")
        logfile = os.path.join(self.work, f"router-{node}.log")
        for p in (pidfile,):
            if os.path.exists(p):
                os.unlink(p)
        r = self.run_on(node, [exe or os.path.join(self.prefix, "bin", "icbc-router"),
                               "--routerfile", os.path.join(self.state, "routers.conf"),
                               "--host", node, "--daemon", "--pidfile", pidfile,
                               "--logfile", logfile] + list(extra), env=env, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"icbc-router on {node} did not start: {r.stderr.strip()} "
                               f"(log {logfile})")
        with open(pidfile) as f:
            pid = int(f.read())
        self.daemons.append((node, pidfile))
        return pid

    def stop_daemons(self):
        pids = {}
        for node, pidfile in self.daemons:
            try:
                with open(pidfile) as f:
                    pids[pidfile] = int(f.read())
                os.kill(pids[pidfile], signal.SIGTERM)
            except (OSError, ValueError):
                pass
        # a daemon removes its pidfile as it exits; one killed earlier (the
        # failover tests' SIGKILL) leaves it behind and is waited for no more
        deadline = time.time() + 10
        for node, pidfile in self.daemons:
            while os.path.exists(pidfile) and time.time() < deadline and \
                    pidfile in pids and os.path.exists(f"/proc/{pids[pidfile]}"):
                time.sleep(0.1)
        self.daemons = []

    def set_policy(self, policy):
        """Edits the router file's policy line, as a user would."""
        path = os.path.join(self.state, "routers.conf")
        with open(path) as f:
            lines = [l for l in f if not l.lstrip().startswith("policy ")]
        lines.insert(0, f"policy {policy}\n")
        with open(path, "w") as f:
            f.writelines(lines)

    def namespaces(self):
        """The network namespaces of this testbed (nodes, switches, WAN)."""
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return [l.split()[0] for l in out.splitlines()
                if l.split() and l.split()[0].startswith(self.name + "-")]

    def wan_drops(self):
        """Frames the emulated WAN dropped so far, both directions (wan.stats,
        rewritten every 100 ms: read after it settles)."""
        time.sleep(0.3)
        total = 0
        try:
            with open(os.path.join(self.state, "wan.stats")) as f:
                for line in f:
                    if line.startswith("dir "):
                        total += sum(int(w[6:]) for w in line.split() if w.startswith("drops="))
        except OSError:
            pass
        return total

    def nic_drops(self):
        """Frames the NICs' tbf queues dropped so far, both directions of
        every node (the node's transmit queue and its switch port)."""
        total = 0
        for ns in self.namespaces():
            out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show"],
                                 capture_output=True, text=True).stdout
            for qdisc in out.split("qdisc ")[1:]:
                m = re.search(r"dropped (\d+)", qdisc)
                if qdisc.startswith("tbf ") and m:
                    total += int(m.group(1))
        return total

    def nic_bytes(self, node, dev="ext0"):
        """(tx, rx) bytes of NODE's interface DEV so far."""
        r = self.run_on(node, ["cat", f"/sys/class/net/{dev}/statistics/tx_bytes",
                               f"/sys/class/net/{dev}/statistics/rx_bytes"], timeout=30)
        v = r.stdout.split()
        return (int(v[0]), int(v[1])) if r.returncode == 0 and len(v) == 2 else (0, 0)

    def tcp_retrans(self):
        """TCP segments retransmitted so far, summed over the nodes."""
        total = 0
        for ns in self.namespaces():
            out = subprocess.run(["ip", "netns", "exec", ns, "nstat", "-asz", "TcpRetransSegs"],
                                 capture_output=True, text=True).stdout
            m = re.search(r"^TcpRetransSegs\s+(\d+)", out, re.M)
            total += int(m.group(1)) if m else 0
        return total


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def mpicc(prefix, src, exe, log):
    with open(log, "w") as f:
        r = subprocess.run([os.path.join(prefix, "bin", "mpicc"), "-O2",
                            "-I" + os.path.join(TOP, "test/mpi"), "-o", exe, src],
                           stdout=f, stderr=subprocess.STDOUT)
    return r.returncode == 0


def die(msg):
    print(f"FAIL: {msg}", flush=True)
    print("0 passed, 1 failed", flush=True)
    sys.exit(1)
