#!/usr/bin/env python3
"""Network probes run inside a testbed node (icbc-testbed exec NODE -- ...),
printing one JSON object on stdout.

  netprobe.py scan HOST...             every TCP port 1-65535 of each HOST; for
                                       each open one, whether it greets with
                                       bt_lib's HELLO (magic "ICBT")
  netprobe.py poison [--generic] HOST:PORT...
                                       the inputs that abort UCX 1.13's TCP
                                       transport and connection manager, each
                                       on a connection of its own; --generic:
                                       also malformed and random bytes for any
                                       listener
  netprobe.py idle --count N --hold S HOST:PORT...
                                       N silent connections spread over the
                                       ports; when each was closed by the peer
"""

import argparse
import asyncio
import json
import random
import resource
import socket
import struct
import sys
import time

BT_MAGIC = b"ICBT"

# UCX's TCP transport: 8-byte magic number, then an AM header whose length
# is 2^32-1 (tcp_ep.c asserts on it). Its connection manager: 16 bytes of
# a connection-request header with a nonsense length (tcp_sockcm_ep.c).
POISON = {
    "ucx-tcp-am-length": struct.pack("<Q", 0xCAFEBABE12345678) + b"\0" + struct.pack("<I", 0xFFFFFFFF),
    "ucx-sockcm-header": bytes.fromhex("ffffffffffffffff0000000000000000"),
}
# For any listener (libfabric's tcp provider among them): a connection
# request-like header claiming 64 KiB of data that never comes, a header of
# all ones, 64 KiB of seeded random bytes, and 4 KiB of zeros.
GENERIC = {
    "header-claims-64k": bytes([3, 0, 0xFF, 0xFF]) + bytes(12),
    "all-ones-header": b"\xff" * 64,
    "random-64k": random.Random(7).randbytes(65536),
    "zeros-4k": bytes(4096),
}


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def probe(host, port, sem, timeout):
    """'open', 'closed' (refused) or 'timeout' (no answer: retried later)."""
    async with sem:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (ConnectionRefusedError, OSError) as e:
            return port, "timeout" if isinstance(e, (asyncio.TimeoutError, TimeoutError)) else "closed", None
        except asyncio.TimeoutError:
            return port, "timeout", None
        banner = b""
        try:
            banner = await asyncio.wait_for(r.read(4), 2.0)
        except (asyncio.TimeoutError, OSError):
            pass
        w.close()
        return port, "open", banner


async def scan_host(host, conc):
    sem = asyncio.Semaphore(conc)
    results = await asyncio.gather(*(probe(host, p, sem, 3.0) for p in range(1, 65536)))
    # Unanswered SYNs (dropped on a full queue) get a second, patient try.
    retry = [p for p, st, _ in results if st == "timeout"]
    sem1 = asyncio.Semaphore(32)
    again = await asyncio.gather(*(probe(host, p, sem1, 10.0) for p in retry))
    by_port = {p: (st, b) for p, st, b in results}
    for p, st, b in again:
        by_port[p] = (st, b)
    open_ports = [{"port": p, "bt_lib": (b or b"")[:4] == BT_MAGIC,
                   "greeting": (b or b"").hex()}
                  for p, (st, b) in sorted(by_port.items()) if st == "open"]
    unanswered = [p for p, (st, _) in by_port.items() if st == "timeout"]
    refused = sum(1 for st, _ in by_port.values() if st == "closed")
    return {"host": host, "open": open_ports, "refused": refused, "unanswered": unanswered}


def cmd_scan(args):
    raise_nofile()
    t0 = time.time()
    out = [asyncio.run(scan_host(h, args.concurrency)) for h in args.hosts]
    print(json.dumps({"scans": out, "seconds": round(time.time() - t0, 1)}))


def parse_target(t):
    host, port = t.rsplit(":", 1)
    return host.strip("[]"), int(port)


def cmd_poison(args):
    sent = []
    inputs = dict(POISON, **GENERIC) if args.generic else POISON
    for t in args.targets:
        host, port = parse_target(t)
        for name, data in inputs.items():
            try:
                s = socket.create_connection((host, port), timeout=5)
                s.sendall(data)
                time.sleep(0.2)
                s.close()
                sent.append({"target": t, "input": name, "sent": True})
            except OSError as e:
                sent.append({"target": t, "input": name, "sent": False, "error": str(e)})
    print(json.dumps({"poison": sent}))


def cmd_idle(args):
    raise_nofile()
    targets = [parse_target(t) for t in args.targets]
    socks = []
    t_open = []
    failed = 0
    for i in range(args.count):
        host, port = targets[i % len(targets)]
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.setblocking(False)
            socks.append(s)
            t_open.append(time.monotonic())
        except OSError:
            failed += 1
    opened_at = time.monotonic()
    closed = [None] * len(socks)
    import selectors
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    deadline = opened_at + args.hold
    left = len(socks)
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.1):
            i = key.data
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                continue  # a greeting; still open
            closed[i] = time.monotonic() - t_open[i]
            sel.unregister(key.fileobj)
            key.fileobj.close()
            left -= 1
    ages = [c for c in closed if c is not None]
    print(json.dumps({"requested": args.count, "opened": len(socks), "connect_failed": failed,
                      "closed": len(ages), "still_open": left,
                      "max_close_s": round(max(ages), 2) if ages else None,
                      "min_close_s": round(min(ages), 2) if ages else None,
                      "open_phase_s": round(opened_at - t_open[0], 2) if t_open else None}))
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scan")
    s.add_argument("hosts", nargs="+")
    s.add_argument("--concurrency", type=int, default=512)
    s.set_defaults(fn=cmd_scan)
    p = sub.add_parser("poison")
    p.add_argument("--generic", action="store_true")
    p.add_argument("targets", nargs="+")
    p.set_defaults(fn=cmd_poison)
    i = sub.add_parser("idle")
    i.add_argument("targets", nargs="+")
    i.add_argument("--count", type=int, default=1000)
    i.add_argument("--hold", type=float, default=30.0)
    i.set_defaults(fn=cmd_idle)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
