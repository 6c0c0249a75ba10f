"""The testbed's NIC queue (icbc-testbed --nic-queue) and the counters the
application harness records per run (Testbed.nic_drops, tcp_retrans):
a burst into a 1 Mbit/s NIC with a 20 ms queue must be dropped there and
counted, and a TCP transfer through it must retransmit."""
import os
import re
import subprocess

import pytest

import testbed

RECEIVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5999)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b)
print(n, flush=True)
"""

UDP_BURST = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(300): s.sendto(b"x" * 1400, (sys.argv[1], 5998))
"""

TCP_SEND = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 5999)); s.sendall(b"y" * 300000); s.close()
"""


@pytest.fixture(scope="module")
def slow_nics(prefix, work, request):
    tb = testbed.Testbed("nq", prefix, ["--clusters", "2", "--nodes", "1", "--nic-rate", "1mbit",
                                "--nic-queue", "20ms"], os.path.join(work, "nq"))
    tb.up()
    try:
        yield tb
    finally:
        if not request.config.getoption("--keep"):
            tb.down()


def qdisc(tb, ns, dev):
    return subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev],
                          capture_output=True, text=True).stdout


def test_nic_queue_is_the_nodes_transmit_queue_only(slow_nics):
    assert re.search(r"tbf .*lat 20ms", qdisc(slow_nics, "nq-a0", "ext0")), \
        qdisc(slow_nics, "nq-a0", "ext0")
    # the switch port towards the node keeps its 10 ms
    assert re.search(r"tbf .*lat 10ms", qdisc(slow_nics, "nq-sw", "e-a0")), \
        qdisc(slow_nics, "nq-sw", "e-a0")


def test_a_burst_is_dropped_at_the_nic_and_counted(slow_nics):
    b0 = slow_nics.node("b0")[4]
    before = slow_nics.nic_drops()
    r = slow_nics.run_on("a0", ["python3", "-c", UDP_BURST, b0], timeout=60)
    assert r.returncode == 0, r.stderr
    # 420 KB offered at once; the queue holds 20 ms at 1 Mbit/s (2.5 KB)
    # plus the 4 KB bucket: nearly all of it is dropped
    assert slow_nics.nic_drops() - before >= 250


def test_tcp_through_the_nic_retransmits_and_is_counted(slow_nics):
    b0 = slow_nics.node("b0")[4]
    before = slow_nics.tcp_retrans()
    recv = subprocess.Popen(slow_nics.exec_cmd("b0", ["python3", "-c", RECEIVER, b0]),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "listening"
        r = slow_nics.run_on("a0", ["python3", "-c", TCP_SEND, b0], timeout=60)
        assert r.returncode == 0, r.stderr
        assert recv.stdout.readline().strip() == "300000"  # all arrived, in the end
    finally:
        recv.kill()
        recv.wait()
    # slow start's first window (10 segments, 14.5 KB) alone overflows it
    assert slow_nics.tcp_retrans() - before > 0
