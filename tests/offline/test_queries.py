"""From compiled queries to offline queries: the pattern model each language gets (thesis
§3.4.1, §3.4.4; situflow/offline/queries.py)."""

from __future__ import annotations

from pathlib import Path

from situflow.archive import StreamSettings
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.offline.pattern import Symbol
from situflow.offline.queries import OfflineQuery, offline_query
from situflow.operator import QueryOptions
from situflow.results import Match

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"




def offline(text: str, time_unit: float = 1.0) -> OfflineQuery:
    compiled = compile_query(text, QueryOptions(time_unit=time_unit))
    return offline_query(compiled, StreamSettings("s", time_unit=time_unit))


def shape(o: OfflineQuery) -> list[str]:
    """The symbols as ``name`` (BS) or ``name*`` (KS)."""
    assert o.pattern is not None
    return [s.name + ("*" if s.kleene else "") for s in o.pattern.symbols]


def accepts(symbol: Symbol, **event: object) -> bool:
    return symbol.matches(event)


# --- SASE+ -------------------------------------------------------------------------------------

def test_sase_query_3_has_a_mandatory_first_iteration_then_a_kleene_symbol() -> None:
    """SASE+ Query 3: ``a[1].volume > 1000`` binds the first, mandatory iteration of ``a[]``;
    ``[symbol]`` partitions; skip-till-next-match separates the BSs; WITHIN 1 hour in ticks."""
    o = offline((EXAMPLES / "rising_stocks.sase").read_text())
    assert o.kind == "events" and not o.order_free
    assert shape(o) == ["a", "a[]*", "b"]
    assert o.pattern is not None
    assert o.pattern.window == 3600 and o.pattern.keys == ("symbol",)
    first = o.pattern.symbols[0]
    assert accepts(first, type="Stock", volume=1001) and not accepts(first, type="Stock",
                                                                      volume=1000)
    assert not accepts(first, type="Bond", volume=5000)
    assert o.columns is not None and {"price", "volume", "symbol", "ts", "type"} <= set(o.columns)


def test_strict_and_partition_contiguity_keep_basic_blocks_the_skip_strategies_split_them() -> None:
    base = "PATTERN SEQ(A a, B b, C c) WHERE {}(a, b, c) {{ b.v > 2 }} WITHIN 10 seconds"
    for strategy in ("strict_contiguity", "partition_contiguity"):
        o = offline(base.format(strategy))
        assert o.pattern is not None and o.pattern.basic_blocks() == [[0, 1, 2]]
    for strategy in ("skip_till_next_match", "skip_till_any_match"):
        o = offline(base.format(strategy))
        assert shape(o) == ["a", "true*", "b", "true*", "c"]
        assert o.pattern is not None and o.pattern.basic_blocks() == [[0], [2], [4]]


def test_a_negation_is_a_zero_width_kleene_symbol_and_never_prunes() -> None:
    o = offline("PATTERN SEQ(~(X x), A a, ~(N n), B b, ~(Y y)) WHERE strict_contiguity(a, b) "
                "{ n.v > 1 } WITHIN 10 seconds")
    assert shape(o) == ["~x*", "a", "~n*", "b", "~y*"]
    assert o.pattern is not None and o.pattern.basic_blocks() == [[1], [3]]
    assert o.pattern.symbols[2].conditions == ()


def test_only_first_iteration_conditions_bind_a_kleene_plus() -> None:
    """``a[i]`` applies from the second selected event on (the take edge): the engine matches
    an ``a[]`` whose first event breaks ``a[i].v > 5``, so only ``a[1]`` conditions may prune."""
    q = "PATTERN SEQ(A+ a[], B b) WHERE skip_till_any_match(a[], b) {{ {} }} WITHIN 10 seconds"
    events = EventBatch.from_records([{"ts": 1, "type": "A", "v": 1}, {"ts": 2, "type": "B"}])
    compiled = compile_query(q.format("a[i].v > 5"))
    operator = compiled.operator()
    found = [*operator.process(events), *operator.finish()]
    assert [m.bindings for m in found if isinstance(m, Match)] == [{"a": [0], "b": [1]}]
    loose = offline(q.format("a[i].v > 5"))
    assert loose.pattern is not None and accepts(loose.pattern.symbols[0], type="A", v=1)
    tight = offline(q.format("a[1].v > 5"))
    assert tight.pattern is not None and not accepts(tight.pattern.symbols[0], type="A", v=1)


def test_negation_normal_form_keeps_a_negated_range_and_drops_a_negated_unknown() -> None:
    """AT-14 through a SASE+ WHERE: ``not (a.v > 10)`` is ``v <= 10`` only where ``v`` is
    present, so without that knowledge nothing is kept; ``not (a.v > 10 and a.v > b.v)`` is
    ``v <= 10 or unknown``: no condition either; ``a.v > 3`` prunes."""
    o = offline("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.v > 3 and "
                "not (a.w > 10 and a.w > b.w) } WITHIN 10 seconds")
    assert o.pattern is not None
    assert [c.attribute for c in o.pattern.symbols[0].conditions] == ["type", "v"]


def test_a_query_without_within_is_not_prunable() -> None:
    o = offline("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.v > 3 }")
    assert o.pattern is None and "WITHIN" in o.reason


def test_durations_are_ticks_of_the_stream_time_unit() -> None:
    o = offline("PATTERN SEQ(A a, B b) WITHIN 2 seconds", time_unit=0.001)
    assert o.pattern is not None and o.pattern.window == 2000


# --- TPStream ----------------------------------------------------------------------------------

def test_tpstream_definitions_are_order_free_symbols_with_their_conditions() -> None:
    """Aggressive drivers (thesis Listing 5.1): A, B, C each need one event satisfying their
    condition; the pattern fixes no order, so the intervals use the order-free rule; the window
    is 5 minutes, the key car_id; units on constants are ignored as the compiler does."""
    o = offline((EXAMPLES / "aggressive_drivers.tps").read_text())
    assert o.kind == "situations" and o.order_free
    assert shape(o) == ["A", "true*", "B", "true*", "C"]
    assert o.pattern is not None and o.pattern.window == 300 and o.pattern.keys == ("car_id",)
    a, b, c = (o.pattern.symbols[i] for i in (0, 2, 4))
    assert accepts(a, accel=8.5) and not accepts(a, accel=8)
    assert accepts(b, speed=71) and not accepts(b, speed=70)
    assert accepts(c, accel=-9.5) and not accepts(c, accel=-9)


def test_quiet_marks_the_events_where_no_definition_holds() -> None:
    o = offline((EXAMPLES / "aggressive_drivers.tps").read_text())
    assert o.quiet is not None
    batch = EventBatch.from_records([
        {"ts": 1, "car_id": 1, "accel": 9.0, "speed": 10},    # A holds
        {"ts": 2, "car_id": 1, "accel": 0.0, "speed": 80},    # B holds
        {"ts": 3, "car_id": 1, "accel": -10.0, "speed": 10},  # C holds
        {"ts": 4, "car_id": 1, "accel": 0.0, "speed": 10},    # none holds
        {"ts": 5, "car_id": 1, "speed": 10},                  # accel missing: none holds
    ])
    assert o.quiet(batch).tolist() == [False, False, False, True, True]


def test_duration_constraints_leave_the_symbols_unchanged() -> None:
    """Duration bounds do not prune: a match's situations lie in the window whatever their
    durations, and widening to quiet events gives each its true duration."""
    text = ("FROM S DEFINE A AS x > 1 {}, B AS y > 1 PATTERN A before B WITHIN 20 seconds "
            "RETURN count(A) AS n")
    plain = offline(text.format(""))
    for bound in ("AT LEAST 3s", "AT MOST 3s", "BETWEEN 2s AND 4s"):
        assert offline(text.format(bound)).pattern == plain.pattern


# --- COGRA -------------------------------------------------------------------------------------

def test_cogra_one_symbol_for_any_pattern_type_and_whole_windows() -> None:
    """COGRA q3: one symbol, an event of the pattern's types; a trend lies in ``[start,
    start + size)``, so the pattern window is ``size - 1``; (size, slide) widens intervals to
    whole windows."""
    o = offline((EXAMPLES / "downtrends.cogra").read_text())
    assert o.kind == "windows" and o.order_free and o.window == (600, 10)
    assert shape(o) == ["event"]
    assert o.pattern is not None and o.pattern.window == 599
    assert o.pattern.keys == ("company", "sector")


def test_cogra_reports_a_window_for_any_event_of_a_pattern_type() -> None:
    """Why COGRA prunes by "any pattern type", not by the types every trend needs: a lone
    ``B`` of ``SEQ(A+, B)`` already gives its window a row (with a zero count), and so does an
    event of an optional ``B*``; an event of another type gives none."""
    text = "RETURN COUNT(*) PATTERN {} SEMANTICS skip-till-any-match WITHIN 1 SLIDE 1"
    for pattern, kind, rows in (("SEQ(A+, B)", "B", [0]), ("SEQ(A+, B)", "C", []),
                                ("SEQ(A, B*)", "B", [0])):
        operator = compile_query(text.format(pattern)).operator()
        found = [*operator.process(EventBatch.from_records([{"ts": 0, "type": kind}])),
                 *operator.finish()]
        assert [r.values["COUNT(*)"] for r in found] == rows
        o = offline(text.format(pattern))
        assert o.pattern is not None
        [symbol] = o.pattern.symbols
        assert accepts(symbol, type="A") and accepts(symbol, type="B")
        assert not accepts(symbol, type="C")


def test_quiet_is_only_for_situations() -> None:
    assert offline((EXAMPLES / "rising_stocks.sase").read_text()).quiet is None
