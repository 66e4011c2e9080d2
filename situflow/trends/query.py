"""``compile(text, options)`` for COGRA queries (the language registry's ``RETURN`` entry).

>>> q = compile("RETURN COUNT(*) PATTERN SEQ(A+, B+) SEMANTICS skip-till-next-match WITHIN 10")
>>> print(q.describe().splitlines()[2])
granularity: pattern (Table 5)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from situflow.lang import cogra
from situflow.lang.attributes import AttributeTypes
from situflow.lang.cogra import CograQuery, parse
from situflow.lang.identity import query_id
from situflow.lang.printer import expr_text
from situflow.lang.validate_cogra import validate
from situflow.operator import QueryOptions
from situflow.trends.analyze import analyze
from situflow.trends.configuration import TrendPlan
from situflow.trends.conjunction import ConjunctionOperator
from situflow.trends.operator import TrendOperator, TrendProgram


@dataclass(frozen=True, eq=False)
class CompiledTrendQuery:
    """An immutable compiled COGRA query, shared by every operator instance."""

    tree: CograQuery
    plan: TrendPlan
    # One executor program per automaton: the plan's own, or one per side of a conjunction.
    programs: tuple[TrendProgram, ...]
    options: QueryOptions
    language: str = field(default="cogra", init=False)

    @property
    def name(self) -> str:
        return self.options.name

    @functools.cached_property
    def query_id(self) -> str:
        return query_id(self.canonical())

    def canonical(self) -> str:
        return self.tree.to_text()

    @property
    def partition_attributes(self) -> tuple[str, ...]:
        """``GROUP-BY`` only: a group's aggregate sums the trends of every equivalence
        partition in it."""
        return self.plan.group_by

    @functools.cached_property
    def attribute_types(self) -> AttributeTypes:
        return cogra.attribute_types(self.tree).without({self.options.type_field})

    def describe(self) -> str:
        """The canonical text, then the analyzer's decisions (Fig. 3): automaton, predicates,
        granularity, path."""
        plan = self.plan
        lines = [self.canonical(), f"COGRA query {self.query_id[:12]}: {plan.semantics}"]
        if not plan.factors:
            lines += _describe_automaton(plan)
        else:
            lines += [f"granularity: {plan.granularity}", f"executor: {plan.path}"]
            for k, factor in enumerate(plan.factors, 1):
                lines.append(f"side {k}:")
                lines += ["  " + line for line in _describe_automaton(factor)]
        if plan.partition_attrs:
            lines.append("partitioned by " + ", ".join(plan.partition_attrs))
        lines.append(f"windows: [k*{plan.slide}, k*{plan.slide} + {plan.size}) time units")
        return "\n".join(lines)

    def operator(self) -> TrendOperator | ConjunctionOperator:
        if self.plan.factors:
            return ConjunctionOperator(self.plan, self.programs, self.name, self.query_id)
        return TrendOperator(self.programs[0], self.name, self.query_id)

    def restore(self, snapshot: dict[str, Any]) -> TrendOperator | ConjunctionOperator:
        if self.plan.factors:
            return ConjunctionOperator.restore(self.plan, self.programs, self.name,
                                               self.query_id, snapshot)
        return TrendOperator.restore(self.programs[0], self.name, self.query_id, snapshot)


def _describe_automaton(plan: TrendPlan) -> list[str]:
    """Granularity, executor path, start and end states, predicates of one automaton."""
    # A variable with several positions (OR branches, unrolled lengths) gets #1, #2, ...
    variables_seen = [p.variable for p in plan.positions]
    names = [v if variables_seen.count(v) == 1 else f"{v}#{variables_seen[:i + 1].count(v)}"
             for i, v in enumerate(variables_seen)]

    def variables(indexes: Any) -> str:
        return "{" + ", ".join(names[i] for i in indexes) + "}"

    lines = [
        f"granularity: {plan.granularity} (Table 5)",
        f"executor: {plan.path}",
        "start: " + variables(i for i, s in enumerate(plan.start) if s)
        + ", end: " + variables(i for i, e in enumerate(plan.end) if e),
    ]
    for p, position in enumerate(plan.positions):
        local = " AND ".join(expr_text(c) for c in position.local)
        lines.append(f"  {names[p]} ({position.type_name}): predTypes "
                     f"{variables(plan.pred_types(p))}" + (f", where {local}" if local else ""))
    for (p, q), g in plan.guarded:
        negation = plan.negations[g]
        local = " AND ".join(expr_text(c) for c in negation.local)
        lines.append(f"  negated: no {negation.type_name} {negation.variable} between "
                     f"{names[p]} and {names[q]}" + (f" where {local}" if local else ""))
    for atom in plan.atoms:
        lines.append(f"  adjacent: {names[atom.prev]} -> {names[atom.next]}: "
                     f"{expr_text(atom.prev_expr)} {atom.op} {expr_text(atom.next_expr)}")
    return lines


def compile(text: str, options: QueryOptions | None = None) -> CompiledTrendQuery:
    """Parse, validate and compile a COGRA query; raises ``QueryError`` with its position."""
    options = options or QueryOptions()
    tree = parse(text)
    validate(tree, options.type_field, options.time_unit)
    plan = analyze(tree, options)
    programs = tuple(TrendProgram.build(p, options.device) for p in plan.factors or (plan,))
    return CompiledTrendQuery(tree, plan, programs, options)
