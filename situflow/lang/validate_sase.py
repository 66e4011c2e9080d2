"""Validation of a SASE+ query (SIGMOD 2008 §2, SEMANTICS.md), run before compilation.

Variables are bound once, Kleene references (``v[i]``, ``v[..i-1]``, ``v.LEN``) appear only on
Kleene variables and only where the NFA^b construction of §3.2 can evaluate them, aggregates
take a Kleene collection, a leading or trailing negation has a window to wait for, and the
event-type field is invisible to predicates.
"""

from __future__ import annotations

from situflow.lang import ast
from situflow.lang.sase import (
    AGGREGATES,
    ITERATION_INDEXES,
    Equivalence,
    Index,
    KleeneLength,
    KleeneRef,
    SaseQuery,
    references,
)
from situflow.lang.validate import Type, check_condition, error, infer


def validate(query: SaseQuery, type_field: str = "type") -> None:
    """Check ``query`` against the rules of SEMANTICS.md; raise a located ValidationError."""
    _Validator(query, type_field).run()


class _Validator:
    def __init__(self, query: SaseQuery, type_field: str):
        self.query = query
        self.type_field = type_field
        self.position = {c.var: k for k, c in enumerate(query.components)}

    def run(self) -> None:
        q = self.query
        self._check_components()
        self._check_strategy_vars()
        for conjunct in q.conjuncts():
            self._check_conjunct(conjunct)
        self._check_negation_window()
        for attr in q.partition_by:
            self._check_attribute(q, attr)
        names: set[str] = set()
        for item in q.returns:
            self._check_expression(item.expr, in_where=False)
            if item.name in names:
                raise error(item, f"two RETURN values are named '{item.name}'; rename one with AS")
            names.add(item.name)

    def _check_components(self) -> None:
        seen: set[str] = set()
        for c in self.query.components:
            if c.var in seen:
                raise error(c, f"variable '{c.var}' is bound twice; each component needs its own "
                               "variable")
            seen.add(c.var)
            if c.negated and c.kleene:
                raise error(c, "a negated component cannot be a Kleene plus; negate one event, "
                               f"as in ~({c.type_name} {c.var})")
        if not self.query.positives:
            raise error(self.query, "a pattern needs at least one component that is not negated")

    def _check_strategy_vars(self) -> None:
        q = self.query
        if q.strategy is None:
            return
        listed: set[str] = set()
        for sv in q.strategy_vars:
            c = q.component(sv.var)
            if c is None:
                raise error(sv, f"'{sv.var}' is not a variable of the pattern")
            if sv.var in listed:
                raise error(sv, f"'{sv.var}' is listed twice")
            if sv.brackets and not c.kleene:
                raise error(sv, f"'{sv.var}' is not a Kleene variable; write it without '[ ]'")
            listed.add(sv.var)
        # Negated components may be left out (the paper lists them in Query 1, but they
        # select no event).
        missing = [c.var for c in q.positives if c.var not in listed]
        if missing:
            raise error(q.strategy_vars[-1], f"{q.effective_strategy.value}(...) must list every "
                                             "pattern variable that is not negated; missing "
                                             f"{', '.join(missing)}")

    def _check_attribute(self, node: ast.Node, attr: str) -> None:
        if attr == self.type_field:
            raise error(node, f"attribute '{attr}' is the event type field and is not visible to "
                              "predicates; rename the attribute or read types from another field "
                              "(--type-field)")

    def _check_conjunct(self, conjunct: ast.Node) -> None:
        q = self.query
        for node in conjunct.walk():
            if isinstance(node, Equivalence) and node is not conjunct:
                raise error(node, f"the equivalence test {node.to_text()} must stand on its own, "
                                  "joined to the other predicates with AND")
        if isinstance(conjunct, Equivalence):
            for attr in conjunct.attrs:
                self._check_attribute(conjunct, attr)
            return
        self._check_expression(conjunct, in_where=True)
        refs = list(references(conjunct))
        negated = {r_var for r in refs if (r_var := _var_of(r)) is not None
                   and (c := q.component(r_var)) is not None and c.negated}
        if len(negated) > 1:
            raise error(conjunct, "a predicate may refer to one negated variable only")
        iteration_vars = {r.var for r in refs
                          if isinstance(r, KleeneRef) and r.index in ITERATION_INDEXES}
        if len(iteration_vars) > 1:
            raise error(conjunct, "a predicate may iterate over one Kleene variable only")
        if iteration_vars:
            (var,) = iteration_vars
            if negated:
                raise error(conjunct, "a predicate on a negated variable cannot use "
                                      f"{var}[i], {var}[i-1] or {var}[..i-1]")
            if not any(isinstance(r, KleeneRef) and r.var == var and r.index is Index.CURRENT
                       for r in refs):
                raise error(conjunct, f"{var}[i-1] and {var}[..i-1] compare earlier events with "
                                      f"{var}[i]; this predicate has no {var}[i]")
            for r in refs:
                r_var = _var_of(r)
                assert r_var is not None
                if self.position[r_var] > self.position[var]:
                    raise error(r, f"a predicate on {var}[i] is checked as each event is "
                                   f"selected, before '{r_var}' is known")
                if r_var == var and isinstance(r, KleeneRef | KleeneLength) and not (
                    isinstance(r, KleeneRef) and (r.index in ITERATION_INDEXES or (
                        r.index is Index.CONST and r.k == 1))
                ):
                    raise error(r, f"a predicate on {var}[i] can use {var}[1], {var}[i-1] and "
                                   f"{var}[..i-1] but not {r.to_text()}")
        typeof = self._typeof
        check_condition(conjunct, typeof)

    def _check_expression(self, expr: ast.Node, in_where: bool) -> None:
        aggregated = {id(a) for n in expr.walk() if isinstance(n, ast.Call) for a in n.args}
        for node in expr.walk():
            if isinstance(node, ast.Call):
                self._check_aggregate(node, in_where)
            elif isinstance(node, ast.Ref | KleeneRef | KleeneLength):
                self._check_reference(node, in_where)
                if isinstance(node, KleeneRef) and node.index in (Index.PREFIX, Index.ALL) and (
                    id(node) not in aggregated
                ):
                    raise error(node, f"{node.to_text()} needs an aggregate around it, as in "
                                      f"avg({node.to_text()})")
        infer(expr, self._typeof)

    def _check_aggregate(self, call: ast.Call, in_where: bool) -> None:
        if call.name not in AGGREGATES:
            raise error(call, f"unknown function '{call.name}'; aggregates are "
                              + ", ".join(sorted(AGGREGATES)))
        arg = call.args[0] if len(call.args) == 1 and not call.star else None
        if not (isinstance(arg, KleeneRef) and arg.index in (Index.PREFIX, Index.ALL)
                and arg.attr is not None):
            raise error(call, f"{call.name}(...) takes one attribute of a Kleene variable, as in "
                              f"{call.name}(a[..i-1].price) or {call.name}(a[ ].price)")
        if arg.index is Index.PREFIX and not in_where:
            raise error(arg, "..i-1 refers to the events before a[i]; RETURN can use a[ ]")

    def _check_reference(self, ref: ast.Node, in_where: bool) -> None:
        q = self.query
        var = _var_of(ref)
        if var is None:
            assert isinstance(ref, ast.Ref)
            raise error(ref, f"qualify '{ref.name}' with a pattern variable, as in a.{ref.name}")
        c = q.component(var)
        if c is None:
            raise error(ref, f"'{var}' is not a variable of the pattern")
        if c.negated and not in_where:
            raise error(ref, f"'{var}' is negated: a match has no '{var}' event to return")
        if isinstance(ref, ast.Ref):
            if c.kleene:
                raise error(ref, f"'{var}' is a Kleene variable: say which event, as in "
                                 f"{var}[1].{ref.name}, {var}[i].{ref.name} or "
                                 f"{var}[{var}.LEN].{ref.name}")
            self._check_attribute(ref, ref.name)
            return
        if isinstance(ref, KleeneRef):
            if not c.kleene:
                raise error(ref, f"'{var}' is not a Kleene variable and cannot be indexed; "
                                 f"declare it as {c.type_name}+ {var}[ ] or write {var}.attr")
            if ref.attr is None:
                raise error(ref, f"say which attribute of {ref.to_text()} is meant, as in "
                                 f"{ref.to_text()}.price")
            self._check_attribute(ref, ref.attr)
            if ref.index in ITERATION_INDEXES and not in_where:
                raise error(ref, f"{var}[i] exists only while events are selected; RETURN can "
                                 f"use {var}[1], {var}[{var}.LEN], {var}[k] or aggregates")

    def _typeof(self, node: ast.Node) -> Type:
        if isinstance(node, KleeneLength):
            return Type.NUMBER
        if isinstance(node, ast.Call):
            return Type.NUMBER
        return Type.ANY

    def _check_negation_window(self) -> None:
        q = self.query
        comps = q.components
        for k, c in enumerate(comps):
            if not c.negated:
                continue
            leading = not any(not p.negated for p in comps[:k])
            trailing = not any(not p.negated for p in comps[k + 1:])
            if (leading or trailing) and q.within is None:
                where = "leading" if leading else "trailing"
                raise error(c, f"a {where} negation needs a window: add WITHIN, so that it is "
                               "known how long to look for the negated event")
            if trailing and q.consume:
                raise error(c, "CONSUME cannot be combined with a trailing negation: a match "
                               "waiting for its window would let overlapping matches through")


def _var_of(ref: ast.Node) -> str | None:
    if isinstance(ref, ast.Ref):
        return ref.qualifier
    if isinstance(ref, KleeneRef | KleeneLength):
        return ref.var
    return None
