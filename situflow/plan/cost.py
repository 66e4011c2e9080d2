"""Cost models of Kolchinsky & Schuster (PVLDB 11(11), 2018), formulas exactly as printed.

Inputs (§3.1): ``r_i`` the arrival rate of the type of positive component ``i``,
``sel_i,j`` the selectivity of the conditions between ``i`` and ``j`` (``sel_i,i``: its unary
filters), ``W`` the window; ``W·r_i`` events of type ``T_i`` arrive within a window.
:meth:`CostInputs.build` applies the §4 rewrites used *for plan generation only*:

* SEQ → AND adds ``e_i.ts < e_{i+1}.ts`` for ``i = 1..n-1`` (the ``n - 1`` conditions of
  §4; an AND's ``before`` pairs likewise); each is costed with selectivity 1/2 (two
  independent events are in either order equally often).
  :func:`tests.plan.rewrite.seq_to_and` performs the same rewrite on a
  :class:`~situflow.plan.pattern.Pattern`, with the same selectivities, so both cost alike.
* ``KL(T_i)`` → ``T'_i`` with ``r'_i = 2^(r_i·W) / W`` (§4 "Kleene closure patterns"). The
  exponent is capped at :data:`KLEENE_EXPONENT_CAP` so that costs stay finite floats; above
  the cap Kleene components are still postponed but no longer ranked among themselves.
* Negated events are not costed (§4: the positive part is planned, the check added after).

Cost functions (``O`` an order, ``T`` a tree; the paper does not number its formulas, so they
are cited by name and section):

* ``PM(k)`` and ``Cost_ord`` (§3.1): ``Σ_k W^k · Π_{i≤k} r_pi · Π_{i≤j≤k} sel_pi,pj``
  (``i ≤ j`` includes the unary filters) — :func:`cost_ord`.
* ``Cost_LDJ`` (§3.1, Theorem 1) and ``Cost_BJ`` (§3.2, Theorem 2) — :func:`cost_ldj`,
  :func:`cost_bj`; with ``|R_i| = W·r_i`` they equal ``Cost_ord`` and ``Cost_tree``. The unary
  filter of a relation is applied as a selection when it is joined (the printed expansion is
  ambiguous there; without filters both readings agree).
* ``PM(leaf) = W·r_i``, ``PM(in) = PM(left)·PM(right)·SEL_LR`` and ``Cost_tree = Σ_N PM(N)``
  (§3.2) — :func:`cost_tree`; a leaf holds the events that passed its filters, so
  ``PM(leaf) = W·r_i·sel_i,i``.
* ``Cost_lat_ord(O) = Σ_{T_i ∈ Succ_O(T_n)} W·r_i`` and
  ``Cost_lat_tree(T) = Σ_{N ∈ Anc_T(T_n)} PM(sibling(N))`` (§5.1) — :func:`cost_lat_ord`,
  :func:`cost_lat_tree`. ``T_n`` is the last positive component of the sequence; for an AND
  pattern the paper's output profiler is not built and the last listed component stands in.
  ``Anc_T(T_n)`` is the path from ``T_n``'s leaf up to, excluding, the root.
* ``Cost(Plan) = Cost_trpt(Plan) + α · Cost_lat(Plan)`` (§5.1) — :class:`CostModel`.
* Skip-till-next-match (§5.2): ``m[k] = W · min(r_p1..r_pk) · Π_{i≤j≤k} sel`` and
  ``Cost_next_ord(O) = Σ_k W·m[k]`` — :func:`cost_next_ord`. The extra ``W`` is printed in
  the paper (research K-11 "[sic]"); it is kept, it scales every plan alike. The paper extends
  this "trivially" to trees; :func:`cost_next_tree` uses ``W·m(N)`` per node with ``m(N)``
  over the leaves of ``N`` (our reading of that sentence).

:class:`Terms` decomposes the same costs into per-step (order) and per-node (tree) terms that
depend only on sets of components, which is what makes the dynamic programs exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from situflow.plan.pattern import Pattern
from situflow.plan.plans import Join, Leaf, Node
from situflow.plan.stats import Statistics

KLEENE_EXPONENT_CAP = 128.0
"""Largest ``r_i·W`` used in ``2^(r_i·W)``: products of up to seven such rates stay finite."""

ORDER_SELECTIVITY = 0.5
"""Cost-model selectivity of an ``e_i.ts < e_j.ts`` condition added by the SEQ → AND rewrite."""


@dataclass(frozen=True)
class CostInputs:
    """``r_i``, ``sel_i,j`` and ``W`` for the positive components of one pattern."""

    rates: tuple[float, ...]
    sel: tuple[tuple[float, ...], ...]
    window: float
    last: int

    @property
    def size(self) -> int:
        return len(self.rates)

    @classmethod
    def build(cls, pattern: Pattern, stats: Statistics) -> CostInputs:
        # A zero window still holds the events of one time tick (the rates' unit), and the
        # Kleene rewrite divides by W.
        n, window = pattern.size, pattern.window or 1.0
        rates = []
        for comp in pattern.components:
            rate = stats.rate(comp.type)
            if comp.kleene:
                rate = kleene_rate(rate, window)
            rates.append(rate)
        sel = [[1.0] * n for _ in range(n)]
        for flt in pattern.filters:
            i = pattern.index(flt.var)
            if i >= 0:
                sel[i][i] *= stats.selectivity(flt.name, flt.selectivity)
        for pred in pattern.predicates:
            i, j = pattern.index(pred.left), pattern.index(pred.right)
            if i >= 0 and j >= 0:
                s = stats.selectivity(pred.name, pred.selectivity)
                sel[i][j] *= s
                sel[j][i] *= s
        for i, j in pattern.order_pairs():
            sel[i][j] *= ORDER_SELECTIVITY
            sel[j][i] *= ORDER_SELECTIVITY
        return cls(tuple(rates), tuple(tuple(row) for row in sel), window, n - 1)


def kleene_rate(rate: float, window: float) -> float:
    """``r'_i = 2^(r_i·W) / W`` (§4): the rate of the power-set type ``T'_i``.

    >>> kleene_rate(5.0, 10.0) == 2**50 / 10
    True
    """
    return 2.0 ** min(rate * window, KLEENE_EXPONENT_CAP) / window


def _step_factor(inp: CostInputs, prefix: Sequence[int], new: int) -> float:
    """``W·r_new · sel_new,new · Π_{j ∈ prefix} sel_j,new``: how PM grows when ``new`` joins."""
    factor = inp.window * inp.rates[new] * inp.sel[new][new]
    for j in prefix:
        factor *= inp.sel[j][new]
    return factor


def cost_ord(order: Sequence[int], inp: CostInputs) -> float:
    """``Cost_ord(O) = Σ_{k=1..n} PM(k)`` (§3.1); the four cameras of §1 (research K-2):

    >>> sel = tuple(tuple(1.0 if i == j else 0.1 for j in range(4)) for i in range(4))
    >>> cameras = CostInputs((10.0, 10.0, 10.0, 1.0), sel, window=1.0, last=3)
    >>> round(cost_ord((3, 0, 1, 2), cameras), 6), round(cost_ord((0, 1, 2, 3), cameras), 6)
    (2.101, 21.001)
    """
    total, pm = 0.0, 1.0
    for k, c in enumerate(order):
        pm *= _step_factor(inp, order[:k], c)
        total += pm
    return total


def cost_next_ord(order: Sequence[int], inp: CostInputs) -> float:
    """``Cost_next_ord(O) = Σ_k W·m[k]``, ``m[k] = W·min(r_p1..r_pk)·Π sel`` (§5.2)."""
    total, sel, low = 0.0, 1.0, math.inf
    for k, c in enumerate(order):
        low = min(low, inp.rates[c])
        sel *= inp.sel[c][c]
        for j in order[:k]:
            sel *= inp.sel[j][c]
        total += inp.window * (inp.window * low * sel)
    return total


def cost_lat_ord(order: Sequence[int], inp: CostInputs) -> float:
    """``Cost_lat_ord(O) = Σ_{T_i ∈ Succ_O(T_n)} W·r_i`` (§5.1)."""
    if inp.last not in order:
        return 0.0
    after = order[order.index(inp.last) + 1 :]
    return sum(inp.window * inp.rates[i] for i in after)


def _pm_node(node: Node, inp: CostInputs) -> float:
    if isinstance(node, Leaf):
        return inp.window * inp.rates[node.index] * inp.sel[node.index][node.index]
    sel_lr = 1.0
    for i in node.left.leaves:
        for j in node.right.leaves:
            sel_lr *= inp.sel[i][j]
    return _pm_node(node.left, inp) * _pm_node(node.right, inp) * sel_lr


def cost_tree(tree: Node, inp: CostInputs) -> float:
    """``Cost_tree(T) = Σ_{N ∈ nodes(T)} PM(N)`` (§3.2)."""
    return sum(_pm_node(node, inp) for node in tree.nodes())


def _m_node(node: Node, inp: CostInputs) -> float:
    leaves = node.leaves
    return inp.window * min(inp.rates[i] for i in leaves) * _sel_product(inp, leaves)


def cost_next_tree(tree: Node, inp: CostInputs) -> float:
    """``Σ_N W·m(N)``: the §5.2 model carried over to trees (see the module docstring)."""
    return sum(inp.window * _m_node(node, inp) for node in tree.nodes())


def cost_lat_tree(tree: Node, inp: CostInputs, strategy: str = "any") -> float:
    """``Cost_lat_tree(T) = Σ_{N ∈ Anc_T(T_n)} PM(sibling(N))`` (§5.1)."""
    count = _pm_node if strategy == "any" else _m_node
    total, node = 0.0, tree
    while isinstance(node, Join):
        if inp.last in node.left.leaves:
            total += count(node.right, inp)
            node = node.left
        elif inp.last in node.right.leaves:
            total += count(node.left, inp)
            node = node.right
        else:
            break
    return total


def cost_ldj(order: Sequence[int], sizes: Sequence[float], f: Sequence[Sequence[float]]) -> float:
    """``Cost_LDJ(L) = C_1 + Σ_{k=2..n} C(P_{k-1}, R_ik)``, ``C(S,T) = |S|·|T|·f_S,T`` (§2.5, §3.1)."""
    first = order[0]
    joined = sizes[first] * f[first][first]
    total = joined
    for k in range(1, len(order)):
        new = order[k]
        f_st = f[new][new]
        for j in order[:k]:
            f_st *= f[j][new]
        joined = joined * sizes[new] * f_st
        total += joined
    return total


def cost_bj(tree: Node, sizes: Sequence[float], f: Sequence[Sequence[float]]) -> float:
    """``Cost_BJ(T) = Σ_N C(N)``: ``|R_i|`` at a leaf, ``|L|·|R|·f_L,R`` at a join (§3.2)."""

    def card(node: Node) -> float:
        if isinstance(node, Leaf):
            return sizes[node.index] * f[node.index][node.index]
        f_lr = 1.0
        for i in node.left.leaves:
            for j in node.right.leaves:
                f_lr *= f[i][j]
        return card(node.left) * card(node.right) * f_lr

    return sum(card(node) for node in tree.nodes())


@dataclass(frozen=True)
class CostModel:
    """``Cost = Cost_trpt + α·Cost_lat`` (§5.1) under a selection strategy's model (§5.2).

    ``strategy="any"`` uses ``Cost_ord``/``Cost_tree`` (skip-till-any-match, the paper's
    default); ``"next"`` uses the skip-till-next-match model.
    """

    alpha: float = 0.0
    strategy: Literal["any", "next"] = "any"

    def order(self, order: Sequence[int], inp: CostInputs) -> float:
        trpt = cost_ord(order, inp) if self.strategy == "any" else cost_next_ord(order, inp)
        return trpt + self.alpha * cost_lat_ord(order, inp) if self.alpha else trpt

    def tree(self, tree: Node, inp: CostInputs) -> float:
        trpt = cost_tree(tree, inp) if self.strategy == "any" else cost_next_tree(tree, inp)
        if not self.alpha:
            return trpt
        return trpt + self.alpha * cost_lat_tree(tree, inp, self.strategy)


class Terms:
    """The costs of :class:`CostModel` split into terms over sets (bit masks) of components.

    ``order_step(prefix, c)`` is what appending ``c`` to a prefix adds to the order cost;
    ``leaf(i)`` and ``join(left, right)`` are what a tree node adds. Sums of these terms equal
    :meth:`CostModel.order` and :meth:`CostModel.tree` (tested), so dynamic programming over
    sets finds the exact optimum.
    """

    def __init__(self, inp: CostInputs, model: CostModel) -> None:
        self.inp = inp
        self.model = model
        self._pm: dict[int, float] = {0: 1.0}
        self._last_bit = 1 << inp.last

    def pm(self, mask: int) -> float:
        """``W^k · Π r_i · Π_{i≤j} sel_i,j`` over the members of ``mask``."""
        found = self._pm.get(mask)
        if found is not None:
            return found
        low = (mask & -mask).bit_length() - 1
        rest = mask & (mask - 1)
        value = self.pm(rest) * _step_factor(self.inp, _members(rest), low)
        self._pm[mask] = value
        return value

    def _count(self, mask: int) -> float:
        """Partial matches held for a set: ``PM`` (any) or ``m`` (next)."""
        if self.model.strategy == "any":
            return self.pm(mask)
        inp = self.inp
        members = _members(mask)
        return inp.window * min(inp.rates[i] for i in members) * _sel_product(inp, members)

    def _value(self, mask: int) -> float:
        return self.pm(mask) if self.model.strategy == "any" else self.inp.window * self._count(mask)

    def order_step(self, prefix: int, c: int) -> float:
        value = self._value(prefix | (1 << c))
        if self.model.alpha and prefix & self._last_bit:
            value += self.model.alpha * self.inp.window * self.inp.rates[c]
        return value

    def leaf(self, i: int) -> float:
        return self._value(1 << i)

    def join(self, left: int, right: int) -> float:
        value = self._value(left | right)
        if self.model.alpha:
            if left & self._last_bit:
                value += self.model.alpha * self._count(right)
            elif right & self._last_bit:
                value += self.model.alpha * self._count(left)
        return value


def _sel_product(inp: CostInputs, members: Sequence[int]) -> float:
    sel = 1.0
    for a, i in enumerate(members):
        for j in members[a:]:
            sel *= inp.sel[i][j]
    return sel


def _members(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out
