"""Model versions on the real server (explicit model control): a rolling update from version 1 to 2.

Each step is what docs/serving.md tells an operator to do: edit the spec, ``ge-plugin atc --sim
--model-version N`` (only the new version's OM), ``ge-plugin render``, then ``load`` the model. Version 1
(identity) and version 2 (identity + 1) answer differently, so every response says which version computed
it. While version 2 is added, a client keeps asking version 1 by number; while version 1 is retired, another
asks without a number (the policy's latest). Neither may see a failure. Version 1's stub must then be gone,
its simulator report showing every device and pinned byte given back (as tests/e2e/test_model_control.py
proves for unload).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from tritonclient.utils import InferenceServerException

from ge_plugin.cli import main

pytestmark = pytest.mark.e2e

MODEL = "ident_versions"
#: requests each client loop must have had answered before and after a step, so that it overlaps the step
OVERLAP = 20
TIMEOUT_S = 60.0


class Operator:
    """One model of the control server's repository, changed the way an operator changes it."""

    def __init__(
        self, server, name: str, work: Path, identity_onnx: Path, plus_one: onnx.ModelProto, reports: Path
    ):
        self.server = server
        self.name = name
        self.repo = Path(server.triton.options.repository)
        self.spec = work / f"{name}.yaml"
        self.identity_onnx = identity_onnx
        self.plus_one_onnx = work / "plus_one.onnx"
        onnx.save(plus_one, self.plus_one_onnx)
        self.reports = reports
        self.client = server.client("http")

    def write_spec(self, versions: str, policy: str = "") -> None:
        self.spec.write_text(
            f"name: {self.name}\n"
            f"model: {{om: identity.om, source: {self.identity_onnx}, soc_version: Ascend910B3}}\n"
            "inputs: [{name: INPUT0, dtype: fp32, dims: [16]}]\n"
            "outputs: [{name: OUTPUT0, dtype: fp32, dims: [16]}]\n"
            "batching: {gears: [1, 4]}\n"
            f"acl_json: {{ge_plugin_sim: {{report_dir: {self.reports}}}}}\n"
            "metrics_interval_ms: 100\n"
            f"versions:\n{versions}"
            f"{policy}"
        )

    def build(self, version: int) -> None:
        assert (
            main(
                [
                    "atc",
                    str(self.spec),
                    "--sim",
                    "--repository",
                    str(self.repo),
                    "--model-version",
                    str(version),
                ]
            )
            == 0
        )

    def render(self) -> None:
        assert main(["render", str(self.spec), "-o", str(self.repo)]) == 0

    def load(self) -> None:
        self.client.load_model(self.name)

    def states(self) -> dict[str, str]:
        """Version -> state, from the repository index."""
        return {
            entry["version"]: entry["state"]
            for entry in self.client.get_model_repository_index()
            if entry["name"] == self.name and "version" in entry
        }

    def ready(self) -> list[str]:
        """The versions Triton serves (the index also remembers versions unloaded earlier, as UNAVAILABLE)."""
        return sorted(version for version, state in self.states().items() if state == "READY")

    def stubs(self) -> set[int]:
        """This model's stub processes (their command line names the model's folder)."""
        mine = set()
        for pid in self.server.stub_pids():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if f"/{self.name}/".encode() in cmdline:
                mine.add(pid)
        return mine

    def report_of(self, pid: int) -> dict:
        """The simulator report the stub ``pid`` writes when its instance is finalized."""
        self.server.wait_until(
            f"the simulator report of stub {pid}", lambda: any(self.reports.glob(f"sim-{pid}-*.json"))
        )
        (path,) = self.reports.glob(f"sim-{pid}-*.json")
        return json.loads(path.read_text())

    def unload_all(self) -> None:
        """Unload and wait for every stub to exit: unload_model returns while the model is still UNLOADING."""
        stubs = self.stubs()
        self.client.unload_model(self.name)
        self.server.wait_until(
            f"{self.name} to unload", lambda: set(self.states().values()) <= {"UNAVAILABLE"}
        )
        self.server.wait_until(f"the stubs of {self.name} to exit", lambda: not (self.stubs() & stubs))
        for pid in stubs:
            self.report_of(pid)

    def infer(self, rows: np.ndarray, version: str = "") -> np.ndarray:
        import tritonclient.http as httpclient

        tensor = httpclient.InferInput("INPUT0", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows)
        return self.client.infer(self.name, [tensor], model_version=version).as_numpy("OUTPUT0")


class ClientLoop(threading.Thread):
    """Asks the model (one version, or "" for the policy's choice) again and again on its own connection,
    counting answers that are right, wrong, or errors."""

    def __init__(self, server, name: str, version: str, offset: float):
        super().__init__(daemon=True)
        self.server, self.name, self.version, self.offset = server, name, version, offset
        self.answered = 0
        self.failures: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        client = httpclient.InferenceServerClient(self.server.http_url, network_timeout=60.0)
        try:
            n = 0
            while not self._halt.is_set():
                rows = np.full((1, 16), n % 100, dtype=np.float32)
                tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
                tensor.set_data_from_numpy(rows)
                try:
                    out = client.infer(self.name, [tensor], model_version=self.version).as_numpy("OUTPUT0")
                except InferenceServerException as exc:
                    self.failures.append(str(exc))
                else:
                    if np.array_equal(out, rows + self.offset):
                        self.answered += 1
                    else:
                        self.failures.append(f"wrong answer {out[0, :2]} for {rows[0, :2]}")
                n += 1
        finally:
            client.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=TIMEOUT_S)


@pytest.fixture
def operator(control_server, models_dir, tmp_path, graphs) -> Iterator[Operator]:
    reports = tmp_path / "reports"
    reports.mkdir()
    op = Operator(control_server, MODEL, tmp_path, models_dir / "identity.onnx", graphs.plus_one(), reports)
    shutil.rmtree(op.repo / MODEL, ignore_errors=True)  # each test starts with no folder of this model
    try:
        yield op
    finally:
        op.unload_all()  # no stub of this test may outlive it (test_model_control counts stubs)
        op.client.close()
        shutil.rmtree(op.repo / MODEL, ignore_errors=True)


def assert_gave_everything_back(report: dict) -> None:
    pinned = report["host_pinned"]
    assert pinned["mallocs"] > 0
    assert pinned["live_bytes"] == 0 and pinned["frees"] == pinned["mallocs"], pinned
    assert pinned["reclaimed_allocations"] == 0, pinned
    for device in report["devices"]:
        assert device["live_bytes"] == 0 and device["live_allocations"] == 0, device
        assert device["frees"] == device["mallocs"] and device["reclaimed_allocations"] == 0, device
        assert device["loads"] == device["unloads"], device


def test_rolling_update_from_version_1_to_2_refuses_no_request_and_leaks_nothing(operator):
    rows = np.arange(32, dtype=np.float32).reshape(2, 16)

    # 1. Version 1 serving.
    operator.write_spec("  1: {}\n")
    operator.build(1)
    operator.render()
    operator.load()
    assert operator.ready() == ["1"]
    np.testing.assert_array_equal(operator.infer(rows, "1"), rows)
    (v1_stub,) = operator.stubs()

    # 2. Add version 2 while a client keeps asking version 1.
    v1_loop = ClientLoop(operator.server, MODEL, "1", 0.0)
    v1_loop.start()
    try:
        operator.server.wait_until("version 1 answering the client loop", lambda: v1_loop.answered >= OVERLAP)
        operator.write_spec("  1: {}\n  2: {source: plus_one.onnx}\n", "version_policy: all\n")
        operator.build(2)
        operator.render()
        operator.load()
        assert operator.ready() == ["1", "2"]
        np.testing.assert_array_equal(operator.infer(rows, "1"), rows)
        np.testing.assert_array_equal(operator.infer(rows, "2"), rows + 1)
        np.testing.assert_array_equal(operator.infer(rows), rows + 1)  # no version: the highest served
        swapped = v1_loop.answered
        operator.server.wait_until(
            "version 1 answering after the swap", lambda: v1_loop.answered >= swapped + OVERLAP
        )
    finally:
        v1_loop.stop()
    assert v1_loop.failures == []
    # Only the policy changed in config.pbtxt and version 1's folder did not: Triton kept its instance.
    stubs = operator.stubs()
    assert v1_stub in stubs and len(stubs) == 2
    (v2_stub,) = stubs - {v1_stub}

    # 3. Retire version 1 while a client keeps asking without a version.
    latest_loop = ClientLoop(operator.server, MODEL, "", 1.0)
    latest_loop.start()
    try:
        operator.server.wait_until(
            "the latest version answering the client loop", lambda: latest_loop.answered >= OVERLAP
        )
        operator.write_spec("  1: {}\n  2: {source: plus_one.onnx}\n", "version_policy: {specific: [2]}\n")
        operator.render()
        operator.load()
        operator.server.wait_until(
            "version 1 to finish unloading", lambda: operator.states().get("1") == "UNAVAILABLE"
        )
        operator.server.wait_until("version 1's stub to exit", lambda: v1_stub not in operator.stubs())
        retired = latest_loop.answered
        operator.server.wait_until(
            "version 2 answering after the retirement", lambda: latest_loop.answered >= retired + OVERLAP
        )
    finally:
        latest_loop.stop()
    assert latest_loop.failures == []
    assert operator.ready() == ["2"] and operator.states()["1"] == "UNAVAILABLE"
    assert operator.stubs() == {v2_stub}  # version 2 was not reloaded either
    np.testing.assert_array_equal(operator.infer(rows, "2"), rows + 1)
    with pytest.raises(InferenceServerException, match=r"'ident_versions' version 1 is not at ready state"):
        operator.infer(rows, "1")

    # 4. Version 1's instance gave back every device and pinned byte it held.
    report = operator.report_of(v1_stub)
    assert_gave_everything_back(report)
    used = [device for device in report["devices"] if device["mallocs"]]
    assert used and used[0]["executes"] >= 2 * OVERLAP  # it really served the client loop


def test_a_version_with_its_own_om_name_is_served_from_it(operator):
    rows = np.arange(16, dtype=np.float32).reshape(1, 16)
    operator.write_spec("  1: {}\n")
    operator.build(1)
    operator.render()
    operator.load()
    (v1_stub,) = operator.stubs()

    operator.write_spec(
        "  1: {}\n  2: {om: identity_v2.om, source: plus_one.onnx}\n", "version_policy: all\n"
    )
    operator.build(2)
    operator.render()
    operator.load()

    assert (operator.repo / MODEL / "2" / "identity_v2.om").is_file()
    assert not (operator.repo / MODEL / "2" / "identity.om").exists()
    np.testing.assert_array_equal(operator.infer(rows, "1"), rows)
    np.testing.assert_array_equal(operator.infer(rows, "2"), rows + 1)
    # The new parameter changed config.pbtxt beyond its version_policy, so Triton reloaded version 1 too
    # (docs/spec.md says so): a new stub serves it, and the old one gave everything back.
    operator.server.wait_until("the old version 1 stub to exit", lambda: v1_stub not in operator.stubs())
    assert len(operator.stubs()) == 2
    assert_gave_everything_back(operator.report_of(v1_stub))


def test_an_absolute_om_model_path_still_needs_a_version_folder(operator):
    operator.write_spec("  1: {}\n")
    operator.build(1)
    operator.render()
    elsewhere = operator.spec.parent / "oms"
    elsewhere.mkdir()
    om = (operator.repo / MODEL / "1" / "identity.om").rename(elsewhere / "identity.om")
    config = operator.repo / MODEL / "config.pbtxt"
    config.write_text(config.read_text().replace('string_value: "identity.om"', f'string_value: "{om}"'))
    (operator.repo / MODEL / "1" / ".gitkeep").unlink()
    (operator.repo / MODEL / "1").rmdir()

    with pytest.raises(
        InferenceServerException, match="at least one version must be available under the version"
    ):
        operator.load()

    (operator.repo / MODEL / "1").mkdir()  # empty: the backend reads the OM from its absolute path
    operator.load()
    rows = np.ones((1, 16), dtype=np.float32)
    np.testing.assert_array_equal(operator.infer(rows), rows)
    assert operator.ready() == ["1"]
