"""Validate a TPStream query and compile it into the immutable :class:`TPStreamQuery`.

Validation (thesis §5.3.1–5.3.2, SEMANTICS.md) checks names, types and the two restrictions of
the language: conditions see single events (no aggregates, no other situations), and every
situation takes part in the pattern, which must be connected (plans never compute a cross
product, thesis §5.5.4). The compiled query is shared by every partition and every operator.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from situflow.lang import ast
from situflow.lang import tpstream as lang
from situflow.lang.attributes import AttributeTypes
from situflow.lang.compile import compile_scalar, compile_vector
from situflow.lang.validate import Type, check_condition, error, infer
from situflow.operator import Operator, QueryOptions
from situflow.tpstream.allen import INVERSE, RELATIONS

AGGREGATES = ("first", "last", "min", "max", "sum", "count", "avg")
TIME_FIELD = "ts"


@dataclass(frozen=True)
class AggregateRef:
    """One aggregate a RETURN expression needs: ``func`` over ``attr`` of situation ``defn``.

    ``attr`` is None for ``count(B)`` and ``count(*)``-style counts of a situation's events.
    """

    defn: int
    func: str
    attr: str | None


@dataclass(frozen=True)
class SituationDef:
    name: str
    condition: Callable[[Any], Any]
    # Duration bounds in event-time ticks; None means unbounded (thesis Def 5.2, eta).
    dmin: float | None
    dmax: float | None

    @property
    def deferred(self) -> bool:
        """Whether matching waits for the end: an upper bound is known only then (§5.5.3)."""
        return self.dmax is not None


@dataclass(frozen=True)
class TPStreamQuery:
    """A compiled TPStream query: definitions, constraints, window and outputs."""

    name: str
    ast: lang.Query
    options: QueryOptions
    definitions: tuple[SituationDef, ...]
    # constraints[i][j]: relations allowed for "situation i <rel> situation j", None if free.
    constraints: tuple[tuple[frozenset[str] | None, ...], ...]
    window: float
    partition_by: tuple[str, ...]
    aggregates: tuple[AggregateRef, ...]
    outputs: tuple[tuple[str, Callable[[Any], Any]], ...]
    language: str = field(default="tpstream")

    @functools.cached_property
    def query_id(self) -> str:
        # Cached: every situation batch and its merge check it.
        return hashlib.blake2b(self.canonical().encode(), digest_size=8).hexdigest()

    def canonical(self) -> str:
        return self.ast.to_text()

    @functools.cached_property
    def attribute_types(self) -> AttributeTypes:
        return lang.attribute_types(self.ast).without({self.options.type_field})

    def describe(self) -> str:
        from situflow.tpstream.planner import Planner

        lines = [self.canonical(), "", "evaluation order (thesis eqs. 5.2-5.5, prior statistics):"]
        lines += Planner(self).describe()
        return "\n".join(lines)

    def operator(self) -> Operator:
        from situflow.tpstream.operator import TPStreamOperator

        return TPStreamOperator(self)

    def restore(self, snapshot: dict[str, Any]) -> Operator:
        from situflow.tpstream.operator import TPStreamOperator

        return TPStreamOperator.restore(self, snapshot)


def compile(text: str, options: QueryOptions | None = None) -> TPStreamQuery:
    """Parse, validate and compile TPStream query text."""
    options = options or QueryOptions()
    return _Compiler(lang.parse(text), options).build()


class _Compiler:
    def __init__(self, query: lang.Query, options: QueryOptions):
        self.query = query
        self.options = options
        self.names = {d.name: i for i, d in enumerate(query.definitions)}
        self.stream_names = {query.stream} | ({query.alias} if query.alias else set())
        self.aggregates: list[AggregateRef] = []

    def build(self) -> TPStreamQuery:
        q = self.query
        definitions = tuple(self._definition(d) for d in self._unique(q.definitions))
        constraints = self._constraints()
        window = self._ticks(q.within)
        if window < 0:
            raise error(q.within, "WITHIN needs a positive duration")
        outputs = tuple(self._output(o) for o in self._unique_outputs(q.outputs))
        return TPStreamQuery(
            name=self.options.name, ast=q, options=self.options, definitions=definitions,
            constraints=constraints, window=window,
            partition_by=tuple(self._attribute(r) for r in q.partition_by),
            aggregates=tuple(self.aggregates), outputs=outputs,
        )

    # --- definitions ----------------------------------------------------------------------

    def _unique(self, definitions: tuple[lang.Definition, ...]) -> tuple[lang.Definition, ...]:
        seen: set[str] = set()
        for d in definitions:
            if d.name in seen:
                raise error(d, f"situation {d.name} is defined twice; names must be unique")
            if d.name.lower() in RELATIONS:
                raise error(d, f"'{d.name}' is a temporal relation and cannot name a situation")
            seen.add(d.name)
        return definitions

    def _definition(self, d: lang.Definition) -> SituationDef:
        for node in d.condition.walk():
            if isinstance(node, ast.Call):
                raise error(node, "a condition sees single events and cannot use aggregates "
                                  "(thesis §5.3.2)")
            if isinstance(node, ast.Ref):
                self._attribute(node)
        check_condition(d.condition, lambda node: Type.ANY)
        condition = compile_vector(d.condition, self._column_getter)
        dmin = dmax = None
        if d.duration is not None:
            dmin = self._ticks(d.duration.low) if d.duration.low else None
            dmax = self._ticks(d.duration.high) if d.duration.high else None
            if dmin is not None and dmax is not None and dmin > dmax:
                raise error(d.duration, "the lower duration bound exceeds the upper bound")
        return SituationDef(d.name, condition, dmin, dmax)

    def _attribute(self, ref: ast.Ref) -> str:
        """The column a condition or PARTITION BY reference reads."""
        if ref.qualifier is not None and ref.qualifier not in self.stream_names:
            if ref.qualifier in self.names:
                raise error(ref, f"a condition cannot refer to situation {ref.qualifier}; "
                                 "conditions see the events of the input stream")
            raise error(ref, f"unknown stream '{ref.qualifier}'; the input stream is "
                             f"{' or '.join(sorted(self.stream_names))}")
        if ref.name == self.options.type_field:
            raise error(ref, f"'{ref.name}' is the event-type field and invisible to queries; "
                             "rename the attribute or choose another --type-field")
        return ref.name

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
            for alt in c.alternatives:
                for name in (alt.left, alt.right):
                    if name not in self.names:
                        raise error(alt, f"unknown situation '{name}' in PATTERN; defined are "
                                         f"{', '.join(self.names)}")
                if {alt.left, alt.right} != set(c.pair):
                    raise error(alt, "all alternatives of one constraint must relate the same "
                                     f"two situations ({c.pair[0]} and {c.pair[1]})")
            i, j = (self.names[x] for x in c.pair)
            if i == j:
                raise error(c, f"a constraint relates two different situations, not {c.pair[0]} "
                               "with itself")
            relations = c.relations()
            mirrored = frozenset(INVERSE[r] for r in relations)
            old = table[i][j]
            if old is not None:
                relations = relations & old
                mirrored = frozenset(INVERSE[r] for r in relations)
                if not relations:
                    raise error(c, f"no relation satisfies every constraint on {c.pair[0]} and "
                                   f"{c.pair[1]}")
            table[i][j], table[j][i] = relations, mirrored
        self._check_connected(table)
        return tuple(tuple(row) for row in table)

    def _check_connected(self, table: list[list[frozenset[str] | None]]) -> None:
        reached, frontier = {0}, [0]
        while frontier:
            i = frontier.pop()
            for j, rels in enumerate(table[i]):
                if rels is not None and j not in reached:
                    reached.add(j)
                    frontier.append(j)
        for d in self.query.definitions:
            if self.names[d.name] not in reached:
                raise error(d, f"situation {d.name} is not related to the others in PATTERN; "
                               "every situation needs a temporal constraint")

    # --- outputs --------------------------------------------------------------------------

    def _unique_outputs(self, outputs: tuple[lang.Output, ...]) -> tuple[lang.Output, ...]:
        seen: set[str] = set()
        for o in outputs:
            if o.name in seen:
                raise error(o, f"two RETURN values are named {o.name}")
            seen.add(o.name)
        return outputs

    def _output(self, output: lang.Output) -> tuple[str, Callable[[Any], Any]]:
        infer(output.expr, self._output_type)
        return output.name, compile_scalar(output.expr, self._aggregate_getter)

    def _output_type(self, node: ast.Node) -> Type:
        if isinstance(node, ast.Ref):
            raise error(node, f"RETURN values are aggregates over a situation's events, as in "
                              f"first({node.dotted}); found a bare reference")
        if not isinstance(node, ast.Call):
            raise error(node, "unsupported expression in RETURN")
        if node.name not in AGGREGATES:
            raise error(node, f"unknown aggregate {node.name}(); use one of "
                              f"{', '.join(AGGREGATES)}")
        if node.star or len(node.args) != 1:
            raise error(node, f"{node.name}() takes one argument such as B.speed")
        (arg,) = node.args
        if isinstance(arg, ast.Ref) and arg.qualifier is None and arg.name in self.names:
            if node.name != "count":
                raise error(arg, f"{node.name}() needs an attribute, as in "
                                 f"{node.name}({arg.name}.speed)")
            return Type.NUMBER
        if not isinstance(arg, ast.Ref) or arg.qualifier not in self.names:
            raise error(arg, f"the argument of {node.name}() is an attribute of a situation, "
                             f"as in {node.name}({next(iter(self.names))}.speed)")
        if arg.name == self.options.type_field:
            raise error(arg, f"'{arg.name}' is the event-type field and invisible to queries")
        return Type.ANY if node.name in ("first", "last", "min", "max") else Type.NUMBER

    def _aggregate_getter(self, node: ast.Node) -> Callable[[Any], Any]:
        assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Ref)
        arg = node.args[0]
        if arg.qualifier is None:  # count(B)
            ref = AggregateRef(self.names[arg.name], "count", None)
        else:
            ref = AggregateRef(self.names[arg.qualifier], node.name, arg.name)
        if ref not in self.aggregates:
            self.aggregates.append(ref)
        slot = self.aggregates.index(ref)
        return lambda values: values[slot]


def condition_mask(defn: SituationDef, batch: Any) -> np.ndarray:
    """The condition of ``defn`` over a batch as a boolean array (missing values are false)."""
    mask = np.asarray(defn.condition(batch))
    if mask.dtype.kind == "f":
        mask = (mask != 0) & ~np.isnan(mask)
    elif mask.dtype.kind in "iu":
        mask = mask != 0
    elif mask.dtype != bool:
        mask = np.array([v is True for v in mask.ravel()], dtype=bool).reshape(mask.shape)
    return np.broadcast_to(mask, (len(batch),))
