"""Validation of a TPStream query (thesis §5.3.1–5.3.2, SEMANTICS.md), run before compilation.

It checks names, types and the two restrictions of the language: conditions see single events
(no aggregates, no other situations), and every situation takes part in the pattern, which must
be connected (plans never compute a cross product, thesis §5.5.4); ``PATTERN B`` defines B
alone, within a WITHIN that B's lower duration bound fits. The compiler in
:mod:`situflow.tpstream.compiler` trusts a tree that passed, so it has no error paths of its own.
"""

from __future__ import annotations

from situflow.lang import ast
from situflow.lang.allen import INVERSE, RELATIONS
from situflow.lang.printer import expr_text
from situflow.lang.tpstream import AGGREGATES, Constraint, Definition, Query, Single
from situflow.lang.validate import Type, check_condition, error, infer


def validate(query: Query, type_field: str = "type", time_unit: float = 1.0) -> None:
    """Raise the first ``ValidationError`` of ``query``; ``type_field`` is invisible to it, and
    durations are counted in ticks of ``time_unit`` seconds."""
    _Validator(query, type_field, time_unit).run()


class _Validator:
    def __init__(self, query: Query, type_field: str, time_unit: float):
        self.query = query
        self.type_field = type_field
        self.time_unit = time_unit
        self.names = {d.name: i for i, d in enumerate(query.definitions)}
        self.stream_names = {query.stream} | ({query.alias} if query.alias else set())

    def run(self) -> None:
        q = self.query
        self._check_unique_definitions()
        for d in q.definitions:
            self._check_definition(d)
        if q.single is not None:
            self._check_single(q.single)
        else:
            self._check_pattern()
        if q.within is not None and q.within.seconds / self.time_unit < 0:
            raise error(q.within, "WITHIN needs a positive duration")
        self._check_unique_outputs()
        for o in q.outputs:
            infer(o.expr, self._output_type)
        for ref in q.partition_by:
            self._check_attribute(ref)

    # --- definitions ----------------------------------------------------------------------

    def _check_unique_definitions(self) -> None:
        seen: set[str] = set()
        for d in self.query.definitions:
            if d.name in seen:
                raise error(d, f"situation {d.name} is defined twice; names must be unique")
            if d.name.lower() in RELATIONS:
                raise error(d, f"'{d.name}' is a temporal relation and cannot name a situation")
            seen.add(d.name)

    def _check_definition(self, d: Definition) -> None:
        for node in d.condition.walk():
            if isinstance(node, ast.Call):
                raise error(node, "a condition sees single events and cannot use aggregates "
                                  "(thesis §5.3.2)")
            if isinstance(node, ast.Ref):
                self._check_attribute(node)
        check_condition(d.condition, lambda node: Type.ANY)
        bounds = d.duration
        if (bounds is not None and bounds.low is not None and bounds.high is not None
                and bounds.low.seconds / self.time_unit > bounds.high.seconds / self.time_unit):
            raise error(bounds, "the lower duration bound exceeds the upper bound")

    def _check_attribute(self, ref: ast.Ref) -> None:
        """A condition or PARTITION BY reference reads an attribute of the input stream."""
        if ref.qualifier is not None and ref.qualifier not in self.stream_names:
            if ref.qualifier in self.names:
                raise error(ref, f"a condition cannot refer to situation {ref.qualifier}; "
                                 "conditions see the events of the input stream")
            raise error(ref, f"unknown stream '{ref.qualifier}'; the input stream is "
                             f"{' or '.join(sorted(self.stream_names))}")
        if ref.name == self.type_field:
            raise error(ref, f"'{ref.name}' is the event-type field and invisible to queries; "
                             "rename the attribute or choose another --type-field")

    # --- pattern --------------------------------------------------------------------------

    def _check_pattern(self) -> None:
        allowed: dict[tuple[int, int], frozenset[str]] = {}
        for c in self.query.constraints:
            self._check_constraint(c)
            i, j = (self.names[x] for x in c.pair)
            relations = c.relations()
            if (i, j) in allowed:
                relations &= allowed[i, j]
                if not relations:
                    raise error(c, f"no relation satisfies every constraint on {c.pair[0]} and "
                                   f"{c.pair[1]}")
            allowed[i, j] = relations
            allowed[j, i] = frozenset(INVERSE[r] for r in relations)
        self._check_connected(set(allowed))

    def _check_single(self, single: Single) -> None:
        if single.name not in self.names:
            raise error(single, f"unknown situation '{single.name}' in PATTERN; defined are "
                                f"{', '.join(self.names)}")
        for d in self.query.definitions:
            if d.name != single.name:
                raise error(d, f"situation {d.name} takes no part in PATTERN {single.name}; "
                               f"define {single.name} alone, or relate the two in PATTERN")
        (d,) = self.query.definitions
        within = self.query.within
        low = d.duration.low if d.duration is not None else None
        if within is not None and low is not None and low.seconds > within.seconds:
            raise error(within, f"situation {d.name} lasts at least {expr_text(low)}, longer "
                                f"than WITHIN {expr_text(within)}: PATTERN {d.name} can never "
                                "match")

    def _check_constraint(self, c: Constraint) -> None:
        for alt in c.alternatives:
            for name in (alt.left, alt.right):
                if name not in self.names:
                    raise error(alt, f"unknown situation '{name}' in PATTERN; defined are "
                                     f"{', '.join(self.names)}")
            if {alt.left, alt.right} != set(c.pair):
                raise error(alt, "all alternatives of one constraint must relate the same "
                                 f"two situations ({c.pair[0]} and {c.pair[1]})")
        if c.pair[0] == c.pair[1]:
            raise error(c, f"a constraint relates two different situations, not {c.pair[0]} "
                           "with itself")

    def _check_connected(self, related: set[tuple[int, int]]) -> None:
        reached, frontier = {0}, [0]
        while frontier:
            i = frontier.pop()
            for j in range(len(self.names)):
                if (i, j) in related and j not in reached:
                    reached.add(j)
                    frontier.append(j)
        for d in self.query.definitions:
            if self.names[d.name] not in reached:
                raise error(d, f"situation {d.name} is not related to the others in PATTERN; "
                               "every situation needs a temporal constraint")

    # --- outputs --------------------------------------------------------------------------

    def _check_unique_outputs(self) -> None:
        seen: set[str] = set()
        for o in self.query.outputs:
            if o.name in seen:
                raise error(o, f"two RETURN values are named {o.name}")
            seen.add(o.name)

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
        if arg.name == self.type_field:
            raise error(arg, f"'{arg.name}' is the event-type field and invisible to queries")
        return Type.ANY if node.name in ("first", "last", "min", "max") else Type.NUMBER

