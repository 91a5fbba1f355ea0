"""The one wrapper of every simulated pyACL call: arguments, injected faults, ``acl.init``, failures.

A pyACL wrapper parses its arguments first (``PyArg_ParseTuple``: a wrong type raises ``TypeError`` whatever
state the runtime is in), then calls the runtime, which returns an error code and never raises. So does
every call decorated with :func:`acl_call`, in this order:

1. the argument parsers (``ge_plugin.sim._args``) run; their TypeError / ValueError / OverflowError
   propagate; a parser may raise ``Fail`` for a value pyACL passes on and the runtime refuses at once
   (a negative timeout), which becomes the failure below;
2. the call's fault rule (``ge_plugin.sim.faults``) fires, if one is installed;
3. ``acl.init`` must have run (for the calls that touch a device);
4. the body runs with the parsed arguments.

A ``Fail`` raised by any step is recorded for ``acl.get_recent_err_msg`` and turned into the call's failure
value: ``ret`` alone, or what pyACL returns around it (``(0, ret)`` for a call that also returns a handle).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ge_plugin.sim import _args, _state, faults
from ge_plugin.sim._fail import Fail

if TYPE_CHECKING:
    from typing import ParamSpec

    P = ParamSpec("P")

R = TypeVar("R")

#: ``(call, position, value) -> value``, as in ``ge_plugin.sim._args``
Parser = Callable[[str, int, Any], Any]
#: ``(code, *parsed arguments) -> what the call returns when it fails with ``code``
Failure = Callable[..., Any]

#: the fault name is the call's name without ``acl.`` (``"rt.malloc"``); pass ``fault=None`` for none
_FROM_CALL = "from the call's name"


def ret(code: int, *args: Any) -> int:
    """The failure value of a call that returns ``ret`` alone: the code."""
    return code


def value_and_ret(*values: Any) -> Failure:
    """The failure value of a call returning ``(value, ..., ret)``: ``values`` then the code.

    A dict or list among ``values`` is copied for each failure, so that no two callers share one."""

    def failure(code: int, *args: Any) -> tuple[Any, ...]:
        return (*(v.copy() if isinstance(v, (dict, list)) else v for v in values), code)

    return failure


def value_only(value: Any) -> Failure:
    """The failure value of a call that returns no code (a handle, a size: 0): ``value``."""

    def failure(code: int, *args: Any) -> Any:
        return value

    return failure


def acl_call(
    call: str,
    *parsers: Parser,
    parse: Callable[..., tuple[Any, ...]] | None = None,
    fault: str | None = _FROM_CALL,
    init: bool = True,
    failure: Failure = ret,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make ``body`` the simulated pyACL call ``call`` (``"acl.rt.malloc"``).

    ``parsers`` parse the positional arguments one each, in order; ``parse(call, *args)`` instead parses them
    all, for calls whose wrapper checks more than one format (a list it unpacks by hand, a callable).
    ``fault`` names the fault rule that can fail the call (None: no rule; the asynchronous calls inject
    theirs into the task). ``init`` requires ``acl.init``: false for the host-side objects pyACL creates
    without it. ``failure(code, *parsed)`` is what the call returns when it fails.
    """
    fault_name = call.removeprefix("acl.") if fault == _FROM_CALL else fault
    if fault_name is not None and fault_name not in faults.FAULTABLE:
        raise ValueError(f"{call}: {fault_name!r} is not in faults.FAULTABLE")

    def decorate(body: Callable[P, R]) -> Callable[P, R]:
        run: Callable[..., R] = body  # called with the parsed arguments
        code = body.__code__
        arity = None if code.co_flags & inspect.CO_VARARGS else code.co_argcount
        if parse is None and arity is not None and len(parsers) != arity:
            raise TypeError(f"{call}: {len(parsers)} parsers for {arity} arguments")
        steps = tuple(enumerate(parsers))
        # when every parser passes a plain int below its bound unchanged, such arguments skip the parsers
        bounds = tuple(_args.UNCHANGED_BELOW.get(parser, 0) for parser in parsers)
        quick = bool(parsers) and all(bounds)

        # Every simulated call goes through here, the engine's per-request ones too: a plain loop, no
        # comprehension or helper frame (each would cost more than the parsers themselves).
        @functools.wraps(body)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs or (arity is not None and len(args) != arity):
                raise _signature_error(call, arity, len(args), kwargs)
            values: Sequence[Any] = args
            try:
                if parse is not None:
                    values = parse(call, *args)
                elif steps:
                    plain = quick
                    if quick:
                        for value, bound in zip(args, bounds):
                            if type(value) is not int or value < 0 or value >= bound:
                                plain = False
                                break
                    if not plain:
                        parsed = list(args)
                        for i, parser in steps:
                            parsed[i] = parser(call, i + 1, parsed[i])
                        values = parsed
                if fault_name is not None and faults.RULES:
                    _state.check_fault(fault_name)
                if init:
                    _state.require_init()
                return run(*values)
            except Fail as fail:
                return failure(_state.failed(call, fail), *values)

        return wrapper

    return decorate


def _signature_error(call: str, arity: int | None, given: int, kwargs: dict[str, Any]) -> TypeError:
    """What ``PyArg_ParseTuple`` of a ``METH_VARARGS`` function raises for a wrong call form."""
    if kwargs:
        return TypeError(f"{call}() takes no keyword arguments")
    return TypeError(f"{call}() takes exactly {arity} argument{'' if arity == 1 else 's'} ({given} given)")
