"""pyarrow without its pandas probe, for a process that never hands pyarrow pandas objects.

The first time pyarrow converts anything (``pa.array``, ``to_numpy``, a table from columns) it
imports pandas to ask whether the values are pandas objects: 0.2–0.5 s of CPU and 40 MiB, more
than ``situflow run`` needs for a small input. :func:`skip_pandas_probe` lets that first probe
find no pandas. pyarrow remembers the answer for its checks, but imports pandas again wherever
pandas is required (``to_pandas``), so nothing that needs pandas loses it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


# A meta path finder by its protocol: importlib.abc's base class costs 25 ms of imports.
class _NoPandas:
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname == "pandas":
            raise ModuleNotFoundError("pandas is hidden from pyarrow's probe", name=fullname)
        return None


def skip_pandas_probe() -> None:
    """Answer pyarrow's pandas probe with "not installed", unless pandas is already loaded."""
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        # A probing conversion that loads nothing else (pa.array of a list loads dateutil).
        pa.nulls(1, pa.int64()).to_numpy(zero_copy_only=False)
    finally:
        sys.meta_path.remove(finder)
