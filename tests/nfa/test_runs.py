"""Runs and their computation state (SASE+ §5.2.1 Figure 5, §5.2.2 Figure 6)."""

from __future__ import annotations

from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.sharedbuffer.buffer import BufferNode
from tests.nfa.harness import QUERY3, Harness, figure3, match
from tests.nfa.harness import batches as make_batches

QUERY3_2 = QUERY3.replace("a[i].price > avg(a[..i-1].price)", "a[i].price >= max(a[..i-1].price)")


def runs_after(query: str, n: int, merge_runs: bool = True, compiled: bool = True):
    h = Harness.for_query(query)
    op = h.compiled.operator(merge_runs=merge_runs, compiled=compiled)
    for b in make_batches(figure3()[:n], 1):
        op.process(b)
    names = value_names(h.compiled.automaton)
    states = h.compiled.automaton.states
    return [(states[r.state].name, dict(zip(names, r.v, strict=True)),
             [(m.start, initiator(m.node), m.node.event.id) for m in r.members])
            for r in op.partitions["GOOG"].runs]


def test_s2_only_e1_and_e3_initiate_runs():
    h = Harness.for_query(QUERY3)
    op = h.compiled.operator()
    initiated = set()
    for b in make_batches(figure3(), 1):
        op.process(b)
        initiated |= {initiator(m.node) for r in op.partitions["GOOG"].runs for m in r.members}
    # The paper's Dewey numbers count these initiations from the start state: e1 -> 1, e3 -> 2.
    assert initiated == {"e1", "e3"}


def test_s3_run_state_after_e4_is_that_of_figure_5():
    runs = runs_after(QUERY3, 4)
    v_r1 = {"a.LEN": 4, "sum(a.price)": 461.0, "count(a.price)": 4, "a[a.LEN].volume": 999}
    v_r2 = {"a.LEN": 2, "sum(a.price)": 241.0, "count(a.price)": 2, "a[a.LEN].volume": 999}
    # ρR1: v=1.0 (initiated by e1), q=a[i], pE=e4, t=e1.time; ρR2: v=2.0 (by e3), t=e3.time
    # (the symbol is the partition).
    assert runs == [("a[i]", v_r1, [(1, "e1", "e4")]), ("a[i]", v_r2, [(3, "e3", "e4")])]


def test_s6_runs_with_equal_future_values_are_merged_as_in_figure_6():
    h = Harness.for_query(QUERY3_2)
    a = h.compiled.automaton
    names = value_names(a)
    masks = {s.name: {names[i] for i in s.mask} for s in a.states}
    # M_a[i] ∨ M_b and M_b of Figure 6, without the symbol (it is the partition key).
    assert masks["a[i]"] == {"max(a.price)", "a[a.LEN].volume"}
    assert masks["b"] == {"a[a.LEN].volume"}
    # Merging is the Python loop's (the compiled loop evaluates runs separately).
    [(state, values, members)] = runs_after(QUERY3_2, 4, compiled=False)
    assert state == "a[i]"
    assert values["max(a.price)"] == 121 and values["a[a.LEN].volume"] == 999
    # One run, two histories: the paper's ρi (v=1.0, t=e1) and ρj (v=2.0, t=e3).
    assert members == [(1, "e1", "e4"), (3, "e3", "e4")]


def test_s6_merging_does_not_change_the_matches():
    expected = [match([1, 2, 3, 4], 6), match([3, 4], 6)]
    h = Harness.for_query(QUERY3_2)
    assert h.matches(figure3()) == expected
    assert h.matches(figure3(), merge_runs=False) == expected
    assert len(runs_after(QUERY3_2, 4, merge_runs=False)) == 2


def test_merged_members_expire_one_by_one():
    # Window 1 hour = 3600 ticks: at t=3602, the e1-history has expired but the e3-history has
    # not; the merged run keeps going with the e3 history only.
    times = [1, 2, 3, 4, 5, 3602, 3603, 3604]
    h = Harness.for_query(QUERY3_2)
    assert h.matches(figure3(times)) == [match([3, 4], 6)]


def value_names(automaton: Automaton) -> tuple[str, ...]:
    """A name per V column (``sum(a.price)``, ``a[a.LEN].volume``), as Figures 5 and 6 name them."""
    names = []
    for slot in automaton.values.slots:
        c = automaton.components[slot.component]
        v = c.var
        attr = automaton.attributes[slot.attr] if slot.attr >= 0 else ""
        kind = slot.kind.value
        if kind == "first":
            names.append(f"{v}[1].{attr}" if c.kleene else f"{v}.{attr}")
        elif kind == "nth":
            names.append(f"{v}[{slot.k}].{attr}")
        elif kind == "last":
            names.append(f"{v}[{v}.LEN].{attr}")
        elif kind == "len":
            names.append(f"{v}.LEN")
        else:
            names.append(f"{kind}({v}.{attr})")
    return tuple(names)


def initiator(node: BufferNode) -> str:
    """The id of the event that began the run ending at ``node`` (its version's ``id1``)."""
    while node.pred is not None:
        node = node.pred
    return node.event.id
