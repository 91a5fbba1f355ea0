"""The runner judges a block as the page says: its status, its output, its files, what it leaves running, the
servers it needs; and a user's shell is what blocks get."""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from tests.docs import runner
from tests.docs.markdown import parse

#: a server for ``with`` and ``serves``: answers /v2/health/ready, stops cleanly on Ctrl-C
FAKE_SERVER = textwrap.dedent(
    """\
    import http.server, sys
    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    port = int(sys.argv[sys.argv.index("--http-port") + 1])
    try:
        http.server.HTTPServer(("127.0.0.1", port), Ready).serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    """
)


def running(command: str) -> list[int]:
    """The pids of live processes whose command line is ``command``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == command.encode()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def place(tmp_path) -> runner.Place:
    checkout = tmp_path / "checkout"
    logs = tmp_path / "logs"
    checkout.mkdir()
    logs.mkdir()
    (checkout / "server.py").write_text(FAKE_SERVER)
    env = runner.user_environment(Path(sys.executable).parent.parent, tmp_path / "home")
    return runner.Place(checkout, logs, env)


def run(page: str, place: runner.Place, tier: str = "slow") -> list[runner.Result]:
    return list(runner.run_page(parse(page, "docs/page.md"), place, tier=tier))


def test_a_block_passes_when_it_does_what_its_page_says(place):
    page = """\
```sh
echo one; echo two >&2     # prints two
mkdir -p out && touch out/a.txt   # writes out/*.txt: one file
```

```text
one
two
```
"""
    (result, shown) = run(page, place)
    assert (result.status, result.why) == ("passed", "")
    assert shown.status == "not run"


@pytest.mark.parametrize(
    ("page", "why"),
    [
        ("```sh\nfalse\necho never\n```\n", "exit status 1, expected 0"),
        ("<!-- docs-test: exit 1 -->\n```sh\ntrue\n```\n", "exit status 0, expected 1"),
        ("```sh\necho 1\n```\n\n```text\n2\n```\n", "no line '2'"),
        ("```sh\necho on   # prints off\n```\n", "did not print 'off'"),
        ("```sh\ntrue   # writes made.txt\n```\n", "did not write made.txt"),
        ("```console\n$ echo 3.14\n2.71\n```\n", "no line '2.71'"),
    ],
)
def test_a_block_fails_on_what_differs_from_its_page(place, page, why):
    result = run(page, place)[0]
    assert result.status == "failed"
    assert why in result.why


def test_numbers_vary_lets_a_measurement_match_its_shape(place):
    page = "```sh\necho 'p50 3.27 ms'\n```\n\n<!-- docs-test: numbers vary -->\n```text\np50 2.50 ms\n```\n"
    assert run(page, place)[0].status == "passed"


def test_a_block_that_leaves_a_process_running_fails_and_it_is_ended(place, monkeypatch):
    monkeypatch.setattr(runner, "LINGER_S", 1)
    (result,) = run("```sh\nsleep 300 &\necho started\n```\n", place)
    assert result.status == "failed"
    assert "left running after the block ended: sleep 300" in result.why
    assert running("sleep 300") == []


def test_a_block_past_its_time_fails_and_is_ended(place, monkeypatch):
    monkeypatch.setitem(runner.TIMEOUT_S, "fast", 1)
    (result,) = run("```sh\nsleep 301\n```\n", place, tier="fast")
    assert (result.status, result.why) == ("failed", "did not finish within 1 s")
    assert running("sleep 301") == []


def test_a_with_server_is_started_ready_kept_and_stopped_cleanly(place):
    port = free_port()
    server = f"python server.py --http-port {port}"
    page = f"""\
<!-- docs-test: slow; with {server} -->
```sh
curl -sf localhost:{port}/v2/health/ready && echo one   # prints one
```

<!-- docs-test: slow; with {server} -->
```sh
curl -sf localhost:{port}/v2/health/ready && echo two   # prints two
```
"""
    results = run(page, place)
    assert [r.status for r in results] == ["passed", "passed"]
    logs = sorted(place.logs.glob("*-server.log"))
    assert len(logs) == 1  # one server for both blocks
    assert logs[0].read_text() == "stopped\n"  # Ctrl-C at the end, and it stopped as it should


def test_a_block_whose_server_does_not_start_fails_naming_why(place):
    page = "<!-- docs-test: slow; with python -c 'raise SystemExit(3)' -->\n```sh\ntrue\n```\n"
    (result,) = run(page, place)
    assert result.status == "failed"
    assert "its server did not start: `python -c 'raise SystemExit(3)'` exited with status 3" in result.why


def test_a_serves_block_runs_each_line_and_stops_the_servers_with_ctrl_c(place):
    port = free_port()
    page = f"""\
<!-- docs-test: slow; serves -->
```sh
echo building > built.txt
python server.py --http-port {port}     # runs until Ctrl-C
```
"""
    (result,) = run(page, place)
    assert (result.status, result.why) == ("passed", "")
    assert (place.checkout / "built.txt").read_text() == "building\n"
    assert "stopped" in (place.logs / "00.out").read_text()


def test_the_fast_tier_leaves_slow_blocks_and_marked_ones_out(place):
    page = """\
<!-- docs-test: slow -->
```sh
echo slow
```

<!-- docs-test: needs docker -->
```sh
docker build .
```

<!-- docs-test: covered by .ci/run -->
```sh
make test
```
"""
    assert [(r.status, r.why) for r in run(page, place, tier="fast")] == [
        ("not run", "slow tier (make test-docs)"),
        ("not run", "needs a Docker engine"),
        ("not run", "covered by .ci/run"),
    ]


def test_blocks_get_a_users_shell_not_the_test_sessions(tmp_path):
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "real"),
        "GE_PLUGIN_SIM_CHECK": "1",
        "LD_LIBRARY_PATH": "/somewhere",
        "PIP_INDEX_URL": "https://mirror.example/simple",
        "LANG": "C.UTF-8",
    }
    (tmp_path / "real" / ".config" / "pip").mkdir(parents=True)
    (tmp_path / "real" / ".config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://x\n")
    venv = tmp_path / "venv"

    env = runner.user_environment(venv, tmp_path / "home", base)

    assert env["PATH"] == f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    assert env["VIRTUAL_ENV"] == str(venv) and env["HOME"] == str(tmp_path / "home")
    assert "GE_PLUGIN_SIM_CHECK" not in env and "LD_LIBRARY_PATH" not in env
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple" and env["LANG"] == "C.UTF-8"
    assert (tmp_path / "home" / ".config" / "pip" / "pip.conf").is_file()  # the user's pip configuration
    assert env["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"] == str(tmp_path / "sim-devices")  # its own simulated NPUs
