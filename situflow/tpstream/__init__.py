"""TPStream (Körber et al., thesis ch. 5): situations derived from an event stream, matched by
Allen's interval relations with low latency.

The package follows the thesis' structure, from the bottom up:

- :mod:`~situflow.tpstream.query`: the compiled query, plain data shared by every operator,
  built by :mod:`~situflow.tpstream.compiler`;
- :mod:`~situflow.tpstream.derive`: situation derivation (Alg. 5.1, §5.4);
- :mod:`~situflow.tpstream.match`: situation buffers, evaluation orders and low-latency matching
  (§5.5, Alg. 5.3/5.4);
- :mod:`~situflow.tpstream.fused`: the operator that derives and matches in one process;
- :mod:`~situflow.tpstream.split`: distributed TPStream, derivation and matching apart (§5.6).

:func:`compile` binds the fused operator to the compiled query; this module sits on top, so no
lower module imports an operator it does not use.
"""

from __future__ import annotations

from situflow.lang import tpstream as lang
from situflow.lang.validate_tpstream import validate
from situflow.operator import QueryOptions
from situflow.tpstream.compiler import compile_ast
from situflow.tpstream.fused import TPStreamOperator
from situflow.tpstream.query import TPStreamQuery


def compile(text: str, options: QueryOptions | None = None) -> TPStreamQuery:
    """Parse, validate and compile TPStream query text; its operator is the fused one."""
    options = options or QueryOptions()
    query = lang.parse(text)
    validate(query, options.type_field, options.time_unit)
    return compile_ast(query, options, TPStreamOperator)
