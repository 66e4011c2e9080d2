"""Hypothesis strategies for random valid query trees of the three languages.

Each strategy builds an AST from the grammar of its language module and returns it; the
tests print it with the language's canonical printer. The trees use a small vocabulary that the
generated event streams carry (:data:`TYPES`, :data:`NUMERIC`, :data:`TEXT`, :data:`KEY`), so
valid queries find matches. "Valid" is the grammar's sense: most trees also pass validation,
and the ones that do not must be refused with a located error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from hypothesis import strategies as st

from situflow.lang import ast, cogra, sase, tpstream
from situflow.lang.allen import RELATIONS

TYPES = ("A", "B", "C")
NUMERIC = ("x", "y")
TEXT = "s"  # a string attribute, values 'a' and 'b'
KEY = "k"  # the partition key, values 0 and 1
TEXT_VALUES = ("a", "b", "it's", 'say "b"')

Draw = st.DrawFn
RefFn = Callable[[Draw, str], ast.Node]  # a reference to an attribute, given its name


def literal_numbers() -> st.SearchStrategy[ast.Literal]:
    return st.one_of(
        st.integers(-3, 6).map(ast.Literal),
        st.sampled_from([0.5, 2.25, 1e-05, 1e20]).map(ast.Literal),
        st.sampled_from([(70, "mph"), (8, "m/s2"), (80, "%")]).map(lambda p: ast.Literal(*p)),
    )


def numeric(draw: Draw, ref: RefFn, depth: int = 2) -> ast.Node:
    """A number: a literal, an attribute, or arithmetic on them."""
    kind = draw(st.integers(0, 4 if depth > 0 else 1))
    if kind == 0:
        return draw(literal_numbers())
    if kind == 1:
        return ref(draw, draw(st.sampled_from(NUMERIC)))
    if kind == 2:
        return ast.Unary("-", ref(draw, draw(st.sampled_from(NUMERIC))))
    op = draw(st.sampled_from(sorted(ast.ARITHMETIC)))
    return ast.Binary(op, numeric(draw, ref, depth - 1), numeric(draw, ref, depth - 1))


def condition(draw: Draw, ref: RefFn, depth: int = 2) -> ast.Node:
    """A condition: comparisons joined by AND, OR, NOT, and comparisons of conditions."""
    kind = draw(st.integers(0, 6 if depth > 0 else 1))
    if kind == 0:
        op = draw(st.sampled_from(sorted(ast.COMPARISONS)))
        return ast.Binary(op, numeric(draw, ref, depth), numeric(draw, ref, depth))
    if kind == 1:
        value = ast.Literal(draw(st.sampled_from(TEXT_VALUES)))
        return ast.Binary(draw(st.sampled_from(["=", "!="])), ref(draw, TEXT), value)
    if kind == 2:
        return ast.Unary("not", condition(draw, ref, depth - 1))
    if kind == 3:
        return ast.Binary("=", condition(draw, ref, depth - 1), condition(draw, ref, depth - 1))
    if kind == 4:
        return ast.Literal(draw(st.booleans()))
    op = draw(st.sampled_from(["and", "or"]))
    return ast.Binary(op, condition(draw, ref, depth - 1), condition(draw, ref, depth - 1))


def durations(low: int = 0) -> st.SearchStrategy[ast.Duration]:
    units = st.sampled_from(["s", "seconds", "ms", "minutes", "hour"])
    return st.builds(ast.Duration, st.integers(low, 12).map(float), units)


# --- TPStream ---------------------------------------------------------------------------------


@st.composite
def tpstream_queries(draw: Draw) -> tpstream.Query:
    alias = draw(st.sampled_from([None, "CS"]))
    qualifier = draw(st.sampled_from([None, alias])) if alias else None

    def ref(_: Draw, name: str) -> ast.Node:
        return ast.Ref(qualifier, name)

    names = list(TYPES[: draw(st.integers(2, 3))])
    definitions = []
    for name in names:
        constraint = None
        bounds = draw(st.sampled_from(["none", "least", "most", "between"]))
        if bounds != "none":
            low, high = sorted(draw(st.lists(durations(), min_size=2, max_size=2)),
                               key=lambda d: d.seconds)
            constraint = tpstream.DurationConstraint(
                low if bounds in ("least", "between") else None,
                high if bounds in ("most", "between") else None)
        definitions.append(tpstream.Definition(name, condition(draw, ref), constraint))
    constraints = []
    for i, name in enumerate(names[1:], 1):
        other = names[draw(st.integers(0, i - 1))]
        left, right = draw(st.permutations([name, other]))
        relations = draw(st.lists(st.sampled_from(RELATIONS), min_size=1, max_size=5,
                                  unique=True))
        constraints.append(tpstream.Constraint(tuple(
            tpstream.Relation(left, r, right) for r in relations)))
    outputs = []
    for n in range(draw(st.integers(1, 3))):
        outputs.append(tpstream.ReturnItem(_tpstream_output(draw, names), f"o{n}"))
    partition = (ast.Ref(qualifier, KEY),) if draw(st.booleans()) else ()
    return tpstream.Query("S", alias, partition, tuple(definitions), tuple(constraints),
                          draw(durations(low=1)), tuple(outputs))


def _tpstream_output(draw: Draw, names: list[str]) -> ast.Node:
    situation = draw(st.sampled_from(names))
    func = draw(st.sampled_from(["first", "last", "min", "max", "sum", "count", "avg"]))
    if func == "count" and draw(st.booleans()):
        call = ast.Call("count", (ast.Ref(None, situation),))
    else:
        call = ast.Call(func, (ast.Ref(situation, draw(st.sampled_from(NUMERIC))),))
    if draw(st.integers(0, 3)) == 0:
        return ast.Binary(draw(st.sampled_from(["+", "-", "*", "/"])), call,
                          draw(literal_numbers()))
    return call


# --- SASE+ ------------------------------------------------------------------------------------


@st.composite
def sase_queries(draw: Draw) -> sase.SaseQuery:
    n = draw(st.integers(1, 4))
    components = []
    for var in "abcd"[:n]:
        negated = draw(st.integers(0, 3)) == 0
        kleene = not negated and draw(st.booleans())
        components.append(sase.Component(draw(st.sampled_from(TYPES)), var, kleene, negated))
    if all(c.negated for c in components):
        c = components[-1]
        components[-1] = sase.Component(c.type_name, c.var)
    positives = [c for c in components if not c.negated]
    negation_at_edge = components[0].negated or components[-1].negated
    conjuncts: list[ast.Node] = []
    if draw(st.booleans()):
        conjuncts.append(sase.Equivalence((KEY,)))
    for _ in range(draw(st.integers(0, 3))):
        conjuncts.append(_sase_conjunct(draw, components, positives))
    where: ast.Node | None = None
    for conjunct in conjuncts:
        where = conjunct if where is None else ast.Binary("and", where, conjunct)
    # The canonical text always spells the strategy out.
    strategy = draw(st.sampled_from(sase.Strategy))
    listed = tuple(sase.StrategyVar(c.var, c.kleene) for c in components)
    within = draw(durations()) if negation_at_edge or draw(st.booleans()) else None
    trailing = components[-1].negated
    returns = tuple(sase.ReturnItem(_sase_term(draw, c, in_where=False), f"r{k}")
                    for k, c in enumerate(draw(st.lists(st.sampled_from(positives),
                                                        max_size=3))))
    return sase.SaseQuery(
        tuple(components), strategy, listed, where, within,
        (KEY,) if draw(st.booleans()) else (),
        not trailing and draw(st.booleans()), returns)


def _sase_term(draw: Draw, c: sase.Component, in_where: bool, name: str | None = None
               ) -> ast.Node:
    """A value of the events of component ``c`` that any predicate may read."""
    attr = name or draw(st.sampled_from(NUMERIC))
    if not c.kleene:
        return ast.Ref(c.var, attr)
    kind = draw(st.integers(0, 4 if name is None else 1))
    if kind == 0:
        return sase.KleeneRef(c.var, sase.Index.CONST, attr, 1)
    if kind == 1:
        return sase.KleeneRef(c.var, sase.Index.LAST, attr)
    if kind == 2:
        return sase.KleeneRef(c.var, sase.Index.CONST, attr, draw(st.integers(2, 3)))
    if kind == 3:
        return sase.KleeneLength(c.var, dotted=True)
    func = draw(st.sampled_from(sorted(sase.AGGREGATES)))
    return ast.Call(func, (sase.KleeneRef(c.var, sase.Index.ALL, attr),))


def _sase_conjunct(draw: Draw, components: list[sase.Component],
                   positives: list[sase.Component]) -> ast.Node:
    op = draw(st.sampled_from(sorted(ast.COMPARISONS)))
    subject = draw(st.sampled_from(components))
    other = draw(st.sampled_from(positives))
    right: ast.Node = draw(literal_numbers()) if draw(st.booleans()) else \
        _sase_term(draw, other, True)
    if subject.negated:
        if isinstance(right, ast.Node) and not isinstance(right, ast.Literal) and other.kleene:
            right = sase.KleeneRef(other.var, sase.Index.CONST, "x", 1)
        return ast.Binary(op, ast.Ref(subject.var, draw(st.sampled_from(NUMERIC))), right)
    if subject.kleene and draw(st.booleans()):
        # An iteration predicate: v[i] against v[i-1], the prefix or an earlier component.
        attr = draw(st.sampled_from(NUMERIC))
        current = sase.KleeneRef(subject.var, sase.Index.CURRENT, attr)
        earlier = [c for c in positives[: positives.index(subject)]]
        choice = draw(st.integers(0, 3))
        if choice == 0:
            right = sase.KleeneRef(subject.var, sase.Index.PREVIOUS, attr)
        elif choice == 1:
            right = ast.Call(draw(st.sampled_from(sorted(sase.AGGREGATES))),
                             (sase.KleeneRef(subject.var, sase.Index.PREFIX, attr),))
        elif choice == 2 and earlier:
            right = _sase_term(draw, draw(st.sampled_from(earlier)), True)
        else:
            right = draw(literal_numbers())
        return ast.Binary(op, current, right)
    if draw(st.integers(0, 3)) == 0:
        text = ast.Literal(draw(st.sampled_from(TEXT_VALUES)))
        return ast.Binary("=", _sase_term(draw, subject, True, TEXT), text)
    return ast.Binary(op, _sase_term(draw, subject, True), right)


# --- COGRA ------------------------------------------------------------------------------------


@st.composite
def cogra_queries(draw: Draw) -> cogra.CograQuery:
    counter = iter(range(100))
    kleene_vars: list[str] = []

    def pattern(depth: int) -> ast.Node:
        kind = draw(st.integers(0, 4 if depth > 0 else 1))
        if kind <= 1:
            var = f"v{next(counter)}"
            node: ast.Node = cogra.TypePattern(draw(st.sampled_from(TYPES)), var)
            if kind == 1:
                node = cogra.KleenePattern(node, draw(st.sampled_from("++*?")))
                if node.op == "+":
                    kleene_vars.append(var)
            return node
        if kind == 2:
            items = [pattern(depth - 1) for _ in range(draw(st.integers(2, 3)))]
            if draw(st.integers(0, 3)) == 0:
                negated = cogra.TypePattern(draw(st.sampled_from(TYPES)), f"v{next(counter)}")
                items.insert(1, cogra.NegatedPattern(negated))
            return cogra.SeqPattern(tuple(items))
        if kind == 3:
            return cogra.OrPattern((pattern(depth - 1), pattern(depth - 1)))
        return cogra.KleenePattern(pattern(depth - 1), "+")

    top = pattern(2)
    if draw(st.integers(0, 5)) == 0:
        top = cogra.AndPattern((top, pattern(1)))
    variables = [n.variable for n in top.walk() if isinstance(n, cogra.TypePattern)]
    negated = {n.inner.variable for n in top.walk() if isinstance(n, cogra.NegatedPattern)}
    bound = [v for v in variables if v not in negated] or variables
    group_by = (KEY,) if draw(st.booleans()) else ()
    returns: list[ast.Node] = [ast.Ref(None, KEY)] if group_by and draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 3))):
        func = draw(st.sampled_from(cogra.AGGREGATES))
        if func == "COUNT" and draw(st.booleans()):
            returns.append(cogra.Aggregate("COUNT"))
        elif func == "COUNT":
            returns.append(cogra.Aggregate("COUNT", draw(st.sampled_from(bound))))
        else:
            returns.append(cogra.Aggregate(func, draw(st.sampled_from(bound)),
                                           draw(st.sampled_from(NUMERIC))))
    where: list[ast.Node] = []
    if draw(st.booleans()):
        where.append(cogra.Equivalence((KEY,)))
    for _ in range(draw(st.integers(0, 2))):
        var = draw(st.sampled_from(variables))

        def ref(_: Draw, name: str, var: str = var) -> ast.Node:
            return ast.Ref(var, name)

        # WHERE holds conjuncts: a top-level AND is two of them.
        where.extend(ast.conjuncts(condition(draw, ref, 1)))
    adjacent = draw(st.booleans())
    if kleene_vars and adjacent:
        kleene = draw(st.sampled_from(kleene_vars))
        attr = draw(st.sampled_from(NUMERIC))
        op = draw(st.sampled_from(sorted(ast.COMPARISONS)))
        where.append(ast.Binary(op, ast.Ref(kleene, attr), cogra.NextRef(kleene, attr)))
        if draw(st.booleans()):
            where.append(ast.Binary(">=", cogra.KleeneLength(kleene),
                                    ast.Literal(draw(st.integers(1, 3)))))
    within = draw(windows())
    slide = draw(windows()) if draw(st.booleans()) else None
    return cogra.CograQuery(tuple(returns), top, draw(st.sampled_from(cogra.SEMANTICS)),
                            tuple(where), group_by, within, slide)


def windows() -> st.SearchStrategy[cogra.WindowLength]:
    ticks = st.integers(1, 12).map(lambda n: cogra.WindowLength(ast.Literal(n)))
    return st.one_of(ticks, durations(low=1).map(cogra.WindowLength))


def canonical(tree: ast.Node) -> str:
    """The canonical text of a query tree of any of the three languages."""
    if isinstance(tree, sase.SaseQuery):
        return tree.to_text()
    assert isinstance(tree, tpstream.Query | cogra.CograQuery)
    return tree.to_text()


def normalized(node: Any) -> Any:
    """``node`` as comparable data, with every duration in seconds (``60 seconds`` prints as
    ``1 minute``), nested OR and AND patterns flattened and relations as sets."""
    if isinstance(node, ast.Duration):
        return round(node.seconds, 9)
    if isinstance(node, tuple):
        return tuple(normalized(n) for n in node)
    if not isinstance(node, ast.Node):
        return node
    if isinstance(node, cogra.OrPattern | cogra.AndPattern):  # associative: the parser flattens
        flat = tuple(i for item in node.items
                     for i in (item.items if type(item) is type(node) else (item,)))
        return (type(node).__name__, normalized(flat))
    if isinstance(node, tpstream.Constraint):  # a set of relations, printed in Allen's order
        return ("Constraint", node.pair, tuple(sorted(node.relations())))
    return (type(node).__name__, *(normalized(getattr(node, f.name)) for f in fields(node)
                                   if f.compare))


def parse(text: str) -> ast.Node:
    """Parse canonical text back, in the language of its first word."""
    first = text.split(None, 1)[0].upper()
    return {"FROM": tpstream.parse, "PATTERN": sase.parse, "RETURN": cogra.parse}[first](text)
