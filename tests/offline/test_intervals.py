"""Replay intervals, Algorithm 3.1 (thesis §3.4.2; research AT-03..AT-09, AT-19)."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive.ranges import Condition, Range
from situflow.offline.intervals import Interval, merge_intervals, replay_intervals
from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.rewrite import rewrite
from tests.offline.reference import STRATEGIES, Automaton, Stream, expression, index_hits, matches, spans
from tests.profiles import scaled


def pattern(shape: str, window: int, keys: tuple[str, ...] = ()) -> PatternQuery:
    """``"AB*CD"``: one symbol per letter, ``*`` making the letter before it a KS."""
    symbols: list[Symbol] = []
    for char in shape:
        if char == "*":
            symbols[-1] = Symbol(symbols[-1].name, kleene=True)
        else:
            symbols.append(Symbol(char))
    return PatternQuery(tuple(symbols), window, keys)


def hit(ts: int, seq: int) -> tuple[list[int], list[int]]:
    return [ts], [seq]


# --- AT-03: base case and special cases (Δt⁻ = 1: the thesis' strictly increasing times) ----


@pytest.mark.parametrize("selected, hits, expected", [
    ([1], {1: hit(1000, 50)}, [Interval(901, 1099)]),                      # S' = {B}: base
    ([0], {0: hit(1000, 50)}, [Interval(1000, 1100)]),                     # S' = {A}: (S1)
    ([0, 3], {0: hit(1000, 50), 3: hit(1050, 60)}, [Interval(1000, 1050)]),  # {A, D}: (S2)
    ([3], {3: hit(1000, 50)}, [Interval(900, 1000)]),                      # S' = {D}: (S3)
])
def test_at03_interval_and_special_cases(selected: list[int], hits: dict, expected: list[Interval]) -> None:
    assert replay_intervals(pattern("ABC*D", 100), selected, hits, min_gap=1) == expected


def test_at03_all_basic_symbols_shorten_both_bounds() -> None:
    assert replay_intervals(pattern("ABCDE", 100), [2], {2: hit(1000, 50)}, min_gap=1) == [
        Interval(902, 1098)]


def test_special_case_is_intersected_with_the_base_case() -> None:
    """(A,B,C*,D), S' = {A,B}, b.t - a.t = w: (S1) alone says [a.t, a.t + w]; the base case
    bounds it below by b.t - w + 1 (research §3.3 [OURS])."""
    found = replay_intervals(pattern("ABC*D", 100), [0, 1], {0: hit(1000, 10), 1: hit(1100, 11)},
                             min_gap=1)
    assert found == [Interval(1001, 1100)]


# --- AT-04: the window is inclusive ----------------------------------------------------------


def test_at04_span_equal_to_the_window_is_a_candidate() -> None:
    hits = {0: hit(10, 0), 1: hit(15, 1)}
    assert replay_intervals(pattern("AB", 5), [0, 1], hits) == [Interval(10, 15)]
    assert replay_intervals(pattern("AB", 5), [0, 1], {0: hit(10, 0), 1: hit(16, 1)}) == []


# --- AT-05: (C3) fixed seq distances inside a basic block ------------------------------------


def test_at05_adjacent_symbols_need_adjacent_events() -> None:
    p = pattern("ABC*D", 100)
    assert replay_intervals(p, [0, 1], {0: hit(5, 1), 1: hit(7, 3)}) == []  # x at seq 2 between
    assert replay_intervals(p, [0, 1], {0: hit(5, 1), 1: hit(7, 2)}) == [Interval(5, 105)]  # (S1)


def test_at05_distance_counts_the_unselected_symbols_between() -> None:
    p = pattern("ABCD", 100)
    assert replay_intervals(p, [0, 2], {0: hit(5, 1), 2: hit(7, 3)}) == [Interval(5, 105)]
    assert replay_intervals(p, [0, 2], {0: hit(5, 1), 2: hit(6, 2)}) == []
    assert replay_intervals(p, [0, 2], {0: hit(5, 1), 2: hit(8, 4)}) == []


# --- AT-06: across a KS only order and window count ------------------------------------------


def test_at06_no_seq_constraint_across_a_kleene_symbol() -> None:
    p = pattern("AT*B", 100)
    assert replay_intervals(p, [0, 2], {0: hit(0, 1), 2: hit(90, 50)}) == [Interval(0, 90)]  # (S2)
    assert replay_intervals(p, [0, 2], {0: hit(0, 1), 2: hit(101, 50)}) == []


def test_basic_symbols_between_blocks_need_events_of_their_own() -> None:
    """(A, T*, X, T*, B): a@seq 1, b@seq 2 leaves no event for X."""
    p = pattern("AT*XU*B", 100)
    assert replay_intervals(p, [0, 4], {0: hit(0, 1), 4: hit(1, 2)}) == []
    assert replay_intervals(p, [0, 4], {0: hit(0, 1), 4: hit(1, 3)}) == [Interval(0, 1)]


def test_s2_takes_the_latest_end_and_s3_the_latest_start() -> None:
    p = pattern("AT*B", 10)
    hits = {0: ([0, 3], [0, 3]), 2: ([5, 9, 20], [5, 9, 20])}
    assert replay_intervals(p, [0, 2], hits) == [Interval(0, 9)]
    q = pattern("XT*AT*B", 10)
    # b@5 with a@3: [-5, 5]; b@9 with a@3: [-1, 9]; b@20: none within the window
    assert replay_intervals(q, [2, 4], {2: hits[0], 4: hits[2]}) == [Interval(-5, 9)]


# --- AT-09: merging ---------------------------------------------------------------------------


def test_at09_merge_intervals() -> None:
    assert merge_intervals([Interval(0, 10), Interval(5, 20), Interval(30, 40)]) == [
        Interval(0, 20), Interval(30, 40)]


def test_merge_joins_adjoining_ticks_and_keeps_keys_apart() -> None:
    found = merge_intervals([Interval(11, 12, '["b"]'), Interval(0, 10), Interval(11, 15),
                             Interval(0, 10, '["b"]')])
    assert found == [Interval(0, 15), Interval(0, 12, '["b"]')]


# --- AT-19: duplicate timestamps --------------------------------------------------------------


def test_at19_equal_timestamps_keep_the_match() -> None:
    """a@(90, seq 1), b@(100, seq 2), c@(100, seq 3): Δt⁻ = 0 gives [90, 110]; the thesis'
    [91, 109] would cut a@90 off."""
    p = pattern("ABC", 10)
    assert replay_intervals(p, [1], {1: hit(100, 2)}) == [Interval(90, 110)]
    assert replay_intervals(p, [1], {1: hit(100, 2)}, min_gap=1) == [Interval(91, 109)]


# --- PARTITION BY -----------------------------------------------------------------------------


def test_keyed_hits_use_the_per_key_seq_and_give_per_key_intervals() -> None:
    """Adjacent per key (key_seq) though not in the archive (seq)."""
    table = pa.table({
        "ts": [10, 11, 12, 30], "seq": [0, 2, 3, 9], "key_seq": [0, 1, 0, 4],
        "key": ['["x"]', '["x"]', '["y"]', '["y"]'], "partition": [0, 0, 0, 0],
    })
    a_hits = table.filter(pa.compute.is_in(table["ts"], pa.array([10, 12])))
    b_hits = table.filter(pa.compute.is_in(table["ts"], pa.array([11, 30])))
    p = pattern("AB", 100, keys=("k",))
    assert replay_intervals(p, [0, 1], {0: a_hits, 1: b_hits}) == [Interval(10, 11, '["x"]')]
    unkeyed = pattern("AB", 100)
    assert replay_intervals(unkeyed, [0, 1], {0: a_hits, 1: b_hits}) == []  # seq 0 and 2


def test_bad_requests_are_refused() -> None:
    p = pattern("AB*C", 10, keys=("k",))
    with pytest.raises(ValueError, match="no symbol selected"):
        replay_intervals(p, [], {})
    with pytest.raises(ValueError, match="not a basic symbol"):
        replay_intervals(p, [1], {1: hit(0, 0)})
    with pytest.raises(ValueError, match="no index hits"):
        replay_intervals(p, [0], {})
    with pytest.raises(ValueError, match="carry no key"):
        replay_intervals(p, [0], {0: hit(0, 0)})
    with pytest.raises(ValueError, match="go back in time at seq 7"):
        replay_intervals(pattern("AB", 10), [0], {0: ([5, 9, 8], [3, 6, 7])})
    two_partitions = pa.table({"ts": [1, 2], "seq": [0, 0], "partition": [0, 1], "key": [None, None]})
    with pytest.raises(ValueError, match="several archive partitions"):
        replay_intervals(pattern("AB", 10), [0], {0: two_partitions})


# --- the sweep against every candidate --------------------------------------------------------


def every_candidate(p: PatternQuery, selected: list[int], hits: dict[int, tuple[list[int], list[int]]],
                    min_gap: int) -> list[Interval]:
    """The definition: each combination of hits satisfying (C2) and (C3), its interval."""
    n, w = len(p.symbols), p.window
    bs = lambda start, stop: sum(not s.kleene for s in p.symbols[max(start, 0):stop])  # noqa: E731
    intervals = []
    for combination in itertools.product(*(list(zip(*hits[i], strict=True)) for i in selected)):
        ordered = all(
            (later[1] - earlier[1] == j - i) if not any(s.kleene for s in p.symbols[i + 1:j])
            else later[1] - earlier[1] >= 1 + bs(i + 1, j)
            for (i, earlier), (j, later) in itertools.pairwise(zip(selected, combination, strict=True)))
        c1, ck = combination[0][0], combination[-1][0]
        if not ordered or ck - c1 > w:
            continue
        lo, hi = ck - w + min_gap * bs(selected[-1] + 1, n), c1 + w - min_gap * bs(0, selected[0])
        if selected[0] == 0:
            lo, hi = max(lo, c1), min(hi, c1 + w if selected[-1] < n - 1 else ck)
        if selected[-1] == n - 1:
            lo, hi = max(lo, ck - w), min(hi, ck)
        if lo <= hi:
            intervals.append(Interval(lo, hi))
    return merge_intervals(intervals)


@st.composite
def instances(draw: st.DrawFn) -> tuple[PatternQuery, list[int], dict, int]:
    shape = draw(st.lists(st.booleans(), min_size=1, max_size=6))  # True: a KS
    if all(shape):
        shape[0] = False
    p = PatternQuery(tuple(Symbol(f"S{i}", kleene=k) for i, k in enumerate(shape)), draw(st.integers(0, 12)))
    basic = [i for i, k in enumerate(shape) if not k]
    selected = sorted(draw(st.sets(st.sampled_from(basic), min_size=1)))
    # A stream of 40 events with non-decreasing times; each symbol hits a random subset.
    gaps = draw(st.lists(st.integers(0, 3), min_size=40, max_size=40))
    times = list(itertools.accumulate(gaps))
    hits = {}
    for i in selected:
        seqs = sorted(draw(st.sets(st.integers(0, 39), max_size=12)))
        hits[i] = ([times[s] for s in seqs], seqs)
    return p, selected, hits, draw(st.sampled_from([0, 0, 1]))


@given(instances())
@settings(max_examples=scaled(3))
def test_the_sweep_gives_the_union_of_every_candidates_interval(
        instance: tuple[PatternQuery, list[int], dict, int]) -> None:
    p, selected, hits, min_gap = instance
    assert replay_intervals(p, selected, hits, min_gap=min_gap) == every_candidate(p, selected, hits, min_gap)


# --- the reference matcher (Defs 2.15–2.17) ---------------------------------------------------


def label(name: str, value: str) -> Symbol:
    return Symbol(name, conditions=(Condition("label", (Range("label", value, value),)),))


def trace(labels: str) -> Stream:
    """``"a b a c"``: one event per label at t = 1, 2, ..., seq = position."""
    return Stream([{"t": i + 1, "seq": i + 1, "label": name} for i, name in enumerate(labels.split())])


def test_at01_figure_2_6_every_strategy() -> None:
    """A B* C on a1 b1 a2 c1 b2 c2 (seqs 1..6), w = 10; the corrected list of 9 (research §3.1)."""
    abc = PatternQuery((label("A", "a"), Symbol("B", kleene=True, conditions=label("B", "b").conditions),
                        label("C", "c")), 10)
    stream = trace("a b a c b c")
    a1, b1, a2, c1, b2, c2 = range(1, 7)
    assert matches(abc, "contiguous", 10, stream) == {(a2, c1)}
    assert matches(abc, "next", 10, stream) == {(a2, c1), (a1, b1, c1)}
    assert matches(abc, "any", 10, stream) == {
        (a1, c1), (a1, b1, c1), (a1, c2), (a1, b1, c2), (a1, b2, c2), (a1, b1, b2, c2),
        (a2, c1), (a2, c2), (a2, b2, c2)}
    assert stream.times[c1 - 1] == 4  # the result time of <a2, c1>: its last event's


def test_at02_a_span_of_exactly_w_matches() -> None:
    ab = PatternQuery((Symbol("A", conditions=(Condition("v", (Range("v", 1, 1),)),)),
                       Symbol("B", conditions=(Condition("v", (Range("v", 2, 2),)),))), 5)
    first = Stream([{"t": 10, "seq": 1, "v": 1}, {"t": 15, "seq": 2, "v": 2}])
    second = Stream([{"t": 10, "seq": 1, "v": 1}, {"t": 16, "seq": 2, "v": 2}])
    assert matches(ab, "contiguous", 5, first) == {(1, 2)}
    assert matches(ab, "contiguous", 5, second) == set()


def test_at08_each_interval_is_replayed_alone() -> None:
    """(A,B,C,D) contiguous, w = 5, indexes on B and C: intervals [-1, 6] and [8, 15]; their
    replay finds (1,2,3,4) only; the pruned events run as one stream would add (5,6,8,9)."""
    symbols = tuple(Symbol(name, conditions=(Condition("v", (Range("v", v, v),)),))
                    for name, v in zip("ABCD", (1, 2, 3, 4), strict=True))
    abcd = PatternQuery(symbols, 5)
    values = [1, 2, 3, 4, 1, 2, 9, 3, 4, 9, 2, 3, 9]
    stream = Stream([{"t": t, "seq": t, "v": v} for t, v in enumerate(values, start=1)])
    # Times strictly increase here: Δt⁻ = 1, as in the thesis.
    intervals = replay_intervals(abcd, [1, 2], index_hits(abcd, [1, 2], stream), min_gap=1)
    assert intervals == [Interval(-1, 6), Interval(8, 15)]
    full = matches(abcd, "contiguous", 5, stream)
    pruned = set().union(*(matches(abcd, "contiguous", 5, stream.between(i.lo, i.hi)) for i in intervals))
    assert full == pruned == {(1, 2, 3, 4)}
    kept = [e for i in intervals for e in stream.between(i.lo, i.hi).events]
    concatenated = Stream([{**e, "t": position} for position, e in enumerate(kept)])  # one stream
    assert matches(abcd, "contiguous", 5, concatenated) == {(1, 2, 3, 4), (5, 6, 8, 9)}


@st.composite
def small_workloads(draw: st.DrawFn) -> tuple[PatternQuery, str, Stream]:
    names = "abc"
    shape = draw(st.lists(st.tuples(st.sampled_from(names + "t"), st.booleans()), min_size=1, max_size=4))
    symbols = tuple(Symbol(f"S{i}", star, () if name == "t" else label("x", name).conditions)
                    for i, (name, star) in enumerate(shape))
    times = itertools.accumulate(draw(st.lists(st.integers(0, 2), min_size=1, max_size=14)))
    stream = Stream([{"t": t, "seq": i, "label": draw(st.sampled_from(names))} for i, t in enumerate(times)])
    return PatternQuery(symbols, draw(st.integers(0, 8))), draw(st.sampled_from(STRATEGIES)), stream


@given(small_workloads())
@settings(max_examples=scaled(2))
def test_the_span_bitsets_agree_with_the_enumeration(workload: tuple[PatternQuery, str, Stream]) -> None:
    p, strategy, stream = workload
    assert spans(p, strategy, p.window, stream) == {
        (m[0], m[-1]) for m in matches(p, strategy, p.window, stream)}


# --- AT-07: completeness, as a property -------------------------------------------------------

SIGMAS = {"A1": 0.0, "A2": 0.001, "A3": 0.01, "A4": 0.1}  # §3.5.3; A5 is uniform


def synthetic_stream(seed: int, size: int) -> tuple[list[dict[str, int]], dict[str, np.ndarray]]:
    """§3.5.3's synthetic data with integer times that repeat: A_j ~ N(i/N, σ_j²) in [0, 1)."""
    rng = np.random.default_rng(seed)
    position = np.arange(size) / size
    columns = {name: np.clip(position + rng.normal(0, sigma, size) if sigma else position, 0, 0.999999)
               for name, sigma in SIGMAS.items()}
    columns["A5"] = rng.random(size)
    times = np.cumsum(rng.integers(0, 3, size))
    return [{"t": int(t), "seq": i} for i, t in enumerate(times)], columns


def mask(symbol: Symbol, columns: dict[str, np.ndarray]) -> np.ndarray:
    """``symbol.matches`` over whole columns at once."""
    result = np.ones(len(columns["A5"]), dtype=bool)
    for condition in symbol.conditions:
        values, union = columns[condition.attribute], np.zeros(len(result), dtype=bool)
        for r in condition.ranges:
            union |= ((values > r.low) | ((values == r.low) & r.low_closed)) & (
                (values < r.high) | ((values == r.high) & r.high_closed))
        result &= union
    return result


@st.composite
def workloads(draw: st.DrawFn) -> tuple[PatternQuery, str, Stream]:
    """A synthetic stream and a pattern of §3.5.3's generator: m range BSs over random 0–10 %
    of an attribute's domain, a KS after a random S_x (x in 1..m-1), then recursively after one
    in x+1..m-1. Random ranges rarely match anything, so each range is placed around the value
    of a planted event (S1's at a random position, each next one right after, or a few events
    later across a KS), which makes the planted events a match of the contiguous reading."""
    events, columns = synthetic_stream(draw(st.integers(0, 2**32 - 1)), scaled(100))
    m = draw(st.integers(1, 6))
    after, lowest = [], 1
    while lowest <= m - 1:
        after.append(draw(st.integers(lowest, m - 1)))
        lowest = after[-1] + 1
    planted = [draw(st.integers(0, len(events) - 4 * m))]
    for i in range(1, m):
        planted.append(planted[-1] + 1 + (draw(st.integers(0, 3)) if i in after else 0))
    symbols: list[Symbol] = []
    for i, at in enumerate(planted, start=1):
        attribute = draw(st.sampled_from([*SIGMAS, "A5"]))
        width = draw(st.floats(0, 0.1))
        value = float(columns[attribute][at])
        low = draw(st.floats(max(0.0, value - width), value))
        ranges = (Range(attribute, low, low + width),)
        symbols.append(Symbol(f"S{i}", conditions=(Condition(attribute, ranges),)))
        if i in after:
            symbols.append(Symbol(f"T{i}", kleene=True))
    span = events[planted[-1]]["t"] - events[planted[0]]["t"]
    original = PatternQuery(tuple(symbols), draw(st.integers(max(10, span), max(300, span))))
    masks = {symbol: mask(symbol, columns) for symbol in {*Automaton.of(original).symbols, *symbols}}
    return original, draw(st.sampled_from(STRATEGIES)), Stream(events, masks=masks)


@given(workloads())
@settings(max_examples=scaled(0.15))
def test_at07_pruned_equals_full_for_every_index_subset(workload: tuple[PatternQuery, str, Stream]) -> None:
    """Every subset of the indexable symbols, every strategy (through the rewrite): each full
    match lies in one merged interval, the merged intervals are sorted and disjoint, and
    replaying each alone finds exactly the full replay's matches."""
    original, strategy, stream = workload
    full = spans(original, strategy, original.window, stream)
    first_t, last_t = (np.array([stream.times[s[k]] for s in full], dtype=np.int64) for k in (0, 1))
    rewritten = rewrite(expression(original), original.window, contiguous=strategy == "contiguous")
    basic = [i for i, s in enumerate(rewritten.symbols) if s.indexable]
    hits = index_hits(rewritten, basic, stream)
    for size in range(1, len(basic) + 1):
        for selected in itertools.combinations(basic, size):
            intervals = replay_intervals(rewritten, selected, hits)
            lo, hi = np.array([i.lo for i in intervals], dtype=np.int64), np.array([i.hi for i in intervals])
            assert np.all(lo[1:] > hi[:-1]) and np.all(lo <= hi), "sorted and disjoint"
            assert intervals or not full
            containing = np.searchsorted(lo, first_t, side="right") - 1
            assert np.all((containing >= 0) & (hi[np.maximum(containing, 0)] >= last_t)), "covered"
            pruned = set().union(*(spans(original, strategy, original.window, stream.between(i.lo, i.hi))
                                   for i in intervals))
            assert pruned == full, (selected, intervals[:5])


# --- PARTITION BY: per-key seq, per-key intervals -----------------------------------------------


@given(small_workloads(), st.lists(st.sampled_from(['["x"]', '["y"]']), min_size=14, max_size=14))
@settings(max_examples=scaled(2))
def test_keyed_pruned_equals_full_per_key(workload: tuple[PatternQuery, str, Stream],
                                          keys: list[str]) -> None:
    """Each key's events are a stream of their own (research §4.4): the index rows carry the
    key and the dense per-key ``key_seq``; intervals are per key and replayed on that key's
    events only."""
    unkeyed, strategy, stream = workload
    original = PatternQuery(unkeyed.symbols, unkeyed.window, ("k",))
    events = [{**e, "k": key} for e, key in zip(stream.events, keys, strict=False)]
    of_key = {key: Stream([e for e in events if e["k"] == key]) for key in set(keys)}
    key_seq = {e["seq"]: position for substream in of_key.values()
               for position, e in enumerate(substream.events)}
    rewritten = rewrite(expression(original), original.window, contiguous=strategy == "contiguous",
                        keys=original.keys)
    indexable = [i for i, s in enumerate(rewritten.symbols) if s.indexable]
    hits = {}
    for i in indexable:
        rows = [e for e in events if rewritten.symbols[i].matches(e)]
        columns = {"ts": [e["t"] for e in rows], "seq": [e["seq"] for e in rows],
                   "key_seq": [key_seq[e["seq"]] for e in rows], "key": [e["k"] for e in rows]}
        hits[i] = pa.table({name: pa.array(values, pa.string() if name == "key" else pa.int64())
                            for name, values in columns.items()})
    full = {key: spans(original, strategy, original.window, substream) for key, substream in of_key.items()}
    for size in range(1, len(indexable) + 1):
        for selected in itertools.combinations(indexable, size):
            pruned: dict[str, set[tuple[int, int]]] = {key: set() for key in of_key}
            for interval in replay_intervals(rewritten, selected, hits):
                pruned[interval.key] |= spans(original, strategy, original.window,
                                              of_key[interval.key].between(interval.lo, interval.hi))
            assert pruned == full


@given(instances(), st.lists(st.sampled_from(["a", "b", "c", None]), min_size=12, max_size=12),
       st.sampled_from([0, -5_000, 1_700_000_000_000]))
@settings(max_examples=scaled(2))
def test_all_keys_at_once_equal_each_key_alone(instance: tuple[PatternQuery, list[int], dict, int],
                                               keys: list[str | None], shift: int) -> None:
    """The keys are swept together (each in a lane of its own): the same intervals as one
    sweep per key, whatever the times."""
    unkeyed, selected, hits, min_gap = instance
    keyed = PatternQuery(unkeyed.symbols, unkeyed.window, ("k",))
    key_of = {s: keys[s % len(keys)] for _, seqs in hits.values() for s in seqs}
    with_keys = {i: ([t + shift for t in ts], seqs, [key_of[s] for s in seqs])
                 for i, (ts, seqs) in hits.items()}
    expected = []
    for key in sorted(set(key_of.values()), key=lambda k: (k is not None, k or "")):
        alone = {i: ([t for t, s in zip(ts, seqs, strict=True) if key_of[s] == key],
                     [s for s in seqs if key_of[s] == key]) for i, (ts, seqs, _) in with_keys.items()}
        found = replay_intervals(unkeyed, selected, alone, min_gap=min_gap)
        expected += [Interval(i.lo, i.hi, key) for i in found]
    assert replay_intervals(keyed, selected, with_keys, min_gap=min_gap) == expected
