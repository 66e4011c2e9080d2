"""Compile a validated TPStream AST into the immutable :class:`TPStreamQuery` (thesis §5.3):
conditions become vector closures over event batches, RETURN values scalar closures over a
match's aggregates, and the PATTERN a table of allowed relations per pair of situations.

:mod:`situflow.lang.validate_tpstream` checks the query first, so compilation has no error
paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from situflow.devices.vector import vector_compiler
from situflow.lang import ast
from situflow.lang import tpstream as lang
from situflow.lang.allen import INVERSE
from situflow.lang.compile import compile_scalar
from situflow.operator import QueryOptions
from situflow.tpstream.query import TIME_FIELD, AggregateRef, Engine, SituationDef, TPStreamQuery


def compile_ast(query: lang.Query, options: QueryOptions, engine: Engine) -> TPStreamQuery:
    """The compiled form of a validated ``query``, evaluated by ``engine``."""
    return _Compiler(query, options).build(engine)


class _Compiler:
    def __init__(self, query: lang.Query, options: QueryOptions):
        self.query = query
        self.options = options
        self.compile_vector = vector_compiler(options.device)
        self.names = {d.name: i for i, d in enumerate(query.definitions)}
        self.aggregates: list[AggregateRef] = []

    def build(self, engine: Engine) -> TPStreamQuery:
        q = self.query
        definitions = tuple(self._definition(d) for d in q.definitions)
        constraints = self._constraints()
        # Without WITHIN (``PATTERN B`` only) a match's span is unbounded.
        window = math.inf if q.within is None else self._ticks(q.within)
        outputs = tuple(self._output(o) for o in q.outputs)
        # compile_scalar resolves every node but literals and operators as an aggregate.
        bare = tuple(None if isinstance(o.expr, (ast.Literal, ast.Unary, ast.Binary))
                     else self.aggregates.index(self._ref(o.expr)) for o in q.outputs)
        return TPStreamQuery(
            name=self.options.name, ast=q, options=self.options, definitions=definitions,
            constraints=constraints, window=window,
            partition_by=tuple(r.name for r in q.partition_by),
            aggregates=tuple(self.aggregates), outputs=outputs, output_aggregates=bare,
            engine=engine,
        )

    # --- definitions ----------------------------------------------------------------------

    def _definition(self, d: lang.Definition) -> SituationDef:
        condition = self.compile_vector(d.condition, self._column_getter)
        dmin = dmax = None
        if d.duration is not None:
            dmin = self._ticks(d.duration.low) if d.duration.low else None
            dmax = self._ticks(d.duration.high) if d.duration.high else None
        return SituationDef(d.name, condition, dmin, dmax)

    def _column_getter(self, node: ast.Node) -> Callable[[Any], Any]:
        assert isinstance(node, ast.Ref)
        name = node.name
        if name == TIME_FIELD:
            return lambda batch: batch.ts
        return lambda batch: batch.column(name)

    def _ticks(self, duration: ast.Duration) -> float:
        return duration.seconds / self.options.time_unit

    # --- pattern --------------------------------------------------------------------------

    def _constraints(self) -> tuple[tuple[frozenset[str] | None, ...], ...]:
        n = len(self.names)
        table: list[list[frozenset[str] | None]] = [[None] * n for _ in range(n)]
        for c in self.query.constraints:
            i, j = (self.names[x] for x in c.pair)
            relations = c.relations()
            mirrored = frozenset(INVERSE[r] for r in relations)
            old = table[i][j]
            if old is not None:
                relations = relations & old
                mirrored = frozenset(INVERSE[r] for r in relations)
            table[i][j], table[j][i] = relations, mirrored
        return tuple(tuple(row) for row in table)

    # --- outputs --------------------------------------------------------------------------

    def _output(self, output: lang.ReturnItem) -> tuple[str, Callable[[Any], Any]]:
        return output.name, compile_scalar(output.expr, self._aggregate_getter)

    def _ref(self, node: ast.Node) -> AggregateRef:
        assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Ref)
        arg = node.args[0]
        if arg.qualifier is None:  # count(B)
            return AggregateRef(self.names[arg.name], "count", None)
        return AggregateRef(self.names[arg.qualifier], node.name, arg.name)

    def _aggregate_getter(self, node: ast.Node) -> Callable[[Any], Any]:
        ref = self._ref(node)
        if ref not in self.aggregates:
            self.aggregates.append(ref)
        slot = self.aggregates.index(ref)
        return lambda values: values[slot]
