"""A user's own ONNX model, served the way docs/spec.md tells a user to: a spec written from the docs,
``ge-plugin atc SPEC --sim``, ``ge-plugin render``, ``ge-plugin serve`` (all run as commands), answers
checked against onnxruntime. The same ``ge-plugin serve`` must listen on loopback only by default and
pass tritonserver's exit status through."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge_plugin.serve import free_port

pytestmark = pytest.mark.e2e

START_TIMEOUT_S = 120.0
MODEL = "cifar_classifier"
#: IPv4 loopback, IPv6 loopback, and IPv4 loopback as an IPv6 socket shows it (the metrics service binds so)
LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")

#: written from docs/spec.md alone: dims without the batch dim, the batch gears compiled into the OM
USER_SPEC = """\
name: cifar_classifier

model:
  om: classifier.om
  source: classifier.onnx
  soc_version: Ascend310P3

inputs:
  - name: image
    dtype: fp32
    dims: [3, 32, 32]

outputs:
  - name: class_logits
    dtype: fp32
    dims: [10]

batching:
  gears: [1, 2, 4]
  max_queue_delay_us: 500
"""


def user_cnn() -> onnx.ModelProto:
    """A small image classifier, unlike any ge-plugin model: Conv -> Relu -> GlobalAveragePool -> Flatten
    -> Gemm, image [batch, 3, 32, 32] -> class_logits [batch, 10]."""
    rng = np.random.default_rng(1234)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "conv_w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, "conv_b"),
        numpy_helper.from_array(rng.standard_normal((8, 10)).astype(np.float32), "fc_w"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["conv"], ["relu"]),
            helper.make_node("GlobalAveragePool", ["relu"], ["pooled"]),
            helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
            helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["class_logits"]),
        ],
        "user_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("class_logits", TensorProto.FLOAT, ["N", 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


#: the admin key every ``ge-plugin serve`` of these tests gets (from the environment, as an operator gives it)
ADMIN_KEY = "e2e-admin-key-0123456789abcdef"


def admin_client(port: int):
    """An HTTP client that sends the admin key with every call (the repository API needs it)."""
    from ge_plugin.serve.clients import keyed_client

    return keyed_client("http", f"127.0.0.1:{port}", {"ge-admin-key": ADMIN_KEY})


def ge_plugin_command() -> list[str]:
    """The installed ``ge-plugin`` script next to this Python, as a user runs it."""
    script = Path(sys.executable).parent / "ge-plugin"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "ge_plugin"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*ge_plugin_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, (
        f"ge-plugin {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )
    return done


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on ``port``. A free port is free only when it is
    picked: on a machine running other test suites, another server may take it before ``ge-plugin serve``
    binds it (serve then exits), and a readiness probe would get that server's 200."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in inodes:
                    return True
    return False


@attrs.define
class ServeProcess:
    """``ge-plugin serve`` running as a command, with tritonserver as its child."""

    process: subprocess.Popen
    log_path: Path
    http_port: int
    grpc_port: int
    metrics_port: int

    @property
    def ports(self) -> tuple[int, int, int]:
        return self.http_port, self.grpc_port, self.metrics_port

    def log_tail(self, lines: int = 60) -> str:
        """The log's last lines, after its first few (where an argument error or a usage text starts)."""
        text = self.log_path.read_text(errors="replace").splitlines()
        if len(text) <= lines + 5:
            return "\n".join(text)
        return "\n".join([*text[:5], "[...]", *text[-lines:]])

    def children(self) -> dict[int, bytes]:
        """pid -> command line of ge-plugin serve's children: tritonserver, and the gRPC front's process."""
        pids = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return {int(pid): Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids}

    def triton_pid(self) -> int:
        children = self.children()
        found = [pid for pid, line in children.items() if line.split(b"\0")[0].endswith(b"/tritonserver")]
        assert len(found) == 1, f"ge-plugin serve has children {children}, expected one tritonserver"
        return found[0]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        url = f"http://127.0.0.1:{self.http_port}/v2/health/ready"
        while True:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"ge-plugin serve exited {self.process.returncode} before ready:\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200 and listens(self.process.pid, self.http_port):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"ge-plugin serve was not ready after {START_TIMEOUT_S} s:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C, as a user stops it; the exit status of ``ge-plugin serve``."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(AssertionError, OSError, ValueError):
                os.kill(self.triton_pid(), signal.SIGKILL)
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def ge_plugin_serve(
    repo: Path,
    work: Path,
    log_path: Path,
    *extra: str,
    options_first: bool = True,
    ports: tuple[int, int, int] | None = None,
    preexec_fn=None,
) -> Iterator[ServeProcess]:
    """``ge-plugin serve REPO`` on free ports (or ``ports``), default host; killed on exit if a test left it
    running.

    ``options_first`` writes the options before REPO; test_serve_options_after_the_repository checks the
    other order, the one of ``ge-plugin serve --help``'s examples."""
    ports = ports or (free_port(), free_port(), free_port())
    options = [
        f"--http-port={ports[0]}",
        f"--grpc-port={ports[1]}",
        f"--metrics-port={ports[2]}",
        f"--work-dir={work}",
    ]
    arguments = [*options, str(repo)] if options_first else [str(repo), *options]
    command = [*ge_plugin_command(), "serve", *arguments, *extra]
    with open(log_path, "wb") as log:
        serve = ServeProcess(
            subprocess.Popen(
                command,
                cwd=work,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec_fn,
                env={**os.environ, "GE_PLUGIN_ADMIN_KEY": ADMIN_KEY},
            ),
            log_path,
            *ports,
        )
        try:
            yield serve
        finally:
            serve.kill()


@pytest.fixture(scope="module")
def user_project(tmp_path_factory) -> Path:
    """A user's folder: their ONNX and their spec, compiled and rendered with the ge-plugin commands."""
    project = tmp_path_factory.mktemp("user-project")
    onnx.save(user_cnn(), project / "classifier.onnx")
    (project / "classifier.yaml").write_text(USER_SPEC)
    run_cli("validate", "classifier.yaml", cwd=project)
    built = run_cli("atc", "classifier.yaml", "--sim", "--repository", "repo", cwd=project)
    assert "ATC run success" in built.stdout
    run_cli("render", "classifier.yaml", "-o", "repo", cwd=project)
    assert (project / "repo" / MODEL / "1" / "classifier.om").is_file()
    assert (project / "repo" / MODEL / "config.pbtxt").is_file()
    return project


@pytest.fixture(scope="module")
def served(user_project) -> Iterator[ServeProcess]:
    with ge_plugin_serve(user_project / "repo", user_project, user_project / "serve.log") as serve:
        serve.wait_ready()
        yield serve


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("rows", [1, 3])
def test_user_model_served_by_the_cli_equals_onnxruntime(user_project, served, protocol, rows):
    import onnxruntime as ort
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    images = np.random.default_rng(rows).standard_normal((rows, 3, 32, 32), dtype=np.float32)
    module = httpclient if protocol == "http" else grpcclient
    port = served.http_port if protocol == "http" else served.grpc_port
    client = module.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        tensor = module.InferInput("image", list(images.shape), "FP32")
        tensor.set_data_from_numpy(images)
        logits = client.infer(MODEL, [tensor]).as_numpy("class_logits")
    finally:
        client.close()
    session = ort.InferenceSession(str(user_project / "classifier.onnx"), providers=["CPUExecutionProvider"])
    expected = session.run(["class_logits"], {"image": images})[0]
    assert logits.shape == (rows, 10)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN that process ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, decode in (("tcp", _ipv4), ("tcp6", _ipv6)):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                address, port = local.split(":")
                found.add((decode(address), int(port, 16)))
    return found


def _ipv4(hex_address: str) -> str:
    return socket.inet_ntop(socket.AF_INET, bytes.fromhex(hex_address)[::-1])


def _ipv6(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    return socket.inet_ntop(socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))


def local_non_loopback_addresses() -> list[str]:
    """This machine's own IPv4 addresses outside 127/8, from the kernel's local routing table."""
    addresses = []
    previous = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/fib_trie").read_text().splitlines():
            if "/32 host LOCAL" in line and previous and not previous.startswith("127."):
                addresses.append(previous)
            previous = line.strip().lstrip("|-+ ").strip()
    return sorted(set(addresses))


def test_serve_listens_on_loopback_only_by_default(served):
    # HTTP is ge-plugin serve's own socket (its guard, in front of tritonserver's loopback HTTP endpoint)
    listening = listening_sockets(served.process.pid)
    for child in served.children():  # tritonserver, and the gRPC front (a process of its own)
        listening |= listening_sockets(child)
    ports = {port for _, port in listening}
    assert set(served.ports) <= ports, f"ge-plugin serve and tritonserver listen on {sorted(listening)}"
    outside = [(address, port) for address, port in listening if address not in LOOPBACK]
    assert not outside, f"something listens beyond loopback: {outside}"
    for address in local_non_loopback_addresses():
        for port in served.ports:
            with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
                sock.settimeout(5)
                sock.connect((address, port))


def test_serve_stops_on_ctrl_c_with_tritonserver_exit_status(user_project, tmp_path):
    with ge_plugin_serve(user_project / "repo", user_project, tmp_path / "serve.log") as serve:
        serve.wait_ready()
        triton = serve.triton_pid()
        status = serve.interrupt()
        assert status == 0, serve.log_tail()
        assert (
            not Path(f"/proc/{triton}").exists() or "Z" in Path(f"/proc/{triton}/stat").read_text().split()[2]
        )


def test_serve_passes_a_failing_tritonserver_status_through(user_project, tmp_path):
    """A model that cannot load at start makes tritonserver exit 1 (explicit mode loading every model, the
    default, as model control none did); so must ge-plugin serve."""
    repo = tmp_path / "repo"
    broken = repo / MODEL
    (broken / "1").mkdir(parents=True)
    (broken / "config.pbtxt").write_text((user_project / "repo" / MODEL / "config.pbtxt").read_text())
    with ge_plugin_serve(repo, user_project, tmp_path / "serve.log") as serve:
        status = serve.process.wait(START_TIMEOUT_S)
        log = serve.log_tail(200)
    assert status == 1, log
    assert "classifier.om" in log


def test_serve_options_after_the_repository(user_project, tmp_path):
    """``ge-plugin serve model_repository --http-port 9000 ...`` is how ``ge-plugin serve --help`` shows it.

    Fails while serve.py declares its tritonserver pass-through as an ``argparse.REMAINDER`` positional:
    everything after REPO lands there and goes to tritonserver unparsed, which refuses ``--work-dir``."""
    with ge_plugin_serve(
        user_project / "repo", user_project, tmp_path / "serve.log", options_first=False
    ) as serve:
        serve.wait_ready()
        assert serve.interrupt() == 0, serve.log_tail()


# -- stopping and failing, as an operator meets it (docs/serving.md, "Failure behaviour") -----------------


def triton_argument(serve: ServeProcess, prefix: str) -> str:
    """The value of one of tritonserver's ``--name=value`` arguments, as ge-plugin serve started it."""
    cmdline = Path(f"/proc/{serve.triton_pid()}/cmdline").read_bytes().decode().split("\0")
    (value,) = [arg[len(prefix) :] for arg in cmdline if arg.startswith(prefix)]
    return value


def leftovers(shm_prefix: str) -> tuple[list[str], list[str]]:
    """Processes and /dev/shm regions named with one server's shm prefix (no other server's)."""
    processes = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and shm_prefix.encode() in (proc / "cmdline").read_bytes():
                processes.append(proc.name)
    return processes, sorted(p.name for p in Path("/dev/shm").glob(f"{shm_prefix}*"))


def infer_identity(port: int, model: str, value: float) -> np.ndarray:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        rows = np.full((2, 16), value, dtype=np.float32)
        tensor = httpclient.InferInput("INPUT0", [2, 16], "FP32")
        tensor.set_data_from_numpy(rows)
        answer = client.infer(model, [tensor]).as_numpy("OUTPUT0")
        assert np.array_equal(answer, rows)
        return answer
    finally:
        client.close()


def test_serve_stops_with_status_0_while_a_client_keeps_an_idle_connection(reload_repo, tmp_path):
    """tritonserver 2.51 waits for an idle keep-alive HTTP connection for its whole exit timeout and then
    exited 1 with the models still loaded; ge-plugin serve unloads them meanwhile, so the stop ends in 0."""
    import http.client

    body = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16}]}
    )
    with ge_plugin_serve(reload_repo, tmp_path, tmp_path / "serve.log", "--exit-timeout-secs=6") as serve:
        serve.wait_ready()
        prefix = triton_argument(serve, "--backend-config=python,shm-region-prefix-name=")
        assert triton_argument(serve, "--exit-timeout-secs=") == "6"
        idle = http.client.HTTPConnection("127.0.0.1", serve.http_port)
        idle.request("POST", "/v2/models/reload_one/infer", body)
        assert idle.getresponse().read() and idle.sock is not None  # kept alive, then left idle
        serve.process.send_signal(signal.SIGTERM)
        status = serve.process.wait(120)
        log = serve.log_tail(200)
        idle.close()
    assert status == 0, log
    assert "Exit timeout expired" not in log and "Found 1 HTTP service connections" in log
    assert leftovers(prefix) == ([], [])


def recoveries(serve: ServeProcess, model: str) -> float:
    """ge_serve_stub_recoveries_total{model} as the metrics port shows it (ge-plugin serve's own family,
    after tritonserver's)."""
    from ge_plugin.promtext import scrape

    return scrape(f"http://127.0.0.1:{serve.metrics_port}/metrics").total(
        "ge_serve_stub_recoveries_total", model=model
    )


def test_serve_recovers_a_killed_stub_and_still_stops_leaving_nothing(reload_repo, tmp_path):
    """kill -9 one of reload_two's two stubs while requests meet it. tritonserver 2.51 neither restarts it nor
    marks the model unready; after the documented unload + load, the old version never finished unloading,
    its surviving stub stayed, and the stop ran into the exit timeout (status 1). ge-plugin serve notices the
    death, reloads reload_two, ends the old surviving stub, counts it, and stops with status 0."""
    from tritonclient.utils import InferenceServerException

    with ge_plugin_serve(reload_repo, tmp_path, tmp_path / "serve.log", "--exit-timeout-secs=8") as serve:
        serve.wait_ready()
        prefix = triton_argument(serve, "--backend-config=python,shm-region-prefix-name=")
        triton = serve.triton_pid()
        stubs = {
            int(pid): Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in Path(f"/proc/{triton}/task/{triton}/children").read_text().split()
        }
        (victim,) = [p for p, cmd in stubs.items() if b"npu0_0" in cmd and b"reload_two" in cmd]
        (survivor,) = [p for p, cmd in stubs.items() if b"npu0_1" in cmd and b"reload_two" in cmd]
        assert recoveries(serve, "reload_two") == 0
        os.kill(victim, signal.SIGKILL)
        failed = 0
        for attempt in range(4):  # requests meet the dead stub, and then the reload
            try:
                infer_identity(serve.http_port, "reload_two", attempt)
            except InferenceServerException as exc:
                assert re.search("is not healthy|has no available versions", exc.message()), exc.message()
                failed += 1
        assert failed >= 1  # the dead instance's share of the requests failed
        wait_for("the recovery to be counted", lambda: recoveries(serve, "reload_two") == 1, timeout=60)
        assert not alive(survivor), "the old instance's surviving stub was ended"
        for attempt in range(6):
            infer_identity(serve.http_port, "reload_two", 10 + attempt)  # every request served again
        log = serve.log_path.read_text()
        assert re.search(
            r"the stub of reload_two instance npu0_0( \(pid \d+\))? died; reloading reload_two", log
        ), log
        serve.process.send_signal(signal.SIGTERM)
        status = serve.process.wait(120)
        log = serve.log_tail(200)
    assert status == 0, log
    assert "Exit timeout expired" not in log
    assert leftovers(prefix) == ([], [])


def test_serve_stays_ready_when_one_model_fails_to_load(reload_repo, tmp_path):
    """Per-model readiness: a model that fails to load, even unloaded again, does not make the server
    unready while the others serve (tritonserver's strict readiness did)."""
    from tritonclient.utils import InferenceServerException

    repo = tmp_path / "repo"
    shutil.copytree(reload_repo / "reload_one", repo / "reload_one")
    (repo / "broken" / "1").mkdir(parents=True)
    config = (reload_repo / "reload_one" / "config.pbtxt").read_text()
    (repo / "broken" / "config.pbtxt").write_text(config.replace('name: "reload_one"', 'name: "broken"'))
    with ge_plugin_serve(repo, tmp_path, tmp_path / "serve.log", "--load-model=reload_one") as serve:
        serve.wait_ready()
        client = admin_client(serve.http_port)
        try:
            with pytest.raises(InferenceServerException, match=re.escape("identity.om")):
                client.load_model("broken")
            assert client.is_server_ready() and client.is_model_ready("reload_one")
            assert not client.is_model_ready("broken")
            client.unload_model("broken")
            assert client.is_server_ready()
            infer_identity(serve.http_port, "reload_one", 3)
        finally:
            client.close()
        assert serve.interrupt() == 0, serve.log_tail()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(what: str, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def test_serve_killed_takes_tritonserver_and_its_stubs_along_and_the_ports_are_free_again(
    reload_repo, tmp_path
):
    """kill -9 of ge-plugin serve (an OOM kill, a crashed supervisor) left tritonserver and its stubs running,
    holding the gRPC and metrics ports: the next serve on the same ports failed, "Address already in use"."""
    with ge_plugin_serve(reload_repo, tmp_path, tmp_path / "first.log") as first:
        first.wait_ready()
        triton = first.triton_pid()
        stubs = [int(p) for p in Path(f"/proc/{triton}/task/{triton}/children").read_text().split()]
        assert stubs, "reload_repo's models run in stubs"
        first.process.kill()
        first.process.wait()
        wait_for("tritonserver and its stubs to end", lambda: not any(alive(p) for p in [triton, *stubs]))
        ports = first.ports
    with ge_plugin_serve(reload_repo, tmp_path, tmp_path / "second.log", ports=ports) as second:
        second.wait_ready()
        infer_identity(second.http_port, "reload_one", 5)
        assert second.interrupt() == 0, second.log_tail()


def test_serve_in_explicit_mode_loads_nothing_and_a_broken_model_does_not_stop_it(reload_repo, tmp_path):
    """``--model-control-mode explicit`` without ``--load-model`` means tritonserver's explicit mode: nothing
    is loaded at start, so a repository with a broken model comes up and the client loads the good one."""
    from tritonclient.utils import InferenceServerException

    repo = tmp_path / "repo"
    shutil.copytree(reload_repo / "reload_one", repo / "reload_one")
    (repo / "broken" / "1").mkdir(parents=True)
    config = (reload_repo / "reload_one" / "config.pbtxt").read_text()
    (repo / "broken" / "config.pbtxt").write_text(config.replace('name: "reload_one"', 'name: "broken"'))
    with ge_plugin_serve(repo, tmp_path, tmp_path / "serve.log", "--model-control-mode", "explicit") as serve:
        serve.wait_ready()
        client = admin_client(serve.http_port)
        try:
            index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
            assert index == {"broken": None, "reload_one": None}, index  # known, none loaded
            client.load_model("reload_one")
            infer_identity(serve.http_port, "reload_one", 2)
            with pytest.raises(InferenceServerException, match=re.escape("identity.om")):
                client.load_model("broken")
            assert client.is_server_ready()
        finally:
            client.close()
        assert serve.interrupt() == 0, serve.log_tail()


def test_serve_survives_idle_connections_past_its_open_files_limit(reload_repo, tmp_path):
    """With an open-files limit of 256, the old guard's accept loop ended at EMFILE (a socket, a pipe and a
    thread per connection) and the HTTP port stayed dead. The front closes the longest-idle connections to
    make room, and serves the next client while 600 idle ones are (or were) open."""
    import resource

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with ge_plugin_serve(reload_repo, tmp_path, tmp_path / "serve.log", preexec_fn=low_limit) as serve:
        serve.wait_ready()
        idle = []
        try:
            for _ in range(600):
                idle.append(socket.create_connection(("127.0.0.1", serve.http_port), timeout=10))
            infer_identity(serve.http_port, "reload_one", 1)  # answered while they are open
            threads = len(list(Path(f"/proc/{serve.process.pid}/task").iterdir()))
            assert threads < 40, f"ge-plugin serve runs {threads} threads with 600 idle connections"
        finally:
            for sock in idle:
                sock.close()
        infer_identity(serve.http_port, "reload_one", 2)  # and after they closed
        fds = len(list(Path(f"/proc/{serve.process.pid}/fd").iterdir()))
        assert fds < 64, f"ge-plugin serve holds {fds} fds once the idle connections closed"
        assert serve.interrupt() == 0, serve.log_tail()


def test_the_deployments_serve_command_loads_every_model_of_the_repository(reload_repo, tmp_path):
    """The pod runs ``ge-plugin serve`` with the arguments ``deploy k8s`` renders: with explicit mode, which
    loads only what ``--load-model`` names, they must still load every model (a pod serving none would pass
    the server-wide health check yet answer every request with 404)."""
    import tritonclient.http as httpclient

    from ge_plugin.deploy import k8s

    ports = (free_port(), free_port(), free_port())
    rendered = k8s.serve_args(repository=str(reload_repo))
    assert rendered[:2] == ["ge-plugin", "serve"]
    here = {"0.0.0.0": "127.0.0.1", k8s.WORK_DIR: str(tmp_path / "work")}
    here.update(zip(map(str, (k8s.HTTP_PORT, k8s.GRPC_PORT, k8s.METRICS_PORT)), map(str, ports)))
    command = [*ge_plugin_command(), *(here.get(arg, arg) for arg in rendered[1:])]
    models = sorted(p.name for p in reload_repo.iterdir() if (p / "config.pbtxt").is_file())
    with open(tmp_path / "serve.log", "wb") as log:
        serve = ServeProcess(
            subprocess.Popen(command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT),
            tmp_path / "serve.log",
            *ports,
        )
        try:
            serve.wait_ready()
            client = httpclient.InferenceServerClient(f"127.0.0.1:{serve.http_port}")
            try:
                assert [m for m in models if not client.is_model_ready(m)] == [], serve.log_tail()
            finally:
                client.close()
            assert serve.interrupt() == 0, serve.log_tail()
        finally:
            serve.kill()
