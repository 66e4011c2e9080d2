"""COGRA's Appendix C sugar, rewritten into the core operators ``E``, ``SEQ``, ``+`` and ``OR``.

``SEQ(P1*, P2)`` becomes ``SEQ(P1+, P2) OR P2`` (so every alternative is judged by the
semantics on its own, as the paper's disjunction), ``SEQ(P1?, P2)`` becomes
``SEQ(P1, P2) OR P2``, and ``LENGTH(A) >= 3`` unrolls ``A+`` to ``SEQ(A, A, A+)``, every copy
bound to ``A``. Validation (:mod:`situflow.lang.validate_cogra`) and the pattern analyzer
(:mod:`situflow.trends.pattern_analyzer`) read the pattern through the same rewrite.
"""

from __future__ import annotations

from situflow.lang import ast
from situflow.lang.cogra import (
    CograQuery,
    KleeneLength,
    KleenePattern,
    NegatedPattern,
    OrPattern,
    SeqPattern,
    TypePattern,
)
from situflow.lang.validate import error

# Sugar expansions above this many alternatives are refused: the automaton would grow too big.
MAX_ALTERNATIVES = 256
# A minimal length unrolls the Kleene plus into that many positions (each a state).
MAX_MINIMUM_LENGTH = 100


def minimal_lengths(query: CograQuery) -> dict[str, int]:
    """``LENGTH(A) >= m`` (or ``> m - 1``) conjuncts, by variable (Appendix C)."""
    kleene = {n.inner.variable: n for n in query.pattern.walk()
              if isinstance(n, KleenePattern) and isinstance(n.inner, TypePattern)
              and n.op != "?"}
    lengths: dict[str, int] = {}
    for conjunct in query.where:
        refs = [n for n in conjunct.walk() if isinstance(n, KleeneLength)]
        if not refs:
            continue
        if not (isinstance(conjunct, ast.Binary) and conjunct.op in (">=", ">")
                and isinstance(conjunct.left, KleeneLength)
                and isinstance(conjunct.right, ast.Literal)
                and isinstance(conjunct.right.value, int)
                and not isinstance(conjunct.right.value, bool)):
            raise error(conjunct, "a length predicate sets a minimum, as in LENGTH(A) >= 3")
        variable = conjunct.left.var
        if variable not in kleene:
            raise error(conjunct.left, f"LENGTH({variable}) needs a Kleene variable such as "
                                       f"{variable}+ in the pattern")
        minimum = conjunct.right.value + (1 if conjunct.op == ">" else 0)
        if minimum > MAX_MINIMUM_LENGTH:
            raise error(conjunct, f"LENGTH({variable}) >= {minimum} unrolls {variable}+ into "
                                  f"{minimum} positions; at most {MAX_MINIMUM_LENGTH} are supported")
        lengths[variable] = max(lengths.get(variable, 1), minimum)
    return lengths


def alternatives(node: ast.Node, lengths: dict[str, int]) -> list[ast.Node | None]:
    """The alternatives of ``node`` without sugar; ``None`` is the empty pattern."""
    if isinstance(node, TypePattern | NegatedPattern):
        return [node]
    if isinstance(node, KleenePattern):
        minimum = lengths.get(node.inner.variable, 1) if isinstance(node.inner, TypePattern) \
            else 1
        if minimum > 1:
            unrolled = SeqPattern((node.inner,) * (minimum - 1)
                                  + (KleenePattern(node.inner, "+", span=node.span),),
                                  span=node.span)
            return [unrolled]
        inner = [a for a in alternatives(node.inner, lengths) if a is not None]
        if node.op == "?":  # SEQ(P1?, P2) = SEQ(P1, P2) OR P2
            return [*inner, None]
        plus: list[ast.Node | None] = []
        if inner:
            body = inner[0] if len(inner) == 1 else OrPattern(tuple(inner), span=node.span)
            plus.append(KleenePattern(body, "+", span=node.span))
        # A star may match nothing, unless a LENGTH predicate asks for at least one event.
        constrained = isinstance(node.inner, TypePattern) and node.inner.variable in lengths
        return [*plus, None] if node.op == "*" and not constrained else plus
    if isinstance(node, OrPattern):
        return [a for item in node.items for a in alternatives(item, lengths)]
    assert isinstance(node, SeqPattern)
    combos: list[tuple[ast.Node, ...]] = [()]
    for item in node.items:
        options = alternatives(item, lengths)
        combos = [c + ((o,) if o is not None else ()) for c in combos for o in options]
        if len(combos) > MAX_ALTERNATIVES:
            raise error(node, f"this pattern expands to more than {MAX_ALTERNATIVES} "
                              "alternatives; use fewer Kleene stars")
    out: list[ast.Node | None] = []
    for combo in combos:
        if not combo:
            out.append(None)
        else:
            out.append(combo[0] if len(combo) == 1 else SeqPattern(combo, span=node.span))
    return out


def nullable(node: ast.Node) -> bool:
    """Whether ``node`` can match the empty trend."""
    if isinstance(node, KleenePattern):
        return node.op in ("*", "?") or nullable(node.inner)
    if isinstance(node, SeqPattern):
        return all(nullable(i) for i in node.items if not isinstance(i, NegatedPattern))
    if isinstance(node, OrPattern):
        return any(nullable(i) for i in node.items)
    return False
