"""The cooperative matcher for a compiled SASE+ query: which pass implementation runs it
(:mod:`situflow.nfa.cooperative.matcher` on the CPU, :mod:`situflow.nfa.cooperative.passes_opencl` on a
device), and the operator ``QueryOptions.device`` gives a query the matcher covers."""

from __future__ import annotations

import functools
import logging
from typing import Any, cast

from situflow.devices.discovery import DeviceUnavailable
from situflow.nfa.cooperative.matcher import CooperativeOperator, CpuMatcher, Matcher, PatternTables
from situflow.nfa.cooperative.passes_opencl import OpenclMatcher
from situflow.nfa.operator import NfaOperator

log = logging.getLogger(__name__)


def matcher_for(device: Any | None, kind: str = "zero-copy", threads: int = 2) -> Matcher:
    """The pass implementation: on ``device`` (an opened :class:`~situflow.devices.Device`)
    the OpenCL kernel (``kind``: ``dispatch`` or ``zero-copy``); without one numba on
    ``threads`` threads."""
    if device is None:
        return CpuMatcher(threads)
    return OpenclMatcher(device, zero_copy=kind == "zero-copy")


def device_operator(compiled: Any, device: Any | None, *, kind: str = "zero-copy",
                    threads: int = 2, micro_batch: int = 1024) -> Any:
    """The cooperative operator for a compiled SASE+ query on ``device`` (an opened
    :class:`~situflow.devices.Device`; None: the multi-threaded numba pass) if the matcher
    covers the query (:meth:`PatternTables.build`; also a query the cost-based planner would
    take, the results being the same), else the query's own operator."""
    pattern = PatternTables.build(compiled.automaton)
    if pattern is None:
        return compiled.operator()
    return CooperativeOperator(compiled.automaton, compiled.name, compiled.query_id, pattern,
                               matcher_for(device, kind, threads), micro_batch)


def device_restore(compiled: Any, snapshot: dict[str, Any], device: Any | None, *,
                   kind: str = "zero-copy", threads: int = 2, micro_batch: int = 1024) -> Any:
    """The operator :func:`device_operator` made, from its snapshot (an NFA^b snapshot, which
    :meth:`~situflow.nfa.operator.NfaOperator.restore` reads as well)."""
    pattern = PatternTables.build(compiled.automaton)
    if pattern is None:
        return compiled.restore(snapshot)
    op = NfaOperator.restore(compiled.automaton, compiled.name, compiled.query_id, snapshot)
    return CooperativeOperator.resume(op, pattern, matcher_for(device, kind, threads),
                                      micro_batch)


def cooperative_operator(compiled: Any, preference: str,
                         snapshot: dict[str, Any] | None = None) -> CooperativeOperator | None:
    """``QueryOptions.device`` for SASE+: on the process's device for ``preference`` (the
    zero-copy kernel), the cooperative operator of a query it covers, restored from
    ``snapshot`` if one is given; None where NFA^b or the plans evaluate the query (no device
    for ``preference``, a query the matcher does not cover, a device without double
    precision)."""
    from situflow.devices.vector import shared_device

    device = shared_device(preference)
    if device is None or PatternTables.build(compiled.automaton) is None:
        return None
    try:
        matcher_for(device, "zero-copy")
    except DeviceUnavailable as e:
        _log_once(str(e))
        return None
    if snapshot is None:
        return cast(CooperativeOperator, device_operator(compiled, device))
    return cast(CooperativeOperator, device_restore(compiled, snapshot, device))


@functools.cache
def _log_once(message: str) -> None:
    log.warning("pattern matching stays on the CPU: %s", message)
