"""Match construction (§5.2, second phase): from a retrieved match to a result.

Negation conditions (§3.1: the negated component's predicates are checked against each
positive match, as a nested query) and ``RETURN`` expressions read the whole match, not V, so
they compile against a :class:`MatchEnv`: the events of every positive component plus, for a
negation, the candidate event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from situflow.lang import ast
from situflow.lang.compile import Getter
from situflow.lang.sase import Index, KleeneLength, KleeneRef
from situflow.nfa.compiler.values import NAN, is_missing
from situflow.nfa.sharedbuffer.buffer import BufferedEvent


@dataclass(slots=True)
class MatchEnv:
    events: list[list[BufferedEvent]]
    candidate: BufferedEvent | None = None


def aggregate(name: str, values: list[Any]) -> Any:
    """``avg/max/min/sum/count`` over values, skipping missing ones (as V does)."""
    present = [x for x in values if not is_missing(x)]
    if name == "count":
        return len(present)
    if not present:
        return NAN
    if name == "avg":
        return sum(present) / len(present)
    if name == "sum":
        return sum(present)
    return max(present) if name == "max" else min(present)


def match_resolver(position: Mapping[str, int], attribute: Callable[[str], int],
                   negated: str | None = None) -> Callable[[ast.Node], Getter]:
    """Getters over a :class:`MatchEnv`; ``negated`` names the variable bound to the candidate."""

    def resolve(node: ast.Node) -> Getter:
        if isinstance(node, ast.Call):
            arg = node.args[0]
            assert isinstance(arg, KleeneRef) and arg.attr is not None
            p, a, name = position[arg.var], attribute(arg.attr), node.name
            return lambda env: aggregate(name, [e.row[a] for e in env.events[p]])
        if isinstance(node, ast.Ref):
            assert node.qualifier is not None
            a = attribute(node.name)
            if node.qualifier == negated:
                return lambda env: env.candidate.row[a]
            p = position[node.qualifier]
            return lambda env: env.events[p][0].row[a]
        if isinstance(node, KleeneLength):
            p = position[node.var]
            return lambda env: len(env.events[p])
        if isinstance(node, KleeneRef) and node.attr is not None:
            p, a = position[node.var], attribute(node.attr)
            if node.index is Index.LAST:
                return lambda env: env.events[p][-1].row[a]
            if node.index is Index.CONST:
                k = node.k
                return lambda env: env.events[p][k - 1].row[a] if len(env.events[p]) >= k else NAN
        raise TypeError(f"no match value for {type(node).__name__}")

    return resolve


def json_value(x: Any) -> Any:
    """A result value as JSON: numpy scalars unwrapped, NaN as null."""
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and x != x:
        return None
    return x
