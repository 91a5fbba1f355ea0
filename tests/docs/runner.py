"""Runs the command blocks of one page, in order, as written, in a scratch checkout; writes what each did.

``python -m tests.docs.runner PAGE --checkout REPO --work DIR --tier fast|slow`` (tests/docs/test_docs.py
starts it). A scratch checkout is a copy of the checkout's files (tracked and untracked, not ignored; their
times kept) committed to a fresh git repository, with the checkout's compiled extension and ``.venv`` (a
link: no second venv), so it is what ``make setup`` leaves. Blocks see a user's shell: the venv activated,
``HOME`` a folder of the run's own (with the user's pip configuration), simulated NPUs of the run's own,
none of the test session's variables; and, where the host allows it, a network namespace of the page's own
(``Namespace``), so that the ports the docs name, 8000 and up, are free whatever else runs on the host.

Each block is ``bash -e`` on its script, in a process group of its own: it passes when it ends with the
status it should (0, or its ``exit N``), within its tier's time, prints what the page says it prints, writes
what it says it writes, and leaves nothing running. A block marked ``with COMMAND`` gets that server
started first (and kept for the next blocks that name it), ready on its HTTP port, and stopped after; a
``serves`` block runs line by line, each server among its lines stopped with Ctrl-C. tests/docs/README.md
has the whole grammar.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from tests.docs import markdown
from tests.docs.markdown import Block

#: seconds a block may take, per tier
TIMEOUT_S = {"fast": 300, "slow": 3600}
#: how long a server may take to answer /v2/health/ready, and to stop after SIGINT
SERVER_START_S = 300
SERVER_STOP_S = 90
#: how long what a block started may take to end after the block did (a server stopping after `kill %1`)
LINGER_S = 20
#: the variables of the test session's environment a user's shell has too
USER_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR")
#: pip's configuration files in a user's home (copied into the run's own)
PIP_CONFIGS = (".config/pip/pip.conf", ".pip/pip.conf")
#: proxies and the package index a user set up (pip in a block reaches it the same way)
USER_PREFIXES = ("PIP_", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


@attrs.frozen
class Result:
    where: str
    title: str
    tier: str
    #: passed, failed, or not run
    status: str
    why: str = ""
    seconds: float = 0.0
    output: str = ""  #: the end of what it printed, when it failed

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self)


# -- the scratch checkout --------------------------------------------------------------------------------


def extension_name(venv: Path) -> str:
    suffix = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return f"ge_plugin/_fastpath{suffix}"


def make_scratch(checkout: Path, dest: Path) -> Path:
    """A copy of ``checkout`` as ``make setup`` leaves it, at ``dest``, committed to a git repository of
    its own (``make dist`` lists files with git). RuntimeError when the checkout's own setup is out of date:
    ``make`` in the copy would then reinstall the checkout's venv from the copy."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=checkout,
        capture_output=True,
        check=True,
    ).stdout.decode()
    venv = (checkout / ".venv").resolve()
    extension = extension_name(venv)
    for name in [*filter(None, listed.split("\0")), extension]:
        source = checkout / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    (dest / ".venv").symlink_to(venv)
    git = [
        "git",
        "-c",
        "user.name=docs-test",
        "-c",
        "user.email=docs-test@localhost",
        "-c",
        "init.defaultBranch=main",
    ]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "scratch checkout"]):
        subprocess.run([*git, *args], cwd=dest, check=True, capture_output=True)
    stale = subprocess.run(
        ["make", "-q", ".venv/.stamps/installed", extension], cwd=dest, capture_output=True, text=True
    )
    if stale.returncode != 0:
        raise RuntimeError(
            f"{checkout}: pyproject.toml, setup.py, the requirements or the extension's sources changed since its "
            "last make setup: run make setup there first (make in the scratch copy would reinstall its venv)"
        )
    return dest


def user_environment(venv: Path, home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a user's shell with the venv activated has, and nothing of the test session."""
    base = os.environ if base is None else base
    env = {name: base[name] for name in USER_VARIABLES if name in base}
    env.update({name: value for name, value in base.items() if name.startswith(USER_PREFIXES)})
    system = [p for p in base.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p and Path(p) != venv / "bin"]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *system])
    env["VIRTUAL_ENV"] = str(venv)
    env["HOME"] = str(home)
    # Python's output interleaves as on a terminal (where stdout is line-buffered), not stdout last
    env["PYTHONUNBUFFERED"] = "1"
    # the simulated NPUs are the run's own, as a user's machine's are: not the clock files every other
    # simulator of this uid on the host shares (another job's bench would hold device 0 for seconds)
    env["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"] = str(home.parent / "sim-devices")
    # pip's configuration (a package index, a mirror) and cache stay the user's: a block that installs the
    # wheel reaches the same index and downloads nothing already there
    real_home = Path(base.get("HOME", str(Path.home())))
    env.setdefault("PIP_CACHE_DIR", str(Path(base.get("XDG_CACHE_HOME", real_home / ".cache")) / "pip"))
    home.mkdir(parents=True, exist_ok=True)
    (home.parent / "sim-devices").mkdir(exist_ok=True)
    for config in PIP_CONFIGS:
        if (real_home / config).is_file():
            (home / config).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(real_home / config, home / config)
    return env


# -- processes -------------------------------------------------------------------------------------------


def group_members(pgid: int) -> list[str]:
    """The command lines of the live processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                )
        except (OSError, ValueError, IndexError):
            continue
    return members


def end_group(pgid: int, *, grace: float) -> list[str]:
    """Wait ``grace`` seconds for a process group to end by itself, then TERM and KILL what is left;
    returns what was still running when the grace ran out."""
    deadline = time.monotonic() + grace
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not left:
        return []
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
    return left


#: run in a new user and network namespace by ``Namespace``: bring its loopback up, then wait to be ended
_HOLDER = """
import fcntl, signal, socket, struct
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    request = struct.pack("16sH", b"lo", 0)
    flags = struct.unpack("16sH", fcntl.ioctl(sock, 0x8913, request)[:18])[1]  # SIOCGIFFLAGS
    fcntl.ioctl(sock, 0x8914, struct.pack("16sH", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
print("up", flush=True)
signal.pause()
"""

#: asked inside the namespace: does 127.0.0.1:PORT answer /v2/health/ready with 200?
_PROBE = """
import sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v2/health/ready", timeout=2) as answer:
        sys.exit(0 if answer.status == 200 else 1)
except OSError:
    sys.exit(1)
"""


class Namespace:
    """A network namespace of the page's own (in a user namespace, so no privilege is needed): its loopback
    has every port free. Blocks and servers enter it with ``prefix``; a ``network`` block stays outside."""

    def __init__(self) -> None:
        unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
        if unshare is None or nsenter is None:
            raise OSError("unshare or nsenter not found")
        self.holder = subprocess.Popen(
            [unshare, "-rn", sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != b"up":
            self.holder.kill()
            raise OSError(f"unshare -rn: {self.holder.communicate()[1].decode(errors='replace').strip()}")
        self.prefix = [nsenter, "-t", str(self.holder.pid), "-U", "-n", "--preserve-credentials", "--"]
        probe = subprocess.run([*self.prefix, "true"], capture_output=True)
        if probe.returncode != 0:
            self.close()
            raise OSError(f"nsenter: {probe.stderr.decode(errors='replace').strip()}")

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()

    @classmethod
    def open(cls) -> Namespace | None:
        """One where the host allows it, else None (the page then runs on the host's network)."""
        try:
            return cls()
        except OSError as exc:
            print(
                f"no network namespace of its own ({exc}): the ports the page names must be free", flush=True
            )
            return None


# -- servers a block needs -------------------------------------------------------------------------------


@attrs.frozen
class Place:
    """Where and how a page's commands run."""

    checkout: Path  #: the scratch checkout, each command's working folder
    logs: Path
    env: Mapping[str, str]
    #: enters the page's network namespace (empty: the host's network)
    prefix: tuple[str, ...] = ()

    def start(self, argv: Sequence[str], log: Path, *, network: bool = False) -> subprocess.Popen[bytes]:
        """``argv`` in a process group of its own, output appended to ``log``; ``network``: outside the
        page's namespace, on the host's network. Its stop signals act as in a user's terminal
        (``as_in_a_terminal``), however the tests were started."""
        with log.open("ab") as out:
            return subprocess.Popen(
                [*(() if network else self.prefix), *argv],
                cwd=self.checkout,
                env=dict(self.env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                process_group=0,
                preexec_fn=as_in_a_terminal,
            )

    def answers(self, port: int) -> bool:
        """``/v2/health/ready`` on 127.0.0.1:``port`` (in the page's namespace) says 200."""
        if not self.prefix:
            url = f"http://127.0.0.1:{port}/v2/health/ready"
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=2) as answer,
            ):
                return bool(answer.status == 200)
            return False
        probe = subprocess.run([*self.prefix, sys.executable, "-c", _PROBE, str(port)], capture_output=True)
        return probe.returncode == 0


def as_in_a_terminal() -> None:
    """In a child before it runs its program: Ctrl-C, SIGTERM and SIGHUP take their default action, as in a
    terminal's shell. A suite started in the background (``make test &``: SIGINT ignored) or under nohup
    (SIGHUP ignored) hands its children those signals ignored, and the Ctrl-C the page's servers are
    stopped with would never reach them."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def http_port(command: str) -> int:
    found = re.search(r"--http-port[= ](\d+)", command)
    return int(found[1]) if found else 8000


class Server:
    """A ``with COMMAND`` server: the page's own command line, run in the scratch checkout."""

    def __init__(self, command: str, place: Place, log: Path):
        self.command = command
        self.place = place
        self.log = log
        self.port = http_port(command)
        self.process = place.start(["bash", "-c", f"exec {command}"], log)

    def ready(self) -> str | None:
        """None once it answers /v2/health/ready; else why not."""
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"`{self.command}` exited with status {self.process.returncode}: {tail(self.log)}"
            if self.place.answers(self.port):
                return None
            time.sleep(0.5)
        return (
            f"`{self.command}` did not answer on port {self.port} within {SERVER_START_S} s: {tail(self.log)}"
        )

    def stop(self) -> str | None:
        """SIGINT, as Ctrl-C in the user's terminal; None when it stopped cleanly, else what went wrong."""
        if self.process.poll() is not None:
            end_group(self.process.pid, grace=0)
            return (
                f"`{self.command}` had exited by itself (status {self.process.returncode}): {tail(self.log)}"
            )
        self.process.send_signal(signal.SIGINT)
        try:
            status = self.process.wait(SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            status = None
        left = end_group(self.process.pid, grace=LINGER_S if status is not None else 0)
        if status is None:
            return f"`{self.command}` did not stop within {SERVER_STOP_S} s of SIGINT"
        if status not in (0, 128 + signal.SIGINT):
            return f"`{self.command}` stopped with status {status} after SIGINT: {tail(self.log)}"
        if left:
            return f"`{self.command}` left running after it stopped: {'; '.join(left)}"
        return None


# -- one block ---------------------------------------------------------------------------------------------


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_block(block: Block, n: int, place: Place, *, timeout: float) -> Result:
    """A block as one ``bash -e`` script."""
    script = place.logs / f"{n:02d}.sh"
    script.write_text(block.script)
    log = place.logs / f"{n:02d}.out"
    started = time.monotonic()
    process = place.start(["bash", "-e", str(script)], log, network=block.directives.network)
    try:
        status: int | None = process.wait(timeout)
    except subprocess.TimeoutExpired:
        status = None
    left = end_group(process.pid, grace=LINGER_S if status is not None else 0)
    output = log.read_text(errors="replace")
    problems = check(block, status, output, place.checkout, timeout=timeout)
    if left and status is not None:  # a block past its time was ended whole
        problems.append(f"left running after the block ended: {'; '.join(left)}")
    return _result(block, problems, round(time.monotonic() - started, 1), output)


def run_serving_block(block: Block, n: int, place: Place, *, timeout: float) -> Result:
    """A ``serves`` block: each line alone; one still running once its HTTP port answers is a server,
    stopped with SIGINT (Ctrl-C) and expected to stop cleanly, the others must succeed."""
    log = place.logs / f"{n:02d}.out"
    started = time.monotonic()
    problems: list[str] = []
    for k, line in enumerate(block.lines):
        with log.open("ab") as out:
            out.write(f"$ {line}\n".encode())
        process = place.start(["bash", "-e", "-c", line], log, network=block.directives.network)
        port, deadline = http_port(line), time.monotonic() + timeout
        status: int | None = None
        while (status := process.poll()) is None and time.monotonic() < deadline:
            if place.answers(port):
                process.send_signal(signal.SIGINT)
                try:
                    status = process.wait(SERVER_STOP_S)
                except subprocess.TimeoutExpired:
                    problems.append(f"line {k + 1} did not stop within {SERVER_STOP_S} s of SIGINT")
                    break
                if status == 128 + signal.SIGINT:
                    status = 0  # stopped by Ctrl-C, as it should
                break
            time.sleep(0.5)
        left = end_group(process.pid, grace=LINGER_S if status is not None else 0)
        if status is None and not problems:
            problems.append(f"line {k + 1} neither ended nor answered on port {port} within {timeout:.0f} s")
        elif status not in (None, 0):
            problems.append(f"line {k + 1} ({line.strip()[:80]}) ended with status {status}")
        if left:
            problems.append(f"line {k + 1} left running: {'; '.join(left)}")
        if problems:
            break
    output = log.read_text(errors="replace")
    problems += check(
        block, 0 if not problems else block.directives.exit, output, place.checkout, timeout=timeout
    )
    return _result(block, problems, round(time.monotonic() - started, 1), output)


def check(block: Block, status: int | None, output: str, checkout: Path, *, timeout: float) -> list[str]:
    """What went other than the page says, in its words."""
    problems = []
    if status is None:
        problems.append(f"did not finish within {timeout:.0f} s")
    elif status != block.directives.exit:
        problems.append(f"exit status {status}, expected {block.directives.exit}")
    missing = markdown.matches(block.expected, output, numbers_vary=block.directives.numbers_vary)
    if missing is not None:
        problems.append(f"the output the page shows is not what it printed: no line {missing!r} (in order)")
    at = 0
    for text in block.prints:
        found = output.find(text, at)
        if found < 0:
            problems.append(f"did not print {text!r}")
            break
        at = found + len(text)
    for pattern in block.writes:
        if not glob.glob(str(checkout / pattern)):
            problems.append(f"did not write {pattern}")
    return problems


def _result(block: Block, problems: Sequence[str], seconds: float, output: str) -> Result:
    if problems:
        last = "\n".join(output.splitlines()[-60:])
        return Result(block.where, block.title, block.tier, "failed", "; ".join(problems), seconds, last)
    return Result(block.where, block.title, block.tier, "passed", seconds=seconds)


# -- a page --------------------------------------------------------------------------------------------------


def not_run(block: Block, tier: str) -> Result | None:
    """Why this run leaves ``block`` out, or None when it runs it."""
    d = block.directives
    if not block.is_command:
        return Result(block.where, block.title, block.tier, "not run", f"{block.lang}: shown, not run")
    if d.needs is not None:
        return Result(block.where, block.title, block.tier, "not run", f"needs {markdown.NEEDS[d.needs]}")
    if d.covered_by is not None:
        return Result(block.where, block.title, block.tier, "not run", f"covered by {d.covered_by}")
    if tier == "fast" and block.tier == "slow":
        return Result(block.where, block.title, block.tier, "not run", "slow tier (make test-docs)")
    return None


def run_page(blocks: Sequence[Block], place: Place, *, tier: str) -> Iterator[Result]:
    """Every block of a page in order (the slow tier runs the fast blocks too: the slow ones build on
    them)."""
    server: Server | None = None
    failed_start: tuple[str, str] | None = None
    try:
        for n, block in enumerate(blocks):
            skipped = not_run(block, tier)
            if skipped is not None:
                yield skipped
                continue
            wanted = block.directives.server
            if server is not None and server.command != wanted:
                trouble = server.stop()
                server = None
                if trouble:
                    yield Result(
                        block.where, block.title, block.tier, "failed", f"the server before it: {trouble}"
                    )
            if wanted is not None and server is None and (failed_start is None or failed_start[0] != wanted):
                server = Server(wanted, place, place.logs / f"{n:02d}-server.log")
                why = server.ready()
                if why is not None:
                    end_group(server.process.pid, grace=0)
                    server, failed_start = None, (wanted, why)
            if wanted is not None and server is None and failed_start is not None:
                yield Result(
                    block.where,
                    block.title,
                    block.tier,
                    "failed",
                    f"its server did not start: {failed_start[1]}",
                )
                continue
            run = run_serving_block if block.directives.serves else run_block
            yield run(block, n, place, timeout=TIMEOUT_S[block.tier])
    finally:
        if server is not None:
            trouble = server.stop()
            if trouble:
                yield Result(server.command, server.command, "slow", "failed", f"stopping it: {trouble}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs.runner", description=__doc__)
    parser.add_argument("page", type=Path, help="README.md or docs/NAME.md, relative to --checkout")
    parser.add_argument("--checkout", type=Path, required=True, help="the checkout under test")
    parser.add_argument(
        "--work", type=Path, required=True, help="an empty folder for the scratch checkout and logs"
    )
    parser.add_argument("--tier", choices=("fast", "slow"), default="fast")
    parser.add_argument(
        "--host-network",
        action="store_true",
        help="no network namespace of the page's own (ports must be free)",
    )
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    blocks = markdown.parse((checkout / args.page).read_text(encoding="utf-8"), args.page.as_posix())
    scratch = make_scratch(checkout, args.work / "checkout")
    logs = args.work / "logs"
    logs.mkdir()
    env = user_environment((checkout / ".venv").resolve(), args.work / "home")
    namespace = None if args.host_network else Namespace.open()
    place = Place(scratch, logs, env, tuple(namespace.prefix) if namespace else ())
    where = "its own network namespace" if namespace else "the host's network"
    print(f"{args.page}: {args.tier} tier in {scratch}, on {where}", flush=True)
    results = []
    try:
        for result in run_page(blocks, place, tier=args.tier):
            results.append(result.to_json())
            print(
                f"  {result.status:<8} {result.where:<22} {result.seconds:>6.1f}s  {result.title[:70]}  {result.why[:200]}",
                flush=True,
            )
            (args.work / "results.json").write_text(json.dumps(results, indent=1))
    finally:
        if namespace is not None:
            namespace.close()
    (args.work / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
