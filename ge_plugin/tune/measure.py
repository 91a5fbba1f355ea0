"""Measuring one candidate as a user would serve it: rendered, compiled, loaded into a real tritonserver,
timed by perf_analyzer at each requested concurrency, unloaded.

One server runs the whole sweep in explicit model control, so a candidate costs a load rather than a server
start. Each candidate is its own model (``<name>__t<id>``), and the next one is loaded only once the last has
finished unloading: Triton's ``unload_model`` returns while the old instances still finalize, and two
candidates must never share the device. On the simulator, a candidate's acl.json gives every one of its gears
the profile's device time (timing-only: the host's cores compute nothing); on an Ascend host nothing is added
and the card is measured. Sim OMs are built with ``ge-plugin atc``'s builder, real OMs with the ``atc`` on
PATH, each gear set once.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import attrs

from ge_plugin.atc.command import atc_args
from ge_plugin.errors import BenchError, GePluginError, ServeError, SpecError, TuneError
from ge_plugin.measure import perf
from ge_plugin.measure.records import BenchModel
from ge_plugin.measure.serverstats import ServerStats, window
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune import inputs, specedit
from ge_plugin.tune.profile import DeviceProfile, DeviceTimes
from ge_plugin.tune.records import FAILED, MEASURED, REFUSED, UNSERVABLE, Candidate, TunePoint
from ge_plugin.tune.space import Config

SIM = "sim"


@attrs.frozen
class Settings:
    concurrencies: tuple[int, ...]
    measurement_ms: int = 2000
    stability_percentage: int = 20
    max_trials: int = 6
    #: how long a candidate may take to load (every gear is warmed up on every stream first)
    load_timeout_s: float = 300.0


def sim_acl_json(spec: ModelSpec, times: DeviceTimes) -> dict[str, Any]:
    """The spec's acl_json with the simulator's section: timing-only, each gear its device time."""
    acl = dict(spec.acl_json)
    section = dict(acl.get("ge_plugin_sim") or {})
    section.update({"timing_only": True, "execute_latency_ms": dict(times.table)})
    acl["ge_plugin_sim"] = section
    return acl


def compile_om(spec: ModelSpec, output: Path, *, device_kind: str) -> None:
    """The OM of ``spec`` at ``output``: a sim OM here, ATC's own on an Ascend host."""
    args = atc_args(spec, output=output.with_suffix(""))
    if device_kind == SIM:
        from ge_plugin.atc.flags import parse_args
        from ge_plugin.atc.simbuild import build

        build(parse_args(args))
        return
    atc = shutil.which("atc")
    if atc is None:
        raise TuneError(
            "no atc on PATH: source CANN's set_env.sh so that each candidate's OM can be compiled"
        )
    done = subprocess.run([atc, *args], capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise TuneError(f"atc failed for {spec.name} (exit {done.returncode}):\n{tail}")


class Sweep:
    """The server and everything a candidate needs; a context manager that stops the server."""

    def __init__(
        self,
        spec: ModelSpec,
        text: str,
        *,
        work: Path,
        settings: Settings,
        shapes: Sequence[inputs.Shapes],
        input_data: Path,
        profile: Optional[DeviceProfile],
        device_kind: str,
        say: Callable[[str], None] = lambda _: None,
    ):
        if device_kind == SIM and profile is None:
            raise TuneError(
                "the simulator needs each gear's device time: --profile FILE (ge-plugin tune-profile on an Ascend "
                "host, or written from msprof / ais_bench results) or --seed-profile"
            )
        self.spec, self.text, self.work, self.settings = spec, text, Path(work), settings
        self.shapes, self.input_data, self.profile = list(shapes), input_data, profile
        self.device_kind, self.say = device_kind, say
        self.repository = self.work / "repository"
        self.specs_dir = self.work / "candidates"
        self.built: dict[tuple[Any, ...], Path] = {}
        self._stack = contextlib.ExitStack()
        self.server: Optional[TritonServer] = None
        self.stats: Optional[ServerStats] = None

    # -- the server -------------------------------------------------------------------------------------

    def __enter__(self) -> Sweep:
        shutil.rmtree(self.repository, ignore_errors=True)
        self.repository.mkdir(parents=True)
        self.specs_dir.mkdir(parents=True, exist_ok=True)
        options = ServerOptions(
            repository=self.repository,
            http_port=free_port(),
            grpc_port=free_port(),
            metrics_port=free_port(),
            model_control_mode="explicit",
            work_dir=self.work / "triton",
            # this sweep's own simulated device: no other simulator on the host holds it
            environment={"GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(self.work / "device-locks")},
            open_apis=perf.SERVER_APIS,
            # perf_analyzer measures tritonserver itself, on loopback, as before the gRPC front came: the
            # front's own cost is ge-plugin serve's, measured apart (benchmarks/grpc_front.py)
            grpc_guard=False,
        )
        self.log_path = self.work / "tritonserver.log"
        try:
            log = self._stack.enter_context(open(self.log_path, "wb"))
            self.server = self._stack.enter_context(TritonServer(options, stdout=log, stderr=log))
            try:
                self.server.wait_ready(timeout=120)
            except ServeError as exc:
                raise TuneError(f"{exc}; see {self.log_path}") from None
            self.stats = self._stack.enter_context(ServerStats(self.server.http_url, self.server.metrics_url))
            self.client = self.server.control_client("grpc")
            self._stack.callback(self.client.close)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def server_version(self) -> str:
        return self.stats.version() if self.stats is not None else ""

    # -- one candidate ------------------------------------------------------------------------------------

    def evaluate(self, config: Config, number: int, why: str) -> Candidate:
        """Write, check, build, serve and measure ``config`` as candidate ``number``."""
        started = time.monotonic()
        base = Candidate(number, config, why, MEASURED)
        try:
            candidate_spec, text = specedit.spec_for(self.spec, self.text, config)
        except SpecError as exc:
            return attrs.evolve(base, status=REFUSED, reason="; ".join(_short(p) for p in exc.problems))
        (self.specs_dir / f"t{number:03d}.yaml").write_text(text)
        refused = inputs.refused_shape(candidate_spec, self.shapes)
        if refused:
            return attrs.evolve(base, status=UNSERVABLE, reason=refused)
        try:
            points, note = self.serve(
                candidate_spec, f"{self.spec.name}__t{number:03d}", self.settings.concurrencies
            )
        except (TuneError, BenchError, ServeError) as exc:
            return attrs.evolve(base, status=FAILED, reason=str(exc), seconds=time.monotonic() - started)
        return attrs.evolve(base, points=tuple(points), device_note=note, seconds=time.monotonic() - started)

    def serve(self, spec: ModelSpec, name: str, concurrencies: Sequence[int]) -> tuple[list[TunePoint], str]:
        """``spec`` served as ``name`` and measured at each concurrency; the device-time note."""
        note = ""
        served = attrs.evolve(spec, name=name)
        if self.device_kind == SIM:
            assert self.profile is not None
            times = self.profile.times_for(spec)
            note = times.note()
            served = attrs.evolve(served, acl_json=sim_acl_json(spec, times))
        try:
            write_repository([served], self.repository)
            om = self.repository / name / "1" / served.om_filename
            self._om(served, om)
        except GePluginError as exc:
            raise TuneError(f"could not build {name}: {exc}") from None
        self._load(name)
        try:
            return [self._point(name, c) for c in concurrencies], note
        finally:
            self._unload(name)

    def _om(self, spec: ModelSpec, om: Path) -> None:
        key = (str(spec.source_path), spec.gears, spec.dims_gear_values, tuple(map(tuple, spec.image_sizes)))
        if key in self.built:
            shutil.copyfile(self.built[key], om)
            return
        compile_om(spec, om, device_kind=self.device_kind)
        self.built[key] = om

    def _load(self, name: str) -> None:
        from tritonclient.utils import InferenceServerException

        try:
            self.client.load_model(name, client_timeout=self.settings.load_timeout_s)
        except InferenceServerException as exc:
            message = (exc.message() or str(exc)).strip().splitlines()
            raise TuneError(f"tritonserver did not load {name}: {message[0] if message else exc}") from None
        deadline = time.monotonic() + self.settings.load_timeout_s
        while not self.client.is_model_ready(name):
            if time.monotonic() > deadline:
                raise TuneError(f"{name} was not ready after {self.settings.load_timeout_s:.0f} s")
            time.sleep(0.1)

    def _unload(self, name: str, timeout: float = 120.0) -> None:
        """Unload and wait until the instances are gone (UNLOADING lasts past unload_model's return)."""
        from tritonclient.utils import InferenceServerException

        with contextlib.suppress(InferenceServerException):
            self.client.unload_model(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = {m.name: m.state for m in self.client.get_model_repository_index().models}
            if states.get(name) not in ("READY", "LOADING", "UNLOADING"):
                return
            time.sleep(0.1)
        raise TuneError(f"{name} was still unloading after {timeout:.0f} s")

    def _point(self, name: str, concurrency: int) -> TunePoint:
        assert self.server is not None and self.stats is not None
        model = BenchModel(name, "ge", "tune", "tune", f"candidate {name}", self.spec.inputs[0].name)
        settings = perf.PerfSettings(
            self.settings.measurement_ms, self.settings.stability_percentage, self.settings.max_trials
        )
        before = self.stats.read(name)
        for attempt in (1, 2):
            try:
                measured = perf.measure(
                    model,
                    url=self.server.grpc_url,
                    concurrency=concurrency,
                    settings=settings,
                    input_data=self.input_data,
                    work=self.work / "perf",
                )
                break
            except BenchError as exc:
                # perf_analyzer 2.51 now and then exits mid-run on a busy host, with no CSV and no reason
                # given: once more before the candidate counts as failed
                if attempt == 2:
                    raise
                self.say(f"  perf_analyzer failed on {name} at concurrency {concurrency}, again: {exc}")
                before = self.stats.read(name)
        server = window(before, self.stats.read(name))
        row = measured.row
        return TunePoint(
            concurrency=concurrency,
            throughput=row.throughput,
            p50_ms=row.p50_us / 1000,
            p99_ms=row.p99_us / 1000,
            stable=measured.stable,
            rows_per_execute=server.rows_per_execute,
        )


def _short(problem: str) -> str:
    """A validator's line without the temporary file name it was checked under."""
    return problem.split(": ", 1)[1] if ": $" in problem else problem
