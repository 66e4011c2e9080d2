"""The offline invariant (SEMANTICS.md, "Offline, index-pruned replay"; the issue's acceptance
property): for random event tables (several keys, duplicate timestamps), random queries of each
language, random time ranges and *every* subset of indexable symbols, index-pruned replay ==
full replay == ``situflow run`` over the same events: the same results, in the same order.

The "index" is a brute-force filter of the table by each symbol's necessary conditions, standing
in for ``SecondaryIndex.lookup`` (same columns: ``ts``, ``seq``, ``key``, ``key_seq``).
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from situflow.archive import StreamSettings
from situflow.cli import main as situflow
from situflow.errors import QueryError
from situflow.languages import compile_query
from situflow.offline.intervals import Interval, merge_intervals
from situflow.offline.queries import ARCHIVE_SEQ, OfflineQuery, offline_query
from situflow.offline.replay import candidate_intervals, full_replay, replay, widen
from situflow.offline.source import TableSource, key_text
from situflow.operator import QueryOptions
from tests.profiles import scaled

SEQ = "_situflow_seq"




# --- random events -----------------------------------------------------------------------------

@st.composite
def event_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 36))
    t, events = draw(st.integers(0, 3)), []
    for _ in range(n):
        t += draw(st.sampled_from([0, 0, 1, 1, 2, 3]))  # duplicate timestamps are common
        event: dict[str, Any] = {"ts": t, "type": draw(st.sampled_from("ABC")),
                                 "k": draw(st.integers(0, 1))}
        v = draw(st.one_of(st.integers(0, 5), st.none()))
        if v is not None:
            event["v"] = v
        events.append(event)
    return events


def archive_table(events: list[dict[str, Any]]) -> pa.Table:
    """The events as an archive partition holds them: in stream order, with both seqs."""
    n = len(events)
    return pa.table({
        "ts": pa.array([e["ts"] for e in events], pa.int64()),
        "type": pa.array([e["type"] for e in events], pa.string()),
        "k": pa.array([e["k"] for e in events], pa.int64()),
        "v": pa.array([e.get("v") for e in events], pa.int64()),
        SEQ: pa.array(range(n), pa.int64()),
        ARCHIVE_SEQ: pa.array(range(n), pa.int64()),
    })


# --- random queries ----------------------------------------------------------------------------

def comparison(draw: st.DrawFn, ref: str) -> str:
    return f"{ref} {draw(st.sampled_from(['>', '<=', '>=', '<', '=', '!=']))} {draw(st.integers(0, 5))}"


@st.composite
def sase_queries(draw: st.DrawFn) -> str:
    positives = draw(st.integers(1, 3))
    components, listed, where = [], [], []
    for i in range(positives):
        kind, var = draw(st.sampled_from("ABC")), f"x{i}"
        if draw(st.integers(0, 3)) == 0:
            components.append(f"{kind}+ {var}[]")
            listed.append(f"{var}[]")
            if draw(st.integers(0, 2)) == 0:
                where.append(comparison(draw, f"{var}[1].v"))
        else:
            components.append(f"{kind} {var}")
            listed.append(var)
            if draw(st.integers(0, 2)) == 0:
                where.append(comparison(draw, f"{var}.v"))
    if draw(st.integers(0, 2)) == 0:
        spot = draw(st.integers(0, len(components)))
        components.insert(spot, f"~({draw(st.sampled_from('ABC'))} n)")
        if draw(st.booleans()):
            where.append(comparison(draw, "n.v"))
    if draw(st.booleans()):
        where.append("[k]")
    strategy = draw(st.sampled_from(["strict_contiguity", "partition_contiguity",
                                     "skip_till_next_match", "skip_till_any_match"]))
    body = f" {{ {' and '.join(where)} }}" if where else ""
    consume = " CONSUME" if draw(st.integers(0, 4)) == 0 else ""
    return (f"PATTERN SEQ({', '.join(components)}) WHERE {strategy}({', '.join(listed)}){body} "
            f"WITHIN {draw(st.integers(1, 10))} seconds{consume}")


@st.composite
def tpstream_queries(draw: st.DrawFn) -> str:
    names = ["A", "B", "C"][:draw(st.sampled_from([2, 2, 3]))]
    durations = ["", "", " AT LEAST 1s", " AT MOST 2s", " BETWEEN 1s AND 3s"]
    definitions = [f"{n} AS {comparison(draw, 'v')}{draw(st.sampled_from(durations))}"
                   for n in names]
    relations = ["before", "meets", "overlaps", "during", "contains", "starts", "finishes",
                 "equals", "after"]
    alternatives = st.lists(st.sampled_from(relations), min_size=1, max_size=5, unique=True)
    constraints = [f"{a} {';'.join(draw(alternatives))} {b}" for a, b in itertools.pairwise(names)]
    partition = " PARTITION BY k" if draw(st.booleans()) else ""
    return (f"FROM S{partition} DEFINE {', '.join(definitions)} PATTERN "
            f"{' AND '.join(constraints)} WITHIN {draw(st.integers(2, 15))} seconds "
            f"RETURN count({names[0]}) AS n, max({names[-1]}.v) AS top")


@st.composite
def cogra_queries(draw: st.DrawFn) -> str:
    pattern = draw(st.sampled_from(["A+", "SEQ(A+, B)", "SEQ(A, B+)", "SEQ(A+, B?)", "B*"]))
    semantics = draw(st.sampled_from(["skip-till-any-match", "skip-till-next-match",
                                      "contiguous"]))
    where = [comparison(draw, "A.v")] if draw(st.booleans()) and "A" in pattern else []
    grouped = draw(st.booleans())
    if grouped:
        where.insert(0, "[k]")
    size = draw(st.integers(1, 8))
    slide = draw(st.integers(1, size + 2))
    return (f"RETURN {'k, ' if grouped else ''}COUNT(*) PATTERN {pattern} SEMANTICS {semantics}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + (" GROUP-BY k" if grouped else "") + f" WITHIN {size} SLIDE {slide}")


# --- the brute-force index ---------------------------------------------------------------------

def hits(offline: OfflineQuery, table: pa.Table, position: int) -> pa.Table:
    """What a secondary index lookup returns for one symbol: the rows that satisfy its
    conditions, with the per-key dense ``key_seq``."""
    assert offline.pattern is not None
    symbol, keys = offline.pattern.symbols[position], offline.pattern.keys
    rows = table.to_pylist()
    counters: dict[str, int] = {}
    out: dict[str, list[Any]] = {"ts": [], "seq": [], "key": [], "key_seq": []}
    for row in rows:
        key = key_text([row[k] for k in keys]) if keys else None
        key_seq = counters.get(str(key), 0)
        counters[str(key)] = key_seq + 1
        if symbol.matches(row):
            out["ts"].append(row["ts"])
            out["seq"].append(row[ARCHIVE_SEQ])
            out["key"].append(key)
            out["key_seq"].append(key_seq)
    return pa.table({"ts": pa.array(out["ts"], pa.int64()), "seq": pa.array(out["seq"], pa.int64()),
                     "key": pa.array(out["key"], pa.string()),
                     "key_seq": pa.array(out["key_seq"], pa.int64())})


def situflow_run(text: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results of ``situflow run`` on the events as a JSON-lines file."""
    with tempfile.TemporaryDirectory() as tmp:
        query, source, output = Path(tmp, "q.txt"), Path(tmp, "e.jsonl"), Path(tmp, "out.jsonl")
        query.write_text(text)
        source.write_text("".join(json.dumps(e) + "\n" for e in events))
        assert situflow(["run", str(query), "--input", str(source), "--output", str(output),
                         "--name", "query", "--no-progress"]) == 0
        return [json.loads(line) for line in output.read_text().splitlines()]


def check_identity(text: str, events: list[dict[str, Any]], lo: int, span: int) -> None:
    """Over all events, the full replay is ``situflow run``; over the time range [lo, lo +
    span], the full replay of the range's events equals the replay of the range as one
    interval and the pruned replay with every subset of indexes (hits from the whole table,
    intervals clipped to the range, widened against the whole table but not beyond the
    range)."""
    try:
        compiled = compile_query(text, QueryOptions(name="query"))
    except QueryError:
        assume(False)
        raise
    offline = offline_query(compiled, StreamSettings("s"))
    table = archive_table(events)
    assert [r.to_dict() for r in full_replay(offline, table)] == situflow_run(text, events)

    hi = lo + span
    times = table.column("ts").to_pylist()
    in_range = table.take(pa.array([i for i, t in enumerate(times) if lo <= t <= hi], pa.int64()))
    full = [r.to_dict() for r in full_replay(offline, in_range)]
    assert [r.to_dict() for r in replay(offline, table, [Interval(lo, hi)])] == full
    if offline.pattern is None:
        return
    indexable = [i for i, s in enumerate(offline.pattern.symbols) if s.indexable]
    source = TableSource({0: table}, key_fields=offline.pattern.keys)
    found = {i: hits(offline, table, i) for i in indexable}
    for size in range(1, len(indexable) + 1):
        for selected in itertools.combinations(indexable, size):
            cores = [Interval(max(c.lo, lo), min(c.hi, hi), c.key)
                     for c in candidate_intervals(offline, selected, found)
                     if c.lo <= hi and lo <= c.hi]
            pruned = replay(offline, table, widen(offline, cores, source, 0, lo=lo, hi=hi))
            assert [r.to_dict() for r in pruned] == full, (selected, cores)
    # As the planner calls it: a source that holds only the range's events.
    ranged = TableSource({0: in_range}, key_fields=offline.pattern.keys)
    if indexable:
        cores = [Interval(max(c.lo, lo), min(c.hi, hi), c.key)
                 for c in candidate_intervals(offline, indexable, found)
                 if c.lo <= hi and lo <= c.hi]
        pruned = replay(offline, in_range, widen(offline, cores, ranged, 0))
        assert [r.to_dict() for r in pruned] == full, cores
        # Cores of every key (a coarse pattern map's regions) on a keyed query.
        unkeyed = merge_intervals(Interval(c.lo, c.hi) for c in cores)
        pruned = replay(offline, in_range, widen(offline, unkeyed, ranged, 0))
        assert [r.to_dict() for r in pruned] == full, unkeyed


SLOW = settings(max_examples=scaled(1), suppress_health_check=[HealthCheck.filter_too_much,
                                                                HealthCheck.too_slow])


@SLOW
@given(sase_queries(), event_lists(), st.integers(0, 20), st.integers(0, 60))
def test_sase_pruned_equals_full_equals_run(text: str, events: list[dict[str, Any]],
                                            lo: int, span: int) -> None:
    check_identity(text, events, lo, span)


@SLOW
@given(tpstream_queries(), event_lists(), st.integers(0, 20), st.integers(0, 60))
def test_tpstream_pruned_equals_full_equals_run(text: str, events: list[dict[str, Any]],
                                                lo: int, span: int) -> None:
    check_identity(text, events, lo, span)


@SLOW
@given(cogra_queries(), event_lists(), st.integers(0, 20), st.integers(0, 60))
def test_cogra_pruned_equals_full_equals_run(text: str, events: list[dict[str, Any]],
                                             lo: int, span: int) -> None:
    check_identity(text, events, lo, span)
