"""impi-server's and impi-relay's command lines, as docs/impi.md and
docs/impi-relay.md give them: -help, each bad value named with the option
and exit status 2, the options both tools share read the same way. No
testbed: a tool that gets past its options is stopped by its time limit or
by the test."""
import os
import subprocess

import pytest

TOOLS = ("impi-server", "impi-relay")
# The least each tool needs to get past its options.
NEEDS = {"impi-server": ["-server", "2"], "impi-relay": ["-server", "127.0.0.1:1"]}


def run(prefix, tool, *args):
    return subprocess.run([os.path.join(prefix, "bin", tool), *args], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("tool", TOOLS)
def test_help_prints_the_usage_and_exits_0(prefix, tool):
    r = run(prefix, tool, "-help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Usage: {tool} -server")
    for opt in ("-port P", "-auth METHOD", "-timeout S"):
        assert opt in r.stdout


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("args,said", [
    (["-port", "70000"], "bad -port '70000': want 0..65535"),
    (["-timeout", "soon"], "bad -timeout 'soon'"),
    (["-auth", "password"], "bad -auth 'password'"),
    (["-auth", "key:/nonexistent/key"],
     "cannot read key file /nonexistent/key: No such file or directory"),
    (["-colour", "blue"], "bad -colour 'blue': unknown option (see -help)"),
    (["-port"], "bad -port '': unknown option or missing value"),
])
def test_a_bad_option_is_named_and_exits_2(prefix, tool, args, said):
    r = run(prefix, tool, *NEEDS[tool], *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"{tool}: {said}"), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("tool,args,said", [
    ("impi-server", [], "bad -server '': the number of clients is required"),
    ("impi-server", ["-server", "33"], "bad -server '33': want 1..32 clients"),
    ("impi-server", ["-server", "2", "-host", "here"], "bad -host 'here'"),
    ("impi-relay", [], "bad -server '': impi-server's ADDR:PORT is required"),
    ("impi-relay", ["-server", "127.0.0.1:1", "-inside", "inside"], "bad -inside 'inside'"),
    ("impi-relay", ["-server", "127.0.0.1:1", "-outside", "10.0.0"], "bad -outside '10.0.0'"),
    ("impi-relay", ["-server", "127.0.0.1:1", "-trunks", "17"], "bad -trunks '17': want 1..16"),
    ("impi-relay", ["-server", "127.0.0.1:1", "-rank", "1"],
     "bad -rank '': -leader and -rank go together"),
])
def test_each_tools_own_options_are_checked(prefix, tool, args, said):
    r = run(prefix, tool, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"{tool}: {said}"), r.stderr


def test_the_shared_options_reach_impi_server(prefix, tmp_path):
    """-port, -auth and -timeout given to impi-server take effect: it listens
    on the port and prints it, and gives up after the time limit with no
    client."""
    key = tmp_path / "key"
    key.write_text("12345\n")
    with socket_port() as port:
        pass
    r = run(prefix, "impi-server", "-server", "2", "-host", "127.0.0.1", "-port", str(port),
            "-auth", f"key:{key}", "-timeout", "1")
    assert r.stdout.strip() == f"127.0.0.1:{port}"
    assert r.returncode == 1, r.stderr
    assert "impi-server:" in r.stderr


class socket_port:
    """A port that was free a moment ago."""

    def __enter__(self):
        import socket
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        return self.s.getsockname()[1]

    def __exit__(self, *exc):
        self.s.close()
