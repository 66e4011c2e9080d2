"""The compiled NFA^b automaton (§3.1): states, edges and their formulas, plus the programs the
runtime evaluates.

An :class:`Automaton` is immutable and shared by every partition and operator instance; run
state lives in :mod:`situflow.nfa.runs`. States form a line: a singleton state per single
component, a pair ``p[1]``, ``p[i]`` per Kleene plus component, and the final state ``F``.
Each :class:`Edge` carries its formula twice: ``basic`` as built by Steps 1–4 of §3.2 (Figure
2(b)) and ``formula`` after the optimizations of Steps 5–6 (Figure 2(c)). The formulas are for
people (``describe``, tests against the paper); the runtime evaluates the equivalent
:class:`ComponentProgram` tests, and the selection strategy's ignore rule
(:mod:`situflow.nfa.compiler.selection`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from situflow.lang.sase import SaseQuery
from situflow.nfa.compiler.programs import Program
from situflow.nfa.compiler.selection import Selection
from situflow.nfa.compiler.values import Values

# A conjunct over one run and the current event (``env.v``: V, ``env.row``: the event).
ScalarTest = Callable[[Any], Any]
# A conjunct over a whole batch (``cols``: attribute name -> numpy column).
VectorTest = Callable[[Any], Any]


# --- formulas, as printed in Figure 2 ------------------------------------------------------------


class Formula:
    def text(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Atom(Formula):
    """A predicate or a named edge formula such as ``θb_begin``."""

    source: str

    def text(self) -> str:
        return self.source


@dataclass(frozen=True)
class Const(Formula):
    value: bool

    def text(self) -> str:
        return "True" if self.value else "False"


TRUE, FALSE = Const(True), Const(False)


@dataclass(frozen=True)
class And(Formula):
    parts: tuple[Formula, ...]

    def text(self) -> str:
        return " ∧ ".join(f"({p.text()})" if isinstance(p, Or) else p.text() for p in self.parts)


@dataclass(frozen=True)
class Or(Formula):
    parts: tuple[Formula, ...]

    def text(self) -> str:
        return " ∨ ".join(f"({p.text()})" if isinstance(p, And) else p.text() for p in self.parts)


@dataclass(frozen=True)
class Not(Formula):
    part: Formula

    def text(self) -> str:
        inner = self.part.text()
        return f"¬{inner}" if isinstance(self.part, Atom) and " " not in inner else f"¬({inner})"


def conjoin(*parts: Formula) -> Formula:
    """``parts`` joined by ∧, flattened, without True, and False if any part is False."""
    flat: list[Formula] = []
    for p in parts:
        if p == FALSE:
            return FALSE
        if isinstance(p, And):
            flat.extend(p.parts)
        elif p != TRUE:
            flat.append(p)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def negate(part: Formula) -> Formula:
    if isinstance(part, Const):
        return Const(not part.value)
    return Not(part)


# --- states and edges --------------------------------------------------------------------------


class StateKind(Enum):
    BEGIN = "begin"  # a singleton state or the first state p[1] of a Kleene pair
    ITERATE = "iterate"  # the second state p[i] of a Kleene pair
    FINAL = "final"


@dataclass(frozen=True)
class Edge:
    action: str  # begin | take | ignore | proceed
    source: int
    target: int
    basic: Formula
    formula: Formula


@dataclass(frozen=True)
class State:
    index: int
    name: str
    kind: StateKind
    component: int  # index among the positive components; -1 for F
    edges: tuple[Edge, ...]
    # V columns that edges at this state or later read: runs agreeing on them are merged (§5.2.2).
    mask: tuple[int, ...]


# --- runtime programs --------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeTest:
    """A begin or take condition: event type, conjuncts on the event alone (vectorized per
    batch) and conjuncts that read V (per run)."""

    event_type: str
    vector: tuple[VectorTest, ...]
    scalar: tuple[ScalarTest, ...]
    # Conjuncts on a constant index v[k] (k > 1), checked when the k-th event is selected.
    guarded: tuple[tuple[int, ScalarTest], ...] = ()
    # ``scalar`` and ``guarded`` as postfix programs (None: some conjunct has none, and the
    # compiled loop does not run the query).
    programs: tuple[Program, ...] | None = None
    guarded_programs: tuple[tuple[int, Program], ...] | None = None


@dataclass(frozen=True)
class ComponentProgram:
    index: int
    var: str
    type_name: str
    kleene: bool
    last: bool
    begin_state: int
    iterate_state: int  # -1 for singletons
    begin: EdgeTest
    take: EdgeTest | None
    # Conjuncts whose last identifier is v[v.LEN] (v.LEN, aggregates over v[ ], v[k]): the
    # proceed edge, evaluated on V once the iteration ends.
    proceed: tuple[ScalarTest, ...]
    update: Callable[[tuple[Any, ...], tuple[Any, ...], int], tuple[Any, ...]]
    # V column holding the length of a Kleene component; -1 for singletons.
    length_slot: int
    # ``proceed`` as postfix programs (None: some conjunct has none).
    proceed_programs: tuple[Program, ...] | None = None


@dataclass(frozen=True)
class NegationProgram:
    """``~(Type v)`` (§3.1): no event of ``type_name`` satisfying ``conditions`` may occur after
    positive component ``after`` and before ``before`` (None: leading or trailing, SEMANTICS)."""

    var: str
    type_name: str
    after: int | None
    before: int | None
    vector: tuple[VectorTest, ...]
    conditions: tuple[Callable[[Any], Any], ...]


@dataclass(frozen=True)
class Automaton:
    query: SaseQuery
    states: tuple[State, ...]
    components: tuple[ComponentProgram, ...]
    negations: tuple[NegationProgram, ...]
    returns: tuple[tuple[str, Callable[[Any], Any]], ...]
    selection: Selection
    values: Values
    # Attribute layout of an event row (what predicates, RETURN and negation read).
    attributes: tuple[str, ...]
    partition_attributes: tuple[str, ...]
    # Inclusive window in event-time ticks (SEMANTICS.md); infinite without WITHIN.
    window: float
    consume: bool

    def describe(self) -> str:
        """The states and edges with their optimized formulas, one edge per line."""
        lines = [f"NFA^b ({self.selection.strategy.value}), window {self.window:g} ticks"]
        for state in self.states:
            for e in state.edges:
                typed = self.components[state.component].type_name
                lines.append(f"  {state.name} --{e.action}--> {self.states[e.target].name}"
                             f" [{typed}]: {e.formula.text()}")
        for n in self.negations:
            lines.append(f"  ~({n.type_name} {n.var}) between components {n.after} and {n.before}")
        return "\n".join(lines)
