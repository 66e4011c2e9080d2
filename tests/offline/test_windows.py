"""Offline windowed aggregation from lightweight indexes (thesis §3.3; research file AT-10,
AT-11): slices, the cost rule, the sliding aggregator, and the index method's results against
the COGRA operator replaying the same events, and count windows against a brute force."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive.blocks import AttrStats, Block, table_blocks
from situflow.archive.format import ARCHIVE_SEQ, SegmentMeta, segment_name
from situflow.events import EventBatch
from situflow.offline.windows import (
    ALL,
    NONE,
    SOME,
    CostParameters,
    Measures,
    Partials,
    Slicing,
    WindowedAggregation,
    WindowError,
    aggregate_windows,
    count_windows,
    index_refusal,
    plan_windows,
    sliding_windows,
    use_index,
)
from situflow.trends.kernel import COUNT, MAX, MIN, SUM
from situflow.trends.query import compile
from tests.profiles import scaled

QUERY = ("RETURN COUNT(*), COUNT(E), SUM(E.v), MIN(E.v), MAX(E.v), AVG(E.v) PATTERN Reading E "
         "SEMANTICS skip-till-any-match{where} WITHIN {size} SLIDE {slide}")


# --- a small archive: blocks with the lightweight index's statistics -------------------------------


def blocks_of(table: pa.Table, rows_per_block: int, blocks_per_segment: int = 4) -> list[Block]:
    """The table cut into segments of blocks, with the statistics the sidecars hold."""
    blocks = []
    segment_rows = rows_per_block * blocks_per_segment
    for first in range(0, table.num_rows, segment_rows):
        rows = table.slice(first, segment_rows)
        meta = SegmentMeta("t", 0, first, first + rows.num_rows, first, first + rows.num_rows - 1)
        counts = [min(rows_per_block, rows.num_rows - start)
                  for start in range(0, rows.num_rows, rows_per_block)]
        blocks += table_blocks(rows, meta, segment_name(first), counts, "ts")
    return blocks


def partition_table(events: Sequence[dict[str, Any]]) -> pa.Table:
    table = pa.table({
        "ts": pa.array([e["ts"] for e in events], pa.int64()),
        "type": pa.array([e["type"] for e in events], pa.string()),
        "v": pa.array([e.get("v") for e in events]),
        "g": pa.array([e.get("g") for e in events]),
    })
    return table.append_column(ARCHIVE_SEQ, pa.array(range(len(events)), pa.int64()))


class Archive:
    """Partitions of rows in (ts, seq) order, their blocks, and a reader of whole blocks."""

    def __init__(self, partitions: Sequence[Sequence[dict[str, Any]]], rows_per_block: int):
        self.tables = {p: partition_table(events) for p, events in enumerate(partitions)}
        self.blocks = {p: blocks_of(t, rows_per_block) for p, t in self.tables.items()}
        self.rows_read = 0

    def read(self, partition: int, blocks: Sequence[Block], columns: Sequence[str]) -> pa.Table:
        table = self.tables[partition]
        parts = [table.slice(b.seq_min, b.count).select([*columns, ARCHIVE_SEQ]) for b in blocks]
        self.rows_read += sum(b.count for b in blocks)
        return pa.concat_tables(parts)


def replay(query: str, partitions: Sequence[Sequence[dict[str, Any]]],
           lo: int | None = None, hi: int | None = None) -> list[dict[str, Any]]:
    """The COGRA operator over every event of the stream in time order (``situflow run``)."""
    events = sorted((e for events in partitions for e in events), key=lambda e: e["ts"])
    events = [e for e in events if (lo is None or e["ts"] >= lo) and (hi is None or e["ts"] <= hi)]
    op = compile(query).operator()
    out = []
    if events:
        out += op.process(EventBatch.from_arrow(partition_table(events).drop_columns([ARCHIVE_SEQ])))
    out += op.finish()
    return [r.to_dict() for r in out]


def offline(query: str, archive: Archive, **options: Any) -> list[dict[str, Any]]:
    aggregation = WindowedAggregation(compile(query))
    results = aggregate_windows(aggregation, archive.blocks, archive.read, **options)
    return [r.to_dict() for r in results]


event_lists = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from(["Reading", "Reading", "Other"]),
              st.one_of(st.none(), st.integers(-50, 50))),
    max_size=80,
)


def as_events(steps: list[tuple[int, str, int | None]], start: int = 0) -> list[dict[str, Any]]:
    """Nondecreasing times (gaps 0..6, so duplicates occur) with random types and values."""
    events, t = [], start
    for gap, type_name, value in steps:
        t += gap
        event: dict[str, Any] = {"ts": t, "type": type_name}
        if value is not None:
            event["v"] = value
        events.append(event)
    return events


# --- AT-10: slices --------------------------------------------------------------------------------


def test_at10_slices_of_slide_4_and_3_for_size_10() -> None:
    assert (Slicing(10, 4).slide1, Slicing(10, 4).slide2) == (2, 2)
    assert Slicing(10, 4).initial_lengths() == [2, 2, 2, 2, 2]
    three = Slicing(10, 3)
    assert (three.slide1, three.slide2) == (2, 1)
    assert three.initial_lengths() == [1, 2, 1, 2, 1, 2, 1]
    # After one step (two slices out, two in) the window covers [3, 13).
    first, last = three.window_slices(np.array([1]))
    assert (three.bounds(int(first[0]))[0], three.bounds(int(last[0]))[1]) == (3, 13)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(-100, 300))
def test_every_window_is_a_run_of_whole_slices(size: int, slide: int, t: int) -> None:
    slicing = Slicing(size, slide)
    s = int(slicing.slice_of(np.array([t]))[0])
    start, end = slicing.bounds(s)
    assert start <= t < end
    lo, hi = slicing.windows_of(np.array([s]))
    holding = [k for k in range(t // slide + 1) if k * slide <= t < k * slide + size]
    assert [k for k in range(max(0, int(lo[0])), int(hi[0]) + 1)] == holding
    for k in holding:
        first, last = slicing.window_slices(np.array([k]))
        assert slicing.bounds(int(first[0]))[0] == k * slide
        assert slicing.bounds(int(last[0]))[1] == k * slide + size


# --- AT-11: the cost rule ---------------------------------------------------------------------------


def test_at11_cost_rule_with_the_thesis_parameters() -> None:
    params = CostParameters(rate=100, block_rows=458, fanout=152, height=4)
    assert params.leaves(1) == pytest.approx(0.218, abs=1e-3)
    assert params.split_level(1) == 0
    assert params.index_cost(1) == pytest.approx(103)
    assert params.replay_cost(1) == 100
    assert not use_index(Slicing(1, 1), params)
    assert params.leaves(60) == pytest.approx(13.1, abs=0.05)
    assert params.split_level(60) == 1
    assert params.index_cost(60) == pytest.approx(474)
    assert use_index(Slicing(60, 60), params)
    # L <= 1/D: the logarithm is negative, l_s is clamped at 0.
    assert params.split_level(0.01) == 0
    assert params.index_cost(0.01) == pytest.approx(4)
    assert params.replay_cost(0.01) == pytest.approx(1)


def test_cost_parameters_from_blocks() -> None:
    archive = Archive([[{"ts": t, "type": "Reading", "v": 1} for t in range(0, 160, 2)]], 10)
    params = CostParameters.from_blocks(archive.blocks)  # 8 blocks in 2 segments
    assert (params.rate, params.block_rows, params.fanout) == (80 / 159, 10, 4)
    assert params.height == 1 + math.ceil(math.log(8, 4))


# --- the sliding aggregator -------------------------------------------------------------------------


@given(st.integers(1, 12), st.integers(1, 12),
       st.dictionaries(st.integers(-5, 60), st.tuples(st.integers(0, 3), st.integers(-9, 9)),
                       max_size=30))
def test_sliding_windows_equal_a_brute_force(size: int, slide: int,
                                             slices: dict[int, tuple[int, int]]) -> None:
    slicing = Slicing(size, slide)
    measures = Measures((COUNT, SUM, MIN, MAX), (None, "v", "v", "v"))
    keys = np.array(sorted(slices), dtype=np.int64)
    values = np.array([[c, x * c, x if c else math.inf, x if c else -math.inf]
                       for c, x in (slices[k] for k in keys.tolist())]).reshape(len(keys), 4)
    windows, out = sliding_windows(slicing, Partials(keys, values), measures)
    expected = {}
    for k in range(0, 80):
        first, last = (int(a[0]) for a in slicing.window_slices(np.array([k])))
        inside = [slices[s] for s in range(first, last + 1) if s in slices and slices[s][0]]
        if inside:
            expected[k] = [sum(c for c, _ in inside), sum(c * x for c, x in inside),
                           min(x for _, x in inside), max(x for _, x in inside)]
    assert {int(k): list(v) for k, v in zip(windows, out, strict=True) if k < 80} == expected


# --- the query form ---------------------------------------------------------------------------------


def test_which_queries_the_index_answers() -> None:
    assert index_refusal(compile(QUERY.format(where="", size=10, slide=2))) is None
    grouped = compile("RETURN car, COUNT(*) PATTERN Reading E SEMANTICS contiguous "
                      "WHERE [car] GROUP-BY car WITHIN 10")
    assert index_refusal(grouped) is None
    kleene = compile("RETURN COUNT(*) PATTERN Reading E+ SEMANTICS contiguous WITHIN 10")
    assert "single event" in (index_refusal(kleene) or "")
    sequence = compile("RETURN COUNT(*) PATTERN SEQ(A a, B b) SEMANTICS contiguous WITHIN 10")
    assert "single event" in (index_refusal(sequence) or "")
    with pytest.raises(WindowError, match="replay it instead"):
        WindowedAggregation(kleene)


def test_local_predicates_decide_whole_blocks_by_min_max() -> None:
    aggregation = WindowedAggregation(compile(QUERY.format(where=" WHERE E.v > 3", size=10,
                                                           slide=5)))
    reading = AttrStats("Reading", "Reading", None, 4)

    def block(low: int, high: int, present: int = 4, types: AttrStats = reading) -> Block:
        return Block("s", 0, 4, 0, 3, 0, 3, {"type": types, "v": AttrStats(low, high, 0, present)})

    assert aggregation.classify(block(4, 9)) == ALL
    assert aggregation.classify(block(0, 3)) == NONE
    assert aggregation.classify(block(3, 9)) == SOME
    assert aggregation.classify(block(4, 9, present=3)) == SOME  # a missing value is false
    assert aggregation.classify(block(4, 9, types=AttrStats("Other", "Reading", None, 4))) == SOME
    assert aggregation.classify(block(4, 9, types=AttrStats("Other", "Other", None, 4))) == NONE
    opaque = WindowedAggregation(compile(QUERY.format(where=" WHERE E.v * 2 > 3", size=10,
                                                      slide=5)))
    assert opaque.classify(block(4, 9)) == SOME


# --- AT-10: index-based windows = replay ------------------------------------------------------------


@pytest.mark.parametrize("slide", [1, 3, 4, 7, 10, 25, 100])
@settings(max_examples=scaled(0.5))
@given(data=st.data())
def test_at10_index_equals_replay_for_every_slide(slide: int, data: st.DataObject) -> None:
    # Quarters keep float sums exact in any order of additions (see the module docstring).
    unit = data.draw(st.sampled_from([1, 0.25]), label="unit of v")
    partitions = [[{**e, "v": e["v"] * unit} if "v" in e else e
                   for e in as_events(data.draw(event_lists, label=f"partition {p}"),
                                      data.draw(st.integers(0, 150)))]
                  for p in range(data.draw(st.integers(1, 3)))]
    rows_per_block = data.draw(st.integers(1, 12))
    query = QUERY.format(where=data.draw(st.sampled_from(["", " WHERE E.v > 3",
                                                          " WHERE E.v != 0"])),
                         size=100, slide=slide)
    expected = replay(query, partitions)
    archive = Archive(partitions, rows_per_block)
    for method in ("index", "replay", "auto"):
        assert offline(query, archive, method=method) == expected


@settings(max_examples=scaled(0.5))
@given(st.lists(event_lists, min_size=1, max_size=2), st.integers(1, 9), st.integers(1, 30),
       st.integers(1, 30), st.integers(0, 200), st.integers(0, 200))
def test_a_time_range_equals_replay_of_the_events_in_it(
        steps: list[list[tuple[int, str, int | None]]], rows_per_block: int, size: int,
        slide: int, lo: int, length: int) -> None:
    partitions = [as_events(s) for s in steps]
    query = QUERY.format(where="", size=size, slide=slide)
    archive = Archive(partitions, rows_per_block)
    assert offline(query, archive, method="index", lo=lo, hi=lo + length) == \
        replay(query, partitions, lo, lo + length)


@settings(max_examples=scaled(0.5))
@given(data=st.data())
def test_group_by_equals_replay(data: st.DataObject) -> None:
    """A block whose statistics show one group (min = max, no nulls, or no value at all)
    counts for that group; blocks of several groups are replayed."""
    values = data.draw(st.sampled_from([[1, 2, None], ["a", "b"], [None]]), label="groups")
    run = data.draw(st.integers(1, 12), label="events per group run")
    partitions = [[{**e, "g": values[(i // run) % len(values)]} if values[(i // run) % len(values)]
                   is not None else e
                   for i, e in enumerate(as_events(data.draw(event_lists), data.draw(
                       st.integers(0, 50))))]
                  for _ in range(data.draw(st.integers(1, 2)))]
    query = ("RETURN g, COUNT(*), SUM(E.v), MAX(E.v), AVG(E.v) PATTERN Reading E SEMANTICS "
             f"contiguous GROUP-BY g WITHIN 100 SLIDE {data.draw(st.sampled_from([7, 25, 100]))}")
    archive = Archive(partitions, data.draw(st.integers(1, 9), label="rows per block"))
    expected = replay(query, partitions)
    for method in ("index", "replay"):
        assert offline(query, archive, method=method) == expected


def test_whole_blocks_are_never_read() -> None:
    events = [{"ts": t, "type": "Reading", "v": t % 13} for t in range(1000)]
    archive = Archive([events], 10)
    query = QUERY.format(where="", size=100, slide=50)
    aggregation = WindowedAggregation(compile(query))
    plan = plan_windows(aggregation, archive.blocks)
    assert plan.method == "index"
    assert plan.rows_to_replay == 0 and plan.rows_from_index == 1000
    assert offline(query, archive) == replay(query, [events])
    assert archive.rows_read == 0
    # Blocks that cross slice bounds are replayed, the others answered by their statistics.
    shifted = Archive([[{**e, "ts": e["ts"] + 5} for e in events]], 10)
    assert offline(query, shifted, method="index") == replay(query, [[{**e, "ts": e["ts"] + 5}
                                                                      for e in events]])
    assert 0 < shifted.rows_read < 1000


def test_blocks_of_one_group_come_from_statistics() -> None:
    events = [{"ts": t, "type": "Reading", "v": t % 13, "g": ["a", "b", "c"][t // 20 % 3]}
              for t in range(1000)]
    archive = Archive([events], 10)
    query = ("RETURN g, COUNT(*), SUM(E.v), MIN(E.v) PATTERN Reading E SEMANTICS contiguous "
             "GROUP-BY g WITHIN 100 SLIDE 50")
    plan = plan_windows(WindowedAggregation(compile(query)), archive.blocks)
    assert plan.rows_to_replay == 0 and set(plan.whole.groups) == {("a",), ("b",), ("c",)}
    assert offline(query, archive) == replay(query, [events])
    assert archive.rows_read == 0
    # Blocks of two groups are replayed.
    mixed = Archive([[{**e, "g": ["a", "b"][e["ts"] % 2]} for e in events]], 10)
    plan = plan_windows(WindowedAggregation(compile(query)), mixed.blocks)
    assert plan.rows_to_replay == 1000


def test_short_slides_replay_by_the_cost_rule() -> None:
    events = [{"ts": t, "type": "Reading", "v": 1} for t in range(1000)]
    archive = Archive([events], 100)
    plan = plan_windows(WindowedAggregation(compile(QUERY.format(where="", size=100, slide=1))),
                        archive.blocks)
    assert plan.method == "replay" and plan.index_cost > plan.replay_cost
    assert plan.rows_to_replay == 1000


# --- count windows (§3.3.3) ---------------------------------------------------------------------------


def brute_count_windows(table: pa.Table, size: int, slide: int) -> list[tuple[Any, ...]]:
    ts, values = table.column("ts").to_pylist(), table.column("v").to_pylist()
    out = []
    for first in range(0, len(ts) - size + 1, slide):
        present = [x for x in values[first:first + size] if x is not None]
        out.append((first, max(ts[first:first + size]), size, len(present), float(sum(present)),
                    float(min(present)) if present else None,
                    float(max(present)) if present else None,
                    sum(present) / len(present) if present else None))
    return out


def run_count_windows(archive: Archive, size: int, slide: int) -> list[tuple[Any, ...]]:
    windows = count_windows(archive.blocks[0],
                            lambda blocks: archive.read(0, blocks, ["ts", "v"]), size, slide, "v")
    return [(w.first_seq, w.ts, w.count, w.present, w.sum, w.min, w.max, w.avg)
            for w in windows]


def test_at10_count_windows_of_1000_sliding_by_250() -> None:
    rng = np.random.default_rng(14)
    events = [{"ts": int(t), "type": "Reading", "v": None if rng.random() < 0.1 else int(v)}
              for t, v in zip(np.cumsum(rng.integers(0, 3, 5_321)), rng.integers(-99, 99, 5_321),
                              strict=True)]
    archive = Archive([events], 97)
    assert run_count_windows(archive, 1000, 250) == \
        brute_count_windows(archive.tables[0], 1000, 250)
    assert archive.rows_read < 5_321  # blocks inside one slice come from their statistics


@given(event_lists, st.integers(1, 9), st.integers(1, 20), st.integers(1, 20))
def test_count_windows_equal_a_brute_force(steps: list[tuple[int, str, int | None]],
                                           rows_per_block: int, size: int, slide: int) -> None:
    size, slide = max(size, slide), min(size, slide)
    archive = Archive([as_events(steps)], rows_per_block)
    assert run_count_windows(archive, size, slide) == \
        brute_count_windows(archive.tables[0], size, slide)
    with pytest.raises(WindowError, match="slide"):
        count_windows(archive.blocks[0], lambda blocks: archive.tables[0], 1, 2, "v")


def test_replayed_rows_are_eligible_by_type_and_local_predicates() -> None:
    aggregation = WindowedAggregation(compile(QUERY.format(where=" WHERE E.v > 3", size=10,
                                                           slide=5)))
    rows = pa.table({"ts": [1, 2, 3, 4], "type": ["Reading", "Other", None, "Reading"],
                     "v": [5, 5, 5, None]})
    assert aggregation.rows(rows).events == 1
    assert aggregation.rows(rows, lo=2).events == 0
    numbered = rows.set_column(1, "type", pa.array([1, 2, 3, 4]))  # never equal to a name
    assert aggregation.rows(numbered).events == 0
    assert aggregation.rows(rows.drop_columns(["type"])).events == 0
