"""Numba kernels that cost nothing until a run needs them compiled.

Importing numba costs about 0.3 s of CPU and 60 MiB on a 2-core machine, and loading a cached
kernel more: more than evaluating a few thousand events with the kernels' own Python source.
:func:`njit` therefore returns a :class:`Kernel`, which imports numba and compiles (from the
on-disk cache, ``cache=True``) at its first call, unless it is called inside
:func:`interpreted`: then it runs its Python source on the same arrays, with the same results
(the kernels use only what numba and numpy agree on; ``tests/test_jit.py`` compares both on
every language). ``situflow run`` interprets inputs too small to repay the compiler.

Kernels call one another by their module's global names: when the first kernel compiles, every
kernel's module global is replaced by its numba dispatcher, so compiled kernels call compiled
kernels.

The cache lives next to the sources (numba's default) or in ``NUMBA_CACHE_DIR``; when neither
is set up and the package directory is read-only (an installed image), a per-user directory
is chosen before numba loads, because numba refuses ``cache=True`` where it cannot write.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_kernels: list[Kernel] = []
_interpreting = False
# Held while numba loads and the dispatchers are made (a background thread may be at it).
_compiling = threading.Lock()


class Kernel:
    """A numba kernel compiled at its first call (or interpreted, see :func:`interpreted`)."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any]):
        functools.update_wrapper(self, func)
        self.py_func = func
        self.options = options
        self.compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is not None:
            return self.compiled(*args)
        if _interpreting:
            return self.py_func(*args)
        _compile_all()
        assert self.compiled is not None
        return self.compiled(*args)


def njit(**options: Any) -> Callable[[Callable[..., Any]], Kernel]:
    """``numba.njit(**options)``, deferred to the kernel's first compiled call."""

    def wrap(func: Callable[..., Any]) -> Kernel:
        kernel = Kernel(func, options)
        _kernels.append(kernel)
        return kernel

    return wrap


@contextmanager
def interpreted(on: bool = True) -> Iterator[None]:
    """Run the kernels not yet compiled as Python inside the block, if ``on`` (one run of a
    process that may run others: a test suite calling ``situflow run`` in-process)."""
    global _interpreting
    before = _interpreting
    _interpreting = on or before
    try:
        yield
    finally:
        _interpreting = before


def compile_in_background() -> None:
    """Start loading numba and making every kernel's dispatcher in a thread, unless
    interpreting: for a caller whose kernels will run, while it does other work (``situflow
    run`` parses its first block meanwhile). A kernel's first call waits for it."""
    if not _interpreting:
        threading.Thread(target=_compile_all, name="numba-loader", daemon=True).start()


def _compile_all() -> None:
    with _compiling:
        _make_dispatchers()


def _make_dispatchers() -> None:
    _choose_cache_dir()
    import numba

    for kernel in _kernels:
        if kernel.compiled is None:
            kernel.compiled = numba.njit(**kernel.options)(kernel.py_func)
    for module in {k.py_func.__module__ for k in _kernels}:
        names = vars(sys.modules[module])
        for name, value in list(names.items()):
            if isinstance(value, Kernel):
                names[name] = value.compiled


def _choose_cache_dir() -> None:
    if "NUMBA_CACHE_DIR" in os.environ or os.access(Path(__file__).parent, os.W_OK):
        return
    import tempfile  # 10 ms of start-up, for a read-only install only

    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for base in (home, tempfile.gettempdir()):
        where = Path(base) / f"situflow-numba-{os.getuid()}"
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(where, os.W_OK):
            os.environ["NUMBA_CACHE_DIR"] = str(where)
            return
