"""End-to-end fixtures: real tritonserver 2.51 processes serving sim OMs through backend ``ge``.

Two servers for the whole session, on free loopback ports. ``server`` (model control ``none``) serves every
model of ``specs/session`` and carries the numerics, gear, bad-input and metrics tests. ``control_server``
(``explicit``) starts with no model: the fault and load/unload tests load their own models from
``specs/control`` into it, so a model they break or restart can disturb no other test. Each server writes
its output to a log file; when a test fails, the tail of the log of every server it used is attached to
the report, since the cause is usually there.

Test modules reach the helpers through these fixtures (pytest's importlib mode gives them no import path
to this file).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.errors import ServeError
from ge_plugin.models import write_demo_models, write_model
from ge_plugin.promtext import Metrics, scrape
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec import load_specs

SPECS = Path(__file__).parent / "specs"
START_TIMEOUT_S = 120.0
#: how long a metric may take to show a change: the backend flushes every 100 ms in these specs
METRICS_TIMEOUT_S = 15.0
#: longer than the 100 ms metrics_interval_ms of every e2e spec: a flush that was due has happened
SETTLE_S = 0.25


# -- models -----------------------------------------------------------------------------------------------

MLP_W1 = np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(8, 4)
MLP_B1 = np.array([0.1, -0.2, 0.3, -0.4], dtype=np.float32)
MLP_W2 = np.linspace(0.5, -0.5, 24, dtype=np.float32).reshape(8, 3)


def mlp_model() -> onnx.ModelProto:
    """features [batch, 8], context [batch, 2, 4] -> score = relu(features W1 + b1) + mean(context, 1) [batch, 4],
    aux = features W2 [batch, 3]: fixed dims on two inputs, and two outputs a client can choose between."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["features", "W1"], ["fw"]),
            helper.make_node("Add", ["fw", "b1"], ["fwb"]),
            helper.make_node("Relu", ["fwb"], ["hidden"]),
            helper.make_node("ReduceMean", ["context"], ["pooled"], axes=[1], keepdims=0),
            helper.make_node("Add", ["hidden", "pooled"], ["score"]),
            helper.make_node("MatMul", ["features", "W2"], ["aux"]),
        ],
        "mlp_e2e",
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 8]),
            helper.make_tensor_value_info("context", TensorProto.FLOAT, ["batch", 2, 4]),
        ],
        [
            helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("aux", TensorProto.FLOAT, ["batch", 3]),
        ],
        [
            numpy_helper.from_array(MLP_W1, "W1"),
            numpy_helper.from_array(MLP_B1, "b1"),
            numpy_helper.from_array(MLP_W2, "W2"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def ids32_model() -> onnx.ModelProto:
    """ids int32 [batch, 4] -> twice = 2 * ids: a model whose OM takes int32, served with an int64 config."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["ids", "ids"], ["twice"])],
        "ids32",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", 4])],
        [helper.make_tensor_value_info("twice", TensorProto.INT32, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """The demo ONNX models and the demo LLaMA's tokenizer, plus ``mlp.onnx`` and ``ids32.onnx``."""
    from ge_plugin.text.demo import write_demo_tokenizer

    directory = tmp_path_factory.mktemp("e2e-models")
    write_demo_models(directory)
    write_demo_tokenizer(directory)
    write_model(directory / "mlp.onnx", mlp_model())
    write_model(directory / "ids32.onnx", ids32_model())
    return directory


@pytest.fixture(scope="session")
def reference(models_dir) -> Callable[..., dict[str, np.ndarray]]:
    """``reference("tiny_llama", input_ids=ids)``: onnxruntime run directly on the ONNX the OM was built from."""
    import onnxruntime as ort

    sessions: dict[str, ort.InferenceSession] = {}

    def run(stem: str, **feeds: np.ndarray) -> dict[str, np.ndarray]:
        if stem not in sessions:
            sessions[stem] = ort.InferenceSession(
                str(models_dir / f"{stem}.onnx"), providers=["CPUExecutionProvider"]
            )
        session = sessions[stem]
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds)))

    return run


def build_repository(
    spec_dir: Path, models_dir: Path, repo: Path, acl_json: Mapping[str, dict] | None = None
) -> list[str]:
    """Sim OMs and configs for every spec in ``spec_dir``, as ``ge-plugin atc --sim`` and ``render`` do.

    The specs are copied next to the ONNX files they name; ``acl_json`` overrides a model's acl_json (paths
    known only at run time, such as a simulator report folder)."""
    copies = []
    for path in sorted(spec_dir.glob("*.yaml")):
        copy = models_dir / path.name
        if copy.exists():
            raise FileExistsError(f"{copy}: two spec folders hold a spec named {path.name}")
        shutil.copyfile(path, copy)
        copies.append(copy)
    specs = load_specs(copies)
    specs = [
        attrs.evolve(spec, acl_json=acl_json[spec.name]) if acl_json and spec.name in acl_json else spec
        for spec in specs
    ]
    for spec in specs:
        output = repo / spec.name / "1" / Path(spec.om_filename).stem
        output.parent.mkdir(parents=True, exist_ok=True)
        build(parse_args(atc_args(spec, output=output)))
    write_repository(specs, repo)
    return [spec.name for spec in specs]


# -- servers ---------------------------------------------------------------------------------------------


def _settled_part(metrics: Metrics) -> list[tuple[str, dict[str, str], float]]:
    """The samples requests move: the backend's counters and Triton's request counts (not its durations,
    nor gauges of the host)."""
    return [
        sample
        for sample in metrics.samples
        if sample[0].startswith("ge_") or sample[0] in ("nv_inference_count", "nv_inference_exec_count")
    ]


@attrs.define
class RunningServer:
    """A started tritonserver with the client-side helpers the tests share."""

    triton: TritonServer
    log_path: Path

    @property
    def http_url(self) -> str:
        return self.triton.http_url

    @property
    def grpc_url(self) -> str:
        return self.triton.grpc_url

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def client(self, protocol: str, *, admin: bool = True):
        """A new client (one per thread: neither client is meant to be shared by concurrent calls); with
        ``admin`` it sends the server's control keys (``TritonServer.admin_headers``) with every call, as
        ge-plugin's own calls do, without it it is any client on the network."""
        kwargs = {"network_timeout": 120.0} if protocol == "http" else {}
        if admin:
            return self.triton.control_client(protocol, **kwargs)
        if protocol == "http":
            import tritonclient.http as httpclient

            return httpclient.InferenceServerClient(self.http_url, **kwargs)
        import tritonclient.grpc as grpcclient

        return grpcclient.InferenceServerClient(self.grpc_url)

    def infer(
        self,
        protocol: str,
        model: str,
        inputs: Mapping[str, np.ndarray],
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """Output name -> array (only those the server sent); InferenceServerException as the client raises it."""
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        from tritonclient.utils import np_to_triton_dtype

        module = httpclient if protocol == "http" else grpcclient
        tensors = []
        for name, array in inputs.items():
            tensor = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        wanted = [module.InferRequestedOutput(name) for name in outputs] if outputs is not None else None
        client = self.client(protocol)
        try:
            result = client.infer(model, tensors, outputs=wanted)
        finally:
            client.close()
        response = result.get_response()
        if protocol == "http":
            names = [o["name"] for o in response.get("outputs", [])]
        else:
            names = [o.name for o in response.outputs]
        return {name: result.as_numpy(name) for name in names}

    def infer_many(
        self, protocol: str, model: str, requests: Sequence[Mapping[str, np.ndarray]]
    ) -> list[dict[str, np.ndarray] | Exception]:
        """Send every request at once, one thread and client each; per request its outputs or its error."""
        from tritonclient.utils import InferenceServerException

        def one(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | Exception:
            try:
                return self.infer(protocol, model, inputs)
            except InferenceServerException as exc:
                return exc

        with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
            return list(pool.map(one, requests))

    @contextlib.contextmanager
    def loaded(self, model: str, *, timeout: float = 60.0) -> Iterator[RunningServer]:
        """``model`` loaded (explicit model control) for the block, then unloaded, waiting until its instance
        has finished: unload returns while it still finalizes, and the next load must start from a clean
        slate (a new stub, new metric series once the old ones are deleted: docs/serving.md)."""
        client = self.client("http")
        client.load_model(model)
        try:
            yield self
        finally:
            client.unload_model(model)
            try:
                self.wait_until(
                    f"{model} to finish unloading",
                    lambda: (
                        not any(
                            entry["name"] == model and entry.get("state") in ("READY", "UNLOADING")
                            for entry in client.get_model_repository_index()
                        )
                    ),
                    timeout=timeout,
                )
            finally:
                client.close()

    @staticmethod
    def wait_until(what: str, condition: Callable[[], bool], *, timeout: float = 60.0) -> None:
        """Poll ``condition`` until it holds; AssertionError naming ``what`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.05)

    def is_ready(self) -> bool:
        client = self.client("http")
        try:
            return bool(client.is_server_ready())
        finally:
            client.close()

    def metrics(self) -> Metrics:
        return scrape(self.triton.metrics_url)

    def baseline(self, *, timeout: float = METRICS_TIMEOUT_S) -> Metrics:
        """A scrape that no earlier request will still change: two scrapes, more than a flush interval apart,
        that agree. A delta measured from a scrape taken while an earlier test's counts were still on their
        way would include them."""
        deadline = time.monotonic() + timeout
        previous = self.metrics()
        while True:
            time.sleep(SETTLE_S)
            current = self.metrics()
            if _settled_part(current) == _settled_part(previous):
                return current
            if time.monotonic() > deadline:
                raise AssertionError(f"metrics kept changing for {timeout} s with no request in flight")
            previous = current

    def wait_totals(
        self, targets: Sequence[tuple[str, Mapping[str, str], float]], *, timeout: float = METRICS_TIMEOUT_S
    ) -> Metrics:
        """Poll until every ``total(name, **labels)`` has reached its target, then return that scrape.

        Custom metrics reach Triton on the backend's timer and Triton's own statistics after the response,
        so a test that waited on one value could read another one mid-flush; waiting on all of them cannot.
        """
        deadline = time.monotonic() + timeout
        while True:
            metrics = self.metrics()
            short = [
                f"{name}{dict(labels)} = {metrics.total(name, **labels)} (waiting for {target})"
                for name, labels, target in targets
                if metrics.total(name, **labels) < target
            ]
            if not short:
                return metrics
            if time.monotonic() > deadline:
                raise AssertionError(f"metrics did not arrive within {timeout} s: " + "; ".join(short))
            time.sleep(0.05)

    def assert_deltas(
        self, before: Metrics, deltas: Sequence[tuple[str, Mapping[str, str], float]]
    ) -> Metrics:
        """Wait until each metric has moved by its delta since ``before``, then assert it moved by exactly that."""
        after = self.wait_totals(
            [(name, labels, before.total(name, **labels) + d) for name, labels, d in deltas]
        )
        moved = {
            f"{name}{dict(labels)}": after.total(name, **labels) - before.total(name, **labels)
            for name, labels, _ in deltas
        }
        assert moved == {f"{name}{dict(labels)}": d for name, labels, d in deltas}
        return after

    def stub_pids(self) -> list[int]:
        """Python-backend stub processes (one per model instance) whose parent is this server."""
        parent = str(self.triton.process.pid)
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = stat.rsplit(")", 1)[1].split()[1]
            if ppid == parent and b"triton_python_backend_stub" in cmdline:
                pids.append(int(proc.name))
        return sorted(pids)


@contextlib.contextmanager
def running_server(options: ServerOptions, log_path: Path) -> Iterator[RunningServer]:
    """Start, wait until ready (printing the log's tail if it never is), stop on exit; then the backend's
    stubs must have given the simulator's sanitizer (on for the session) no error or leak to report."""
    with open(log_path, "wb") as log, TritonServer(options, stdout=log, stderr=log) as triton:
        server = RunningServer(triton, log_path)
        try:
            triton.wait_ready(timeout=START_TIMEOUT_S)
        except ServeError as exc:
            raise ServeError(f"{exc}\n--- {log_path} (tail) ---\n{server.log_tail()}") from None
        yield server
    findings = [
        line
        for line in log_path.read_text(errors="replace").splitlines()
        if line.startswith("ge-plugin sim check:") and ": warning:" not in line
    ]
    assert not findings, (
        f"the sanitizer caught memory bugs in the backend's stubs (see {log_path}):\n" + "\n".join(findings)
    )


def server_options(repo: Path, work_dir: Path, **kwargs) -> ServerOptions:
    return ServerOptions(
        repository=repo,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=work_dir,
        **kwargs,
    )


@pytest.fixture
def start_server(
    triton_work_dir, tmp_path
) -> Callable[..., contextlib.AbstractContextManager[RunningServer]]:
    """A server of the test's own: ``with start_server(repo, http_guard=False) as running: ...``."""

    def start(repo: Path, **options) -> contextlib.AbstractContextManager[RunningServer]:
        return running_server(server_options(repo, triton_work_dir, **options), tmp_path / "tritonserver.log")

    return start


@pytest.fixture(scope="session")
def triton_work_dir(tmp_path_factory) -> Path:
    """One backend directory for every server of the session (prepared once, copied only when changed)."""
    return tmp_path_factory.mktemp("triton-work")


@pytest.fixture(scope="session")
def session_models(models_dir, tmp_path_factory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("session-repo")
    return repo, build_repository(SPECS / "session", models_dir, repo)


@pytest.fixture(scope="session")
def server(session_models, triton_work_dir, tmp_path_factory) -> Iterator[RunningServer]:
    """Every model of specs/session, loaded at start (model control ``none``)."""
    repo, _ = session_models
    log = tmp_path_factory.mktemp("logs") / "session-tritonserver.log"
    with running_server(server_options(repo, triton_work_dir), log) as running:
        yield running


@pytest.fixture(scope="session")
def sim_reports(tmp_path_factory) -> Path:
    """Where the control server's identity_cycle stubs write their simulator reports."""
    return tmp_path_factory.mktemp("sim-reports")


@pytest.fixture(scope="session")
def control_server(models_dir, sim_reports, triton_work_dir, tmp_path_factory) -> Iterator[RunningServer]:
    """An explicit-mode server with no model loaded; tests load specs/control models themselves."""
    repo = tmp_path_factory.mktemp("control-repo")
    build_repository(
        SPECS / "control",
        models_dir,
        repo,
        acl_json={"identity_cycle": {"ge_plugin_sim": {"report_dir": str(sim_reports)}}},
    )
    log = tmp_path_factory.mktemp("logs") / "control-tritonserver.log"
    options = server_options(repo, triton_work_dir, model_control_mode="explicit")
    with running_server(options, log) as running:
        yield running


@pytest.fixture(scope="session")
def reload_repo(models_dir, tmp_path_factory) -> Path:
    """specs/reload built once: models that tests unload, load, crash and stop with their own servers."""
    repo = tmp_path_factory.mktemp("reload-repo")
    build_repository(SPECS / "reload", models_dir, repo)
    return repo


@pytest.fixture
def own_server(triton_work_dir, tmp_path) -> Iterator[Callable[..., RunningServer]]:
    """``own_server(repo, **ServerOptions fields)``: a server the test may stop itself and whose leftovers it
    may inspect; every one still running at teardown is stopped and cleaned up after."""
    with contextlib.ExitStack() as stack:
        count = 0

        def start(repo: Path, **kwargs) -> RunningServer:
            nonlocal count
            count += 1
            log = tmp_path / f"tritonserver-{count}.log"
            return stack.enter_context(running_server(server_options(repo, triton_work_dir, **kwargs), log))

        yield start


# -- the text server: a stand-in for the generating model behind the front's text endpoints -------------------

STANDIN = Path(__file__).parent / "standin" / "model.py"
#: Contract B (docs/generate.md): the generating model's inputs (name, type, dims, optional) and outputs
STANDIN_INPUTS = (
    ("input_ids", "TYPE_INT64", "[-1]", False),
    ("max_tokens", "TYPE_INT32", "[1]", True),
    ("temperature", "TYPE_FP32", "[1]", True),
    ("top_k", "TYPE_INT32", "[1]", True),
    ("top_p", "TYPE_FP32", "[1]", True),
    ("seed", "TYPE_INT64", "[1]", True),
    ("ignore_eos", "TYPE_BOOL", "[1]", True),
    ("stop_ids", "TYPE_INT64", "[-1]", True),
    ("stream", "TYPE_BOOL", "[1]", True),
)
STANDIN_OUTPUTS = (
    ("output_ids", "TYPE_INT64", "[-1]"),
    ("finish_reason", "TYPE_STRING", "[1]"),
    ("prompt_tokens", "TYPE_INT32", "[1]"),
    ("completion_tokens", "TYPE_INT32", "[1]"),
)


def write_standin(repo: Path, name: str, *, tokenizer: bool = True, **params: object) -> Path:
    """A decoupled Python model following Contract B (tests/e2e/standin/model.py), with the demo tokenizer
    beside it as ``ge-plugin render`` puts a spec's; ``tokenizer=False`` leaves the config naming none."""
    from ge_plugin.text.demo import write_demo_tokenizer

    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STANDIN, folder / "1" / "model.py")
    write_demo_tokenizer(folder)
    names = {"tokenizer_json": "tokenizer.json", "tokenizer_config_json": "tokenizer_config.json"}
    values = {**(names if tokenizer else {}), **{key: str(value) for key, value in params.items()}}
    inputs = ",\n".join(
        f'  {{ name: "{n}" data_type: {t} dims: {d}{" optional: true" if o else ""} }}'
        for n, t, d, o in STANDIN_INPUTS
    )
    outputs = ",\n".join(f'  {{ name: "{n}" data_type: {t} dims: {d} }}' for n, t, d in STANDIN_OUTPUTS)
    parameters = "\n".join(
        f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in values.items()
    )
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\nmodel_transaction_policy {{ decoupled: true }}\n'
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\ninstance_group [ {{ kind: KIND_CPU count: 1 }} ]\n"
        f"{parameters}\n"
    )
    return folder


@pytest.fixture(scope="session")
def text_server(triton_work_dir, tmp_path_factory) -> Iterator[RunningServer]:
    """Stand-ins for the generating LLaMA: ``standin`` (fast), ``busy`` (one slot, 30 ms a token: the queue
    fills, a cancel shows), ``plain`` (no tokenizer named), ``small_vocab`` (fails its load: its vocabulary
    is smaller than the tokenizer's); the OpenAI endpoints on the HTTP port and on a port of their own."""
    repo = tmp_path_factory.mktemp("text-repo")
    write_standin(repo, "standin", delay_ms=1)
    write_standin(repo, "busy", slots=1, delay_ms=30)
    write_standin(repo, "plain", tokenizer=False)
    write_standin(repo, "small_vocab", vocab_size=500)
    log = tmp_path_factory.mktemp("logs") / "text-tritonserver.log"
    with running_server(
        server_options(repo, triton_work_dir, openai_port=free_port(), extra_args=["--exit-on-error=false"]),
        log,
    ) as running:
        running.wait_until(
            "the stand-ins to load", lambda: _ready(running, "standin", "busy", "plain"), timeout=60
        )
        yield running


def _ready(server: RunningServer, *models: str) -> bool:
    client = server.client("http")
    try:
        return all(client.is_model_ready(model) for model in models)
    finally:
        client.close()


# -- reporting -------------------------------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, RunningServer):
                report.sections.append((f"tritonserver log tail ({name})", value.log_tail()))
