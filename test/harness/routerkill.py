"""icbc-router daemons of a testbed that are killed and restarted while a
job runs: the failover tests and benchmarks/failover share them."""
import os
import random
import signal
import threading
import time


class RouterDaemons:
    """Daemons started as docs/router.md says (Testbed.start_router), by node;
    EXE: another build of icbc-router (the sanitizer build of a soak, whose
    reports go to asan-NODE.* in the testbed's work directory)."""

    def __init__(self, tb, exe=None):
        self.tb, self.exe, self.pids = tb, exe, {}

    def start(self, node, extra=()):
        env = None
        if self.exe:
            env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:log_path=" +
                       os.path.join(self.tb.work, f"asan-{node}"))
        self.pids[node] = self.tb.start_router(node, list(extra), env=env, exe=self.exe)

    def kill(self, node):
        os.kill(self.pids[node], signal.SIGKILL)
        self.wait_gone(node)

    def wait_gone(self, node):
        for _ in range(100):  # the pid is reaped by init; wait until it is gone
            if not os.path.exists(f"/proc/{self.pids[node]}"):
                break
            time.sleep(0.02)

    def log(self, node):
        return os.path.join(self.tb.work, f"router-{node}.log")

    def stop(self):
        self.tb.stop_daemons()


class Killer(threading.Thread):
    """From START s on, kills a router drawn (seeded) from NODES, restarts it
    RESTART s later (None: never), waits PERIOD = (low, high) s, until KILLS
    kills or stop_flag is set. done: the nodes killed, in order."""

    def __init__(self, daemons, kills, seed, nodes, start=2.0, period=(1.0, 3.0), restart=1.5):
        super().__init__()
        self.d, self.kills, self.rng, self.nodes = daemons, kills, random.Random(seed), nodes
        self.start_at, self.period, self.restart = start, period, restart
        self.done = []
        self.stop_flag = threading.Event()

    def run(self):
        if self.stop_flag.wait(self.start_at):
            return
        while len(self.done) < self.kills:
            node = self.rng.choice(self.nodes)
            self.d.kill(node)
            self.done.append(node)
            if self.restart is not None:
                stopped = self.stop_flag.wait(self.restart)
                self.d.start(node)
                if stopped:
                    return
            if self.stop_flag.wait(self.rng.uniform(*self.period)):
                return
