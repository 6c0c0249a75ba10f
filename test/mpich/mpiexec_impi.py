#!/usr/bin/env python3
"""An mpiexec that runs every job as an IMPI job of several ICBC clients,
for MPICH's test suite (run-testsuite.sh --impi): the ranks are split over
the clients, each client its own mpiexec started as docs/impi.md tells a
user (ICBC_IMPI_SERVER, ICBC_IMPI_CLIENT), through a fresh impi-server.

    mpiexec_impi.py --prefix DIR [--clients N] [--hosts "H,H..;H,H..;..."]
                    [--relay NODE] [mpiexec options] -n NP PROGRAM [ARGS...]

Client k takes NP // N ranks (the first NP % N clients one more), client 0
the lowest world ranks. With --hosts (testbed nodes; the testbed's env file
read into the environment), client k runs on the k-th ';'-separated group
of hosts (mod their number; mpiexec -hosts, ranks round robin), and
impi-server runs in the namespace of the first host with a WAN address, on it
(ext0), so that every IMPI connection crosses the emulated WAN; without,
everything runs here and impi-server listens on 127.0.0.1. Prints each
client's output (stdout and stderr apart) in client order, then impi-server's
messages if it failed;
exits with the first non-zero status of the clients, else the server's.
With --relay NODE (a testbed node, with --hosts), client 0 joins through
impi-relay run in NODE's namespace as docs/impi-relay.md says (-inside its
fabric address; outside it reaches impi-server from its WAN address), so its
processes are private hosts whose packets pass the relay; --relay N0,N1,...
runs a trunk of relays there (-trunks and -followers on N0, -leader and
-rank on the others); --relay local (no --hosts) runs one relay here, inside 127.0.10.1
and outside 127.0.10.2.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def node_addresses(state):
    """node name -> ext0 address, from the testbed's nodes file."""
    return {name: ext for name, (_fab, ext) in node_fields(state).items()}


def node_fields(state):
    """node name -> (fabric address, ext0 address), from the testbed's nodes file."""
    addrs = {}
    with open(os.path.join(state, "nodes")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _cluster, _role, fab, ext, _mgmt = line.split()[:6]
            addrs[name] = (fab, ext)
    return addrs


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--prefix", required=True)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--hosts", default="")
    p.add_argument("--relay", default="")
    opts, rest = p.parse_known_args()

    # mpiexec options up to the program, then the program and its arguments
    passthrough, np_, i = [], None, 0
    values = {"-genv": 2, "-env": 2, "-hosts": 1, "-f": 1, "-hostfile": 1, "-ppn": 1,
              "-wdir": 1}
    while i < len(rest):
        a = rest[i]
        if a in ("-n", "-np") and i + 1 < len(rest):
            np_ = int(rest[i + 1])
            i += 2
            continue
        if not a.startswith("-"):
            break
        k = values.get(a, 0)
        if not (opts.hosts and a in ("-hosts", "-f", "-hostfile")):
            passthrough += rest[i:i + 1 + k]
        i += 1 + k
    prog = rest[i:]
    if np_ is None or not prog:
        print("mpiexec_impi: usage: mpiexec_impi.py --prefix DIR [...] -n NP PROGRAM [ARGS]",
              file=sys.stderr)
        return 2
    nclients = max(1, min(opts.clients, np_))
    counts = [np_ // nclients + (1 if k < np_ % nclients else 0) for k in range(nclients)]
    hosts = [h for h in opts.hosts.split(";") if h]
    bindir = os.path.join(opts.prefix, "bin")

    server_cmd = [os.path.join(bindir, "impi-server"), "-server", str(nclients),
                  "-timeout", str(int(os.environ.get("MPIEXEC_TIMEOUT", "180")) + 30)]
    if hosts:
        state = os.environ["ICBC_TESTBED_DIR"]
        # the first node with a WAN address (a private cluster's nodes have none)
        addrs = node_addresses(state)
        first = next((h for g in hosts for h in g.split(",") if addrs.get(h, "-") != "-"),
                     hosts[0].split(",")[0])
        addr = addrs[first]
        server_cmd = ["ip", "netns", "exec", f"{os.environ['ICBC_TESTBED']}-{first}"] + \
            server_cmd + ["-host", addr, "-listen", addr]
    else:
        server_cmd += ["-host", "127.0.0.1", "-listen", "127.0.0.1"]
    server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    address = server.stdout.readline().strip()
    if not address:
        server.wait()
        print(f"mpiexec_impi: impi-server printed no address: {server.stderr.read()}",
              file=sys.stderr)
        return 1

    relay, client0_server, followers = None, address, []
    if opts.relay:
        if not hosts and opts.relay != "local":
            print("mpiexec_impi: --relay NODE needs --hosts (testbed nodes); here: --relay local",
                  file=sys.stderr)
            return 2
        timeout = str(int(os.environ.get("MPIEXEC_TIMEOUT", "180")) + 30)
        relay_cmd = [os.path.join(bindir, "impi-relay"), "-server", address, "-timeout", timeout]
        nodes = [] if opts.relay == "local" else opts.relay.split(",")
        trunk = ["-trunks", str(len(nodes))] if len(nodes) > 1 else []
        if opts.relay == "local":
            relay_cmd += ["-inside", "127.0.10.1", "-outside", "127.0.10.2"]
        else:
            fields = node_fields(os.environ["ICBC_TESTBED_DIR"])

            def in_node(node, cmd):
                return ["ip", "netns", "exec", f"{os.environ['ICBC_TESTBED']}-{node}"] + cmd + \
                    ["-inside", fields[node][0].split("/")[0]]
            if trunk:  # the leader takes each follower from its node's fabric address only
                trunk += ["-followers", ",".join(fields[n][0].split("/")[0] for n in nodes[1:])]
            relay_cmd = in_node(nodes[0], relay_cmd + trunk)
        relay = subprocess.Popen(relay_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        client0_server = relay.stdout.readline().strip()
        if not client0_server:
            relay.wait()
            print(f"mpiexec_impi: impi-relay printed no address: {relay.stderr.read()}",
                  file=sys.stderr)
            server.kill()
            return 1
        followers = []
        for j, node in enumerate(nodes[1:], 1):
            f = subprocess.Popen(in_node(node, [os.path.join(bindir, "impi-relay"), "-server",
                                                address, "-timeout", timeout, "-leader",
                                                client0_server, "-rank", str(j)]),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if not f.stdout.readline():
                print(f"mpiexec_impi: impi-relay {j} did not join: {f.stderr.read()}",
                      file=sys.stderr)
                return 1
            followers.append(f)

    # each client's output in files of its own: a client blocked on a full
    # pipe would hold up the others, which wait for it in MPI
    clients, files = [], []
    for k, n in enumerate(counts):
        cmd = [os.path.join(bindir, "mpiexec"), "-n", str(n)]
        if hosts:
            cmd += ["-hosts", hosts[k % len(hosts)]]
        cmd += ["-genv", "ICBC_IMPI_SERVER", client0_server if k == 0 else address,
                "-genv", "ICBC_IMPI_CLIENT", str(k)]
        cmd += passthrough + prog
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        files.append((out, err))
        clients.append(subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL))
    codes = [c.wait() for c in clients]
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    server_err = server.stderr.read()
    relay_err = ""
    if relay:
        try:
            relay.wait(timeout=30)
        except subprocess.TimeoutExpired:
            relay.kill()
            relay.wait()
        relay_err = relay.stderr.read()
        for f in followers:
            try:
                f.wait(timeout=30)
            except subprocess.TimeoutExpired:
                f.kill()
                f.wait()
            if f.returncode != 0:
                relay_err += f.stderr.read()
    for out, err in files:
        out.seek(0)
        err.seek(0)
        sys.stdout.write(out.read())
        sys.stderr.write(err.read())
    rc = next((c for c in codes if c != 0), 0)
    if rc == 0 and server.returncode != 0:
        sys.stdout.write(f"mpiexec_impi: impi-server exited with {server.returncode}: "
                         f"{server_err}")
        rc = 1
    if rc == 0 and relay and relay.returncode != 0:
        sys.stdout.write(f"mpiexec_impi: impi-relay exited with {relay.returncode}: {relay_err}")
        rc = 1
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
