"""Argument checks behave like pyACL's PyArg_ParseTuple formats (with bool refused everywhere)."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.sim import _args, faults


def test_unsigned_long_takes_exact_ints_and_masks_negatives():
    assert _args.k("f", 1, 5) == 5
    assert _args.k("f", 1, -1) == (1 << 64) - 1
    for bad in (1.0, True, "1", None, np.int64(1)):
        with pytest.raises(TypeError, match="f args parse failed: argument 1 must be int"):
            _args.k("f", 1, bad)


def test_int_takes_index_objects_and_checks_range():
    assert _args.i("f", 2, np.int32(7)) == 7
    assert _args.i("f", 2, -3) == -3
    with pytest.raises(OverflowError):
        _args.i("f", 2, 1 << 40)
    for bad in (2.0, False, "2"):
        with pytest.raises(TypeError):
            _args.i("f", 2, bad)


def test_unsigned_int_masks_to_32_bits():
    assert _args.u32("f", 1, -1) == 0xFFFFFFFF
    with pytest.raises(TypeError):
        _args.u32("f", 1, 1.5)


def test_str_refuses_bytes_and_nul():
    assert _args.s("f", 1, "x.om") == "x.om"
    with pytest.raises(TypeError):
        _args.s("f", 1, b"x.om")
    with pytest.raises(ValueError):
        _args.s("f", 1, "a\0b")


def test_calls_take_positional_arguments_only(acl):
    with pytest.raises(TypeError):
        acl.rt.malloc(size=16, policy=0)
    with pytest.raises(TypeError):
        acl.mdl.get_num_inputs()
    with pytest.raises(TypeError):
        acl.rt.get_run_mode(0)


def test_calls_parse_before_an_injected_fault_fires(acl, ready):
    faults.inject("rt.malloc", 207001, nth=1)
    with pytest.raises(TypeError, match=r"acl\.rt\.malloc args parse failed: argument 1 must be int"):
        acl.rt.malloc(1.5, 0)
    assert acl.rt.malloc(64, 0)[1] == 207001  # the call that raised was not counted


def test_wrong_call_forms_name_the_call(acl):
    with pytest.raises(TypeError, match=r"acl\.rt\.malloc\(\) takes exactly 2 arguments \(1 given\)"):
        acl.rt.malloc(16)
    with pytest.raises(TypeError, match=r"acl\.mdl\.get_num_inputs\(\) takes no keyword arguments"):
        acl.mdl.get_num_inputs(desc=1)
