"""The coarse pattern map (thesis §3.4.3, AT-16): a block is excluded for a symbol exactly when
a condition's range misses the block's min/max, and replaying only the kept blocks finds every
match a full replay finds, on random data with trends, duplicate timestamps and random patterns
(KSs inside and at the ends)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive.blocks import AttrStats, Block
from situflow.archive.ranges import Condition, Range
from situflow.offline.cpm import coarse_pattern_map, may_occur
from situflow.offline.pattern import PatternQuery, Symbol
from tests.profiles import scaled

ATTRIBUTES = ("v1", "v2")


def make_blocks(times: np.ndarray, values: dict[str, np.ndarray], rows: int) -> list[Block]:
    """Blocks of ``rows`` events with the lightweight index's statistics (the archive's row groups)."""
    blocks = []
    for group, start in enumerate(range(0, len(times), rows)):
        stop = min(start + rows, len(times))
        stats = {name: AttrStats(float(v[start:stop].min()), float(v[start:stop].max()),
                                 float(v[start:stop].sum()), stop - start) for name, v in values.items()}
        blocks.append(Block("seg", group, stop - start, start, stop - 1, int(times[start]),
                            int(times[stop - 1]), stats))
    return blocks


@st.composite
def streams(draw):
    """Events with trending attributes (so blocks differ) and repeated timestamps."""
    n = draw(st.integers(300, 2500))
    seed = draw(st.integers(0, 2**32 - 1))
    generator = np.random.default_rng(seed)
    times = np.cumsum(generator.integers(0, 3, n))
    trend = np.arange(n) / n
    values = {name: np.clip(trend * draw(st.sampled_from([1.0, -1.0])) % 1.0
                            + generator.normal(0, draw(st.sampled_from([0.01, 0.05, 0.3])), n), 0, 1)
              for name in ATTRIBUTES}
    return times, values, draw(st.sampled_from([16, 50, 128]))


@st.composite
def patterns(draw):
    """2–4 BSs with one or two range conditions, KSs anywhere (ends included), w in [1, 60]."""
    symbols: list[Symbol] = []
    if draw(st.booleans()):
        symbols.append(Symbol("L", kleene=True))
    for i in range(draw(st.integers(1, 4))):
        if i and draw(st.booleans()):
            symbols.append(Symbol(f"K{i}", kleene=True))
        conditions = []
        for attribute in draw(st.sampled_from([("v1",), ("v2",), ("v1", "v2")])):
            low = draw(st.floats(0, 0.95))
            high = low + draw(st.floats(0.02, 0.4))
            conditions.append(Condition(attribute, (Range(attribute, low, high),)))
        symbols.append(Symbol(f"S{i}", conditions=tuple(conditions)))
    if draw(st.booleans()):
        symbols.append(Symbol("R", kleene=True))
    return PatternQuery(tuple(symbols), draw(st.integers(1, 60)))


def matches(pattern: PatternQuery, times: np.ndarray, values: dict[str, np.ndarray],
            lo: int, hi: int) -> set[tuple[int, int, int, int]]:
    """Brute force over the events with seq in [lo, hi): every match's first and last BS event and
    how far its end KSs reach (first event ≥ last.t − w before it, last event ≤ first.t + w)."""
    events = range(lo, hi)
    matched = {i: np.array([pattern.symbols[i].matches({a: values[a][s] for a in ATTRIBUTES})
                            for s in events], dtype=bool)
               for i, symbol in enumerate(pattern.symbols) if not symbol.kleene}
    occurrences = []   # per BB: (first seq, last seq) of the events matching it contiguously
    for block in pattern.basic_blocks():
        width = len(block)
        found = [(lo + s, lo + s + width - 1) for s in range(hi - lo - width + 1)
                 if all(matched[p][s + k] for k, p in enumerate(block))]
        occurrences.append(found)
    result = set()
    for start, end in occurrences[0]:
        reachable, frontier = [(start, end)], end
        for found in occurrences[1:]:
            reachable = [(s, e) for s, e in found
                         if s > frontier and times[e] - times[start] <= pattern.window]
            if not reachable:
                break
            frontier = min(e for _, e in reachable)
        for _, last in reachable:
            if times[last] - times[start] > pattern.window:
                continue
            first_event, last_event = start, last
            if pattern.symbols[0].kleene:
                while first_event > lo and times[last] - times[first_event - 1] <= pattern.window:
                    first_event -= 1
            if pattern.symbols[-1].kleene:
                while last_event < hi - 1 and times[last_event + 1] - times[start] <= pattern.window:
                    last_event += 1
            result.add((start, last, first_event, last_event))
    return result


@settings(max_examples=scaled(1))
@given(streams(), patterns())
def test_at16_cpm_only_replay_equals_full_replay(stream, pattern) -> None:
    times, values, rows = stream
    cpm = coarse_pattern_map(pattern, make_blocks(times, values, rows))
    full = matches(pattern, times, values, 0, len(times))
    pruned: set[tuple[int, int, int, int]] = set()
    for region_lo, region_hi in cpm.regions():
        first = int(np.searchsorted(times, region_lo, "left"))
        after = int(np.searchsorted(times, region_hi, "right"))
        pruned |= matches(pattern, times, values, first, after)
    assert pruned == full


@settings(max_examples=scaled(1))
@given(streams(), patterns())
def test_order_free_cpm_keeps_every_match_span(stream, pattern) -> None:
    """Symbols in any order (TPStream, COGRA): from each event of a BS, the longest match it
    starts (every BS occurring within w after it) lies in one kept region."""
    times, values, rows = stream
    cpm = coarse_pattern_map(pattern, make_blocks(times, values, rows), ordered=False)
    regions = cpm.regions()
    occurs = [np.array([symbol.matches({a: values[a][s] for a in ATTRIBUTES}) for s in range(len(times))])
              for symbol in pattern.symbols if not symbol.kleene]
    for start in np.flatnonzero(np.logical_or.reduce(occurs)):
        stop = int(np.searchsorted(times, times[start] + pattern.window, "right"))
        lasts = [np.flatnonzero(flags[start:stop]) for flags in occurs]
        if all(len(found) for found in lasts):
            end = times[start + max(int(found[-1]) for found in lasts)]
            assert any(lo <= times[start] and end <= hi for lo, hi in regions)


@settings(max_examples=scaled(2))
@given(streams(), patterns())
def test_at16_excluded_iff_a_range_misses_the_block(stream, pattern) -> None:
    times, values, rows = stream
    blocks = make_blocks(times, values, rows)
    for symbol in pattern.symbols:
        for block in blocks:
            disjoint = any(
                all(r.high < block.stats[c.attribute].min or r.low > block.stats[c.attribute].max
                    for r in c.ranges)
                for c in symbol.conditions)
            assert may_occur(symbol, block) is not disjoint


def test_cpm_prunes_where_no_symbol_can_occur() -> None:
    """A rising attribute: only the blocks where the ranges meet within w are kept."""
    times = np.arange(1000)
    values = {"v1": np.arange(1000) / 1000, "v2": np.zeros(1000)}
    a = Symbol("A", conditions=(Condition("v1", (Range("v1", 0.50, 0.51),)),))
    b = Symbol("B", conditions=(Condition("v1", (Range("v1", 0.52, 0.53),)),))
    cpm = coarse_pattern_map(PatternQuery((a, Symbol("T", kleene=True), b), 30),
                             make_blocks(times, values, 100))
    assert cpm.kept == tuple(i == 5 for i in range(10))
    assert cpm.regions() == [(500, 599)]
    assert cpm.runs == [range(5, 6)]
    assert cpm.stats(cpm.runs[0]).rows == 100 and cpm.stats(cpm.runs[0]).span == 100
    # A occurs in 1 of 10 blocks: 1% of all events is 10% of the kept run's
    assert cpm.selectivity(0, 0.01, cpm.runs[0]) == 0.1


def test_missing_values_exclude_and_unknown_attributes_keep() -> None:
    block = Block("seg", 0, 10, 0, 9, 0, 9, {"v1": AttrStats(None, None, None, 0)})
    on_v1 = Symbol("A", conditions=(Condition("v1", (Range("v1", 0, 1),)),))
    on_other = Symbol("B", conditions=(Condition("flag", (Range("flag", True, True),)),))
    assert not may_occur(on_v1, block)
    assert may_occur(on_other, block)


def test_patterns_without_basic_symbols_keep_everything() -> None:
    times = np.arange(100)
    blocks = make_blocks(times, {"v1": times / 100}, 10)
    cpm = coarse_pattern_map(PatternQuery((Symbol("T", kleene=True),), 5), blocks)
    assert all(cpm.kept)
