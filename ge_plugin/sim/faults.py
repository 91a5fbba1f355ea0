"""Making chosen pyACL calls fail on purpose.

Three ways to install the same rules; counting starts when a rule is installed:

- Python: ``faults.inject("mdl.execute", 507011, nth=3)``, ``faults.clear()``;
- environment, read by ``acl.init``: ``GE_PLUGIN_SIM_FAULTS="mdl.execute:nth=3:code=507011;rt.malloc:every=2:code=207001"``;
- the JSON file given to ``acl.init``: ``{"ge_plugin_sim": {"faults": [{"api": "mdl.execute", "nth": 3,
  "code": 507011}]}}`` (real CANN never reads that section).

``nth=N`` fails only the Nth call, ``every=N`` every Nth call (N, 2N, ...), neither fails every call. An
injected failure returns ``code`` exactly where the real call would return an error (``(0, code)`` for calls
that also return a value) and ``acl.get_recent_err_msg()`` says it was injected. ``mdl.execute_async``,
``rt.memcpy_async`` and ``rt.memset_async`` accept the task and report the injected code from
``acl.rt.synchronize_stream``, as a device fault does on real hardware; an injected execute fault still
takes its device time first. How long executes take is ``device_time``'s business;
:func:`set_execute_latency_ms` is kept here as the short way to give every execute one device time.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ge_plugin.sim import device_time

#: API names that can be made to fail: every simulated call that returns an error code or a handle.
FAULTABLE = frozenset(
    {
        "init",
        "finalize",
        "create_data_buffer",
        "update_data_buffer",
        "destroy_data_buffer",
        "create_tensor_desc",
        "get_cann_version",
        "rt.set_device",
        "rt.reset_device",
        "rt.get_device",
        "rt.get_device_count",
        "rt.get_phy_dev_id_by_logic_dev_id",
        "rt.create_context",
        "rt.set_context",
        "rt.get_context",
        "rt.destroy_context",
        "rt.create_stream",
        "rt.create_stream_with_config",
        "rt.destroy_stream",
        "rt.synchronize_stream",
        "rt.synchronize_stream_with_timeout",
        "rt.synchronize_device",
        "rt.get_run_mode",
        "rt.malloc",
        "rt.malloc_align32",
        "rt.malloc_cached",
        "rt.malloc_host",
        "rt.free",
        "rt.free_host",
        "rt.memcpy",
        "rt.memcpy_async",
        "rt.memset",
        "rt.memset_async",
        "rt.get_mem_info",
        "rt.get_device_info",
        "rt.create_event",
        "rt.create_event_with_flag",
        "rt.query_event",
        "rt.destroy_event",
        "rt.record_event",
        "rt.reset_event",
        "rt.query_event_status",
        "rt.synchronize_event",
        "rt.synchronize_event_with_timeout",
        "rt.event_elapsed_time",
        "rt.stream_wait_event",
        "rt.subscribe_report",
        "rt.unsubscribe_report",
        "rt.launch_callback",
        "rt.process_report",
        "mdl.query_size",
        "mdl.load_from_file",
        "mdl.load_from_file_with_mem",
        "mdl.load_from_mem",
        "mdl.unload",
        "mdl.create_desc",
        "mdl.get_desc",
        "mdl.get_desc_from_file",
        "mdl.destroy_desc",
        "mdl.create_dataset",
        "mdl.add_dataset_buffer",
        "mdl.destroy_dataset",
        "mdl.get_input_dims",
        "mdl.get_output_dims",
        "mdl.get_cur_output_dims",
        "mdl.get_input_index_by_name",
        "mdl.get_output_index_by_name",
        "mdl.get_dynamic_batch",
        "mdl.get_dynamic_hw",
        "mdl.set_dynamic_batch_size",
        "mdl.set_dynamic_hw_size",
        "mdl.get_input_dynamic_gear_count",
        "mdl.get_input_dynamic_dims",
        "mdl.set_input_dynamic_dims",
        "mdl.execute",
        "mdl.execute_async",
        "mdl.set_dataset_tensor_desc",
        "mdl.get_aipp_type",
        *(
            f"media.dvpp_{name}"
            for name in (
                "malloc",
                "free",
                "create_channel_desc",
                "destroy_channel_desc",
                "set_channel_desc_mode",
                "create_channel",
                "destroy_channel",
                "create_pic_desc",
                "destroy_pic_desc",
                "set_pic_desc_data",
                "set_pic_desc_size",
                "set_pic_desc_format",
                "set_pic_desc_width",
                "set_pic_desc_height",
                "set_pic_desc_width_stride",
                "set_pic_desc_height_stride",
                "set_pic_desc_ret_code",
                "create_batch_pic_desc",
                "destroy_batch_pic_desc",
                "create_roi_config",
                "set_roi_config",
                "set_roi_config_left",
                "set_roi_config_right",
                "set_roi_config_top",
                "set_roi_config_bottom",
                "destroy_roi_config",
                "create_resize_config",
                "destroy_resize_config",
                "set_resize_config_interpolation",
                "create_jpege_config",
                "destroy_jpege_config",
                "set_jpege_config_level",
                "jpeg_get_image_info",
                "jpeg_predict_dec_size",
                "jpeg_predict_enc_size",
                "png_get_image_info",
                "png_predict_dec_size",
                # queued: the task fails on the stream, as for memcpy_async
                "jpeg_decode_async",
                "png_decode_async",
                "jpeg_encode_async",
                "vpc_resize_async",
                "vpc_crop_async",
                "vpc_crop_resize_async",
                "vpc_crop_and_paste_async",
            )
        ),
    }
)


class _Rule:
    __slots__ = ("calls", "code", "every", "nth")

    def __init__(self, code: int, nth: int | None, every: int | None):
        self.code = code
        self.nth = nth
        self.every = every
        self.calls = itertools.count(1)  # next() is atomic under the GIL

    def fires(self) -> bool:
        n = next(self.calls)
        if self.nth is not None:
            return n == self.nth
        if self.every is not None:
            return n % self.every == 0
        return True


#: api -> rules; API functions test ``if faults.RULES`` before anything else, so no rules costs one check.
RULES: dict[str, list[_Rule]] = {}
_lock = threading.Lock()


def _api_name(api: object) -> str:
    if not isinstance(api, str):
        raise TypeError(f"fault api must be a str such as 'mdl.execute', not {type(api).__name__}")
    name = api.strip()
    if name.startswith("acl."):
        name = name[len("acl.") :]
    if name not in FAULTABLE:
        raise ValueError(
            f"cannot inject a fault into {api!r}: not a simulated call that returns an error code; "
            f"use one of {', '.join(sorted(FAULTABLE))}"
        )
    return name


def _positive(what: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"fault {what} must be a positive integer, not {value!r}")
    return value


def inject(api: str, code: int, *, nth: int | None = None, every: int | None = None) -> None:
    """Make ``api`` (``"rt.malloc"``, ``"mdl.execute"``, ...) return ``code``: on its ``nth`` call from now,
    on every ``every``-th call, or (neither) on every call."""
    name = _api_name(api)
    if isinstance(code, bool) or not isinstance(code, int) or code == 0:
        raise ValueError(f"fault code for {name} must be a non-zero ACL error code, not {code!r}")
    nth = _positive("nth", nth)
    every = _positive("every", every)
    if nth is not None and every is not None:
        raise ValueError(f"fault for {name}: give nth or every, not both")
    with _lock:
        RULES.setdefault(name, []).append(_Rule(code, nth, every))


def clear(api: str | None = None) -> None:
    """Remove the rules of ``api``, or all rules (the latency stays; set it to 0 separately)."""
    with _lock:
        if api is None:
            RULES.clear()
        else:
            RULES.pop(_api_name(api), None)


def hit(api: str) -> int:
    """The injected code for this call of ``api``, or 0. Every rule of ``api`` counts the call."""
    rules = RULES.get(api)
    if not rules:
        return 0
    code = 0
    for rule in rules:
        if rule.fires() and not code:
            code = rule.code
    return code


def set_execute_latency_ms(ms: float) -> None:
    """Every execute holds its device for ``ms`` milliseconds from now on (0: no device time); the same as
    ``device_time.set_profile(LatencyProfile(base_ms=ms))``."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms < 0 or ms != ms:
        raise ValueError(f"execute latency must be a number of milliseconds >= 0, not {ms!r}")
    device_time.set_profile(
        device_time.LatencyProfile(base_ms=float(ms)) if ms else device_time.LatencyProfile()
    )


def parse_env(text: str) -> list[dict[str, Any]]:
    """``"api:nth=3:code=507011;api2:every=2:code=207001"`` -> rule dicts (validated by :func:`install`)."""
    rules = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        api, *fields = part.split(":")
        rule: dict[str, Any] = {"api": api.strip()}
        for field in fields:
            key, sep, value = field.partition("=")
            key = key.strip()
            if not sep or key not in ("nth", "every", "code"):
                raise ValueError(
                    f"fault rule {part!r}: expected fields nth=N, every=N and code=N, got {field!r}"
                )
            try:
                rule[key] = int(value.strip(), 0)
            except ValueError:
                raise ValueError(f"fault rule {part!r}: {key} must be an integer, got {value!r}") from None
        if "code" not in rule:
            raise ValueError(f"fault rule {part!r}: missing code=N (the ACL error code to return)")
        rules.append(rule)
    return rules


def install(rules: Iterable[Mapping[str, Any]]) -> None:
    """Install rule dicts ``{"api", "code", "nth"?, "every"?}``; all are checked before any is installed."""
    checked = []
    for rule in rules:
        if not isinstance(rule, Mapping):
            raise ValueError(
                f"fault rule must be an object like {{'api': 'mdl.execute', 'code': 507011}}, not {rule!r}"
            )
        unknown = set(rule) - {"api", "code", "nth", "every"}
        if unknown:
            raise ValueError(f"fault rule {dict(rule)!r}: unknown keys {', '.join(sorted(unknown))}")
        if "api" not in rule or "code" not in rule:
            raise ValueError(f"fault rule {dict(rule)!r}: needs 'api' and 'code'")
        checked.append(rule)
    before = {api: list(rs) for api, rs in RULES.items()}
    try:
        for rule in checked:
            inject(rule["api"], rule["code"], nth=rule.get("nth"), every=rule.get("every"))
    except (TypeError, ValueError):
        with _lock:
            RULES.clear()
            RULES.update(before)
        raise


def reset() -> None:
    """No rules, and a device without device time that computes (the tests' reset)."""
    clear()
    device_time.reset()
