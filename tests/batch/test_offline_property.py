"""The issue's acceptance property through the Spark job: random archives (several segments and
blocks, duplicate timestamps), random queries of the three languages, random time ranges and
index choices, replayed on Spark and on the driver: ``situflow offline`` == ``situflow run``
over the range's events. (Every index subset against the core's replay:
tests/offline/test_offline_identity.py.)"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from batch.index_build import build_indexes
from situflow.archive import StreamSettings
from situflow.archive.importer import import_events
from situflow.cli import main
from situflow.errors import QueryError
from situflow.languages import compile_query
from situflow.offline.queries import offline_query
from tests.offline.test_offline_identity import (
    cogra_queries,
    event_lists,
    sase_queries,
    tpstream_queries,
)
from tests.profiles import scaled

INDEX_CHOICES = ["auto", "none", "all", "v", "type", "v,type"]


@pytest.mark.slow  # a few Spark jobs per example
@settings(max_examples=scaled(0.1), suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                           HealthCheck.filter_too_much,
                                                           HealthCheck.too_slow])
@given(st.one_of(sase_queries(), tpstream_queries(), cogra_queries()), event_lists(),
       st.integers(2, 12), st.integers(1, 4), st.integers(0, 20), st.integers(0, 60),
       st.lists(st.sampled_from(INDEX_CHOICES), min_size=1, max_size=2, unique=True))
def test_offline_on_spark_equals_run(spark, text: str, events: list[dict[str, Any]],
                                     segment_rows: int, block_rows: int, lo: int, span: int,
                                     choices: list[str]) -> None:
    try:
        offline = offline_query(compile_query(text), StreamSettings("s"))
    except QueryError:
        assume(False)
        raise
    indexable = {c.attribute for s in (offline.pattern.symbols if offline.pattern else ())
                 if s.indexable for c in s.conditions}
    # An attribute list names indexes the query can use (else the planner refuses it).
    choices = [c for c in choices if c in ("auto", "none", "all") or set(c.split(",")) <= indexable]
    hi = lo + span
    # Bindings name events by id, else by their place in the input: an id keeps the range's
    # events named as in the whole stream.
    events = [{**e, "id": i} for i, e in enumerate(events)]
    in_range = [e for e in events if lo <= e["ts"] <= hi]
    assume(in_range)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        query, source = root / "query.txt", root / "events.jsonl"
        query.write_text(text)
        source.write_text("".join(json.dumps(e) + "\n" for e in events))
        # The stream's key is the query's: the indexes' per-key seq must be the query's.
        keys = offline.pattern.keys if offline.pattern else ()
        import_events(source, str(root), "s", key_fields=keys, segment_rows=segment_rows,
                      block_rows=block_rows)
        build_indexes(spark, str(root), "s.ordered",
                      [a for a in ("v", "type") if any(e.get(a) is not None for e in events)])
        ranged = root / "range.jsonl"
        ranged.write_text("".join(json.dumps(e) + "\n" for e in in_range))
        assert main(["run", str(query), "--input", str(ranged), "--output",
                     str(root / "run.jsonl")]) == 0
        expected = (root / "run.jsonl").read_text().splitlines()
        for choice, driver_rows in itertools.product(choices or ["auto"], ("0", "1000000")):
            assert main(["offline", str(query), "--archive", str(root), "--stream", "s",
                         "--from", str(lo), "--to", str(hi), "--indexes", choice,
                         "--driver-rows", driver_rows,
                         "--output", str(root / "offline.jsonl")]) == 0
            assert (root / "offline.jsonl").read_text().splitlines() == expected, \
                (choice, driver_rows)
