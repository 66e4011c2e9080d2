"""Device-backed vector evaluators with :func:`situflow.lang.compile.compile_vector`'s contract.

The engines evaluate their event-local predicates (TPStream situation conditions, SASE+ edge
conjuncts on the current event, COGRA local and adjacent-predicate operands) over a batch's
columns with ``compile_vector``. :func:`vector_compiler` gives them a drop-in replacement for
the configured device: each expression is generated as OpenCL C (:mod:`.opencl_c`) and runs as
one kernel per batch over the columns in place (zero-copy ``USE_HOST_PTR`` buffers). An
expression the device cannot take (strings, …) is reported once and evaluated by the CPU, as is
a batch whose columns are of a type the generated code does not cover: results never depend on
the device.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from situflow.devices.buffers import HostBuffer
from situflow.devices.counters import COUNTERS
from situflow.devices.device import Device, open_device
from situflow.devices.opencl_c import FUNCTION, OPTIONS, Constant, OpenCLExpression, Unsupported
from situflow.lang import ast
from situflow.lang.compile import Resolver, compile_vector
from situflow.lang.printer import expr_text

log = logging.getLogger(__name__)

Evaluator = Callable[[Any], Any]
VectorCompiler = Callable[[ast.Node, Resolver], Evaluator]


@functools.cache
def shared_device(preference: str) -> Device | None:
    """The process's device for ``preference`` (cpu, opencl, auto), opened once; raises
    :class:`~situflow.devices.DeviceUnavailable` when ``opencl`` is asked and absent."""
    return open_device(preference)


def vector_compiler(preference: str) -> VectorCompiler:
    """``compile_vector`` for ``preference``: itself for the CPU, else the device's."""
    device = shared_device(preference)
    if device is None:
        return compile_vector
    return functools.partial(compile_device_vector, device=device)


def compile_device_vector(expr: ast.Node, resolve: Resolver, *, device: Device) -> Evaluator:
    """``expr`` as a function of an environment evaluated on ``device``; the CPU evaluator
    where the device cannot take it."""
    cpu = compile_vector(expr, resolve)
    try:
        code = OpenCLExpression(expr, resolve)
    except Constant:
        return cpu
    except Unsupported as e:
        _report(expr, e)
        return cpu
    return _DeviceEvaluator(device, code, cpu)


class _DeviceEvaluator:
    def __init__(self, device: Device, code: OpenCLExpression, cpu: Evaluator):
        self.device, self.code, self.cpu = device, code, cpu
        self._kernels: dict[tuple[np.dtype, ...], tuple[Any, np.dtype]] = {}
        self._refused: set[tuple[np.dtype, ...]] = set()

    def __call__(self, env: Any) -> Any:
        columns = [getter(env) for getter in self.code.getters]
        n = _common_length(columns)
        dtypes = tuple(c.dtype for c in columns) if n else ()
        if not n or dtypes in self._refused:
            COUNTERS.add(cpu_fallbacks=1)
            return self.cpu(env)
        built = self._kernels.get(dtypes)
        if built is None:
            try:
                built = self._kernels[dtypes] = self._build(dtypes)
            except Unsupported as e:
                self._refused.add(dtypes)
                _report(self.code.expr, e)
                COUNTERS.add(cpu_fallbacks=1)
                return self.cpu(env)
        kernel, result = built
        return _run(self.device, kernel, columns, n, result)

    def _build(self, dtypes: tuple[np.dtype, ...]) -> tuple[Any, np.dtype]:
        generated = self.code.generate(dtypes)
        source = (f"{generated.source}__kernel void situflow_evaluate(const long n"
                  f"{generated.parameters}, __global {generated.result_type} *out) {{\n"
                  f"    const long i = get_global_id(0);\n"
                  f"    if (i < n) out[i] = {FUNCTION}(i{generated.arguments});\n}}\n")
        program = self.device.program(source, OPTIONS)
        return self.device.cl.Kernel(program, "situflow_evaluate"), generated.result


def _run(device: Device, kernel: Any, columns: list[np.ndarray], n: int,
         result: np.dtype) -> np.ndarray:
    out = np.empty(n, result)
    inputs = [HostBuffer.wrap(device, c) for c in columns]
    output = HostBuffer.wrap(device, out)
    lanes = device.lanes
    started = time.perf_counter()
    kernel(device.queue, (-(-n // lanes) * lanes,), None, np.int64(n),
           *(b.arg for b in inputs), output.arg)
    with output.host(write=False) as mapped:
        COUNTERS.add(kernel_seconds=time.perf_counter() - started, kernels=1, batches=1,
                     batch_events=n)
        if mapped.ctypes.data != out.ctypes.data:  # a runtime that did not use the host memory
            np.copyto(out, mapped)
    return out


def _common_length(columns: list[Any]) -> int:
    """The columns' length if all are 1-D arrays of one length, else 0 (the CPU path then)."""
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 for c in columns):
        return 0
    lengths = {len(c) for c in columns}
    return lengths.pop() if len(lengths) == 1 else 0


def _report(expr: ast.Node, reason: Exception) -> None:
    log.warning("device: %s stays on the CPU (%s)", expr_text(expr), reason)
