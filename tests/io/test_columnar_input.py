"""``situflow run`` on Parquet and Arrow IPC input (situflow.io.columnar): the same results, the
same rejections and the same messages as the same events in JSON lines, whatever the column
types, the missing values, the row groups and the batches."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow import cli
from situflow.io.columnar import input_format, open_columnar, read_columnar
from tests.profiles import scaled
from tests.test_dirty_input import cars, stocks

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"

#: One query per language over the generated events' columns: a numeric ``x``, a key ``k``,
#: a text ``s`` compared between events, a boolean ``flag`` and a list ``l`` returned.
QUERIES = {
    "q.tps": """FROM S PARTITION BY k
DEFINE A AS x > 0 AT LEAST 1s, B AS x <= 0
PATTERN A meets B
WITHIN 100 seconds
RETURN first(A.k) AS key, avg(A.x) AS ax, count(B.x) AS n
""",
    "q.sase": """PATTERN SEQ(E a, E+ b[], F c)
WHERE skip_till_next_match(a, b[], c) { [k] and b[i].x > b[i-1].x and c.s = a.s }
WITHIN 20 seconds
RETURN a.s AS s, b.LEN AS n, a.flag AS flag, a.l AS l, c.x AS cx
""",
    "q.cogra": """RETURN k, COUNT(*), MAX(S.x)
PATTERN E S+
SEMANTICS skip-till-any-match
WHERE [k] AND S.x < NEXT(S).x
GROUP-BY k
WITHIN 10 seconds SLIDE 5 seconds
""",
}

ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "text": pa.string(), "bool": pa.bool_(),
               "list": pa.list_(pa.int64())}


def values(kind: str) -> st.SearchStrategy[Any]:
    return {
        "int": st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3),
        "float": st.floats(allow_nan=False, allow_infinity=False, width=64) | st.sampled_from(
            [0.5, -1.0, 2.0]),
        "text": st.text(max_size=4) | st.sampled_from(["a", "b", "é", "x y"]),
        "bool": st.booleans(),
        "list": st.lists(st.integers(-5, 5) | st.none(), max_size=3),
    }[kind]


@st.composite
def streams(draw: st.DrawFn) -> tuple[dict[str, str], list[dict[str, Any]], list[set[str]]]:
    """Events with a column type each, missing values (absent or null in JSON, null in the
    columns), times that mostly rise, and per event the attributes JSON writes as null."""
    kinds = {"k": draw(st.sampled_from(["int", "text"])),
             "x": draw(st.sampled_from(["int", "float", "text"])),
             "s": "text", "flag": "bool", "l": "list"}
    n = draw(st.integers(0, 40))
    events, nulls = [], []
    t = 0
    for _ in range(n):
        t += draw(st.sampled_from([0, 1, 1, 2, -1]))
        event: dict[str, Any] = {"ts": draw(st.just(t) | st.none() if n else st.just(t)),
                                 "type": draw(st.sampled_from(["E", "E", "F"]))}
        for name, kind in kinds.items():
            event[name] = draw(st.none() | values(kind))
        events.append(event)
        nulls.append({k for k, v in event.items() if v is None and draw(st.booleans())})
    return kinds, events, nulls


def write_jsonl(path: Path, events: list[dict[str, Any]], nulls: list[set[str]]) -> None:
    """One line per event; a missing value is left out, or written as null where ``nulls``
    says."""
    path.write_text("".join(
        json.dumps({k: v for k, v in e.items() if v is not None or k in null}) + "\n"
        for e, null in zip(events, nulls, strict=True)), encoding="utf-8")


def table_of(kinds: dict[str, str], events: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([("ts", pa.int64()), ("type", pa.string()),
                        *((name, ARROW_TYPES[kind]) for name, kind in kinds.items())])
    return pa.Table.from_pylist(events, schema=schema)


def write_columnar(tmp: Path, table: pa.Table, rows: int) -> list[Path]:
    """The table as Parquet (row groups of ``rows``), an Arrow IPC file and stream (record
    batches of ``rows``)."""
    parquet, arrow, stream = tmp / "e.parquet", tmp / "e.arrow", tmp / "e.arrows"
    pq.write_table(table, parquet, row_group_size=rows)
    with pa.ipc.new_file(arrow, table.schema) as w:
        w.write_table(table, max_chunksize=rows)
    with pa.ipc.new_stream(stream, table.schema) as w:
        w.write_table(table, max_chunksize=rows)
    return [parquet, arrow, stream]


def situflow_run(query: Path, events: Path, *extra: str) -> tuple[int, str, str, str]:
    """Exit code, results, rejected lines and standard error, with the input's name as ``IN``."""
    out, rejected = events.with_suffix(".out"), events.with_suffix(".rejected")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["run", str(query), "--input", str(events), "--output", str(out),
                         "--rejected", str(rejected), "--no-progress", *extra])
    return (code, out.read_text(encoding="utf-8") if out.exists() else "",
            rejected.read_text(encoding="utf-8") if rejected.exists() else "",
            err.getvalue().replace(str(events), "IN"))


# Four runs of the CLI per example: half the profile's examples.
@settings(max_examples=scaled(0.5),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(stream=streams(), query=st.sampled_from(sorted(QUERIES)), rows=st.integers(1, 16),
       block_rows=st.sampled_from([3, 7, 1 << 17]), strict=st.booleans())
def test_parquet_and_arrow_give_byte_for_byte_what_the_same_json_lines_give(
        tmp_path_factory, stream, query, rows, block_rows, strict):
    kinds, events, nulls = stream
    tmp = tmp_path_factory.mktemp("run")
    query_file = tmp / query
    query_file.write_text(QUERIES[query], encoding="utf-8")
    jsonl = tmp / "e.jsonl"
    write_jsonl(jsonl, events, nulls)
    extra = ("--strict",) if strict else ()
    expected = situflow_run(query_file, jsonl, *extra)
    blocks = functools.partial(read_columnar, block_rows=block_rows)
    with mock.patch.object(cli, "read_columnar", blocks):
        for path in write_columnar(tmp, table_of(kinds, events), rows):
            assert situflow_run(query_file, path, *extra) == expected, path.name


@pytest.mark.parametrize("query", sorted(p.name for p in EXAMPLES.iterdir()))
def test_every_example_query_gives_the_same_results_on_every_format(tmp_path, query):
    events = cars(300) if query.endswith(".tps") else stocks(300)
    jsonl = tmp_path / "e.jsonl"
    write_jsonl(jsonl, events, [set()] * len(events))
    expected = situflow_run(EXAMPLES / query, jsonl)
    assert expected[0] == 0 and expected[1]
    for path in write_columnar(tmp_path, pa.Table.from_pylist(events), 97):
        assert situflow_run(EXAMPLES / query, path) == expected, path.name


def test_bad_rows_are_reported_with_their_row_number_and_skipped(tmp_path):
    rows = [{"ts": 0, "car_id": 7, "speed": 80.0}, {"ts": None, "car_id": 7, "speed": 80.0},
            {"ts": 2, "car_id": 7, "speed": None}, {"ts": 1, "car_id": 7, "speed": 90.0},
            {"ts": 3, "car_id": 7, "speed": 60.0}]
    path = tmp_path / "cars.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    code, _, rejected, err = situflow_run(EXAMPLES / "speeding.tps", path)
    assert code == 0
    assert [json.loads(line) for line in rejected.splitlines()] == [
        {"line": 2, "reason": "missing event time 'ts'"},
        {"line": 4, "reason": "event time 1 is earlier than 2; the input must be ordered by time"}]
    assert "skipped IN:2: missing event time 'ts'" in err
    code, _, _, err = situflow_run(EXAMPLES / "speeding.tps", path, "--strict")
    assert code == 1 and err.startswith("situflow: IN:2: missing event time 'ts'")


def test_a_file_without_the_time_column_rejects_every_row(tmp_path):
    path = tmp_path / "cars.arrow"
    with pa.ipc.new_file(path, pa.schema([("car_id", pa.int64())])) as w:
        w.write_table(pa.table({"car_id": [1, 2]}))
    code, out, rejected, _ = situflow_run(EXAMPLES / "speeding.tps", path)
    assert (code, out) == (0, "")
    assert [json.loads(line)["line"] for line in rejected.splitlines()] == [1, 2]


def test_a_file_that_is_not_of_its_format_is_refused_with_exit_1(tmp_path):
    path = tmp_path / "cars.parquet"
    path.write_text('{"ts": 1}\n')
    code, _, _, err = situflow_run(EXAMPLES / "speeding.tps", path)
    assert code == 1 and err.startswith("situflow: IN: not a readable Parquet file")
    code, out, _, _ = situflow_run(EXAMPLES / "speeding.tps", path, "--input-format", "jsonl")
    assert (code, out) == (0, "")


def test_the_format_comes_from_the_suffix_unless_given():
    assert [input_format(p) for p in ("a.parquet", "a.ARROW", "a.arrows", "a.jsonl", "-",
                                      "a.json")] == ["parquet", "arrow", "arrow", "jsonl",
                                                     "jsonl", "jsonl"]
    assert input_format("a.data", "parquet") == "parquet"


def test_a_dash_reads_json_lines_from_standard_input(tmp_path, monkeypatch):
    jsonl = tmp_path / "e.jsonl"
    write_jsonl(jsonl, cars(60), [set()] * 120)
    expected = situflow_run(EXAMPLES / "speeding.tps", jsonl)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(jsonl.read_bytes())))
    out = tmp_path / "stdin.out"
    code = cli.main(["run", str(EXAMPLES / "speeding.tps"), "--input", "-", "--output", str(out),
                     "--no-progress"])
    assert (code, out.read_text(encoding="utf-8")) == expected[:2]


def test_text_columns_hold_one_str_per_distinct_value(tmp_path):
    symbols = ["IBM", "SUN", None] * 1000
    table = pa.table({"ts": list(range(3000)), "symbol": symbols,
                      "type": pa.array(["Stock"] * 3000).dictionary_encode()})
    for path in write_columnar(tmp_path, table, 3000):
        (block,) = read_columnar(open_columnar(path, input_format(path)))
        column = block.batch.columns["symbol"]
        assert column.tolist() == symbols
        assert column[0] is column[3] and column[1] is column[4]
        assert block.batch.types is not None and block.batch.types[0] is block.batch.types[1]


def test_columns_have_the_types_json_lines_give_the_same_values(tmp_path):
    table = pa.table({"ts": pa.array([1, 2], pa.int32()), "small": pa.array([1, 2], pa.int8()),
                      "single": pa.array([0.5, None], pa.float32()),
                      "code": pa.array([3, 3]).dictionary_encode(),
                      "at": pa.array([0, 1_500], pa.timestamp("ms")),
                      "raw": pa.array([b"ok", None])})
    path = tmp_path / "e.parquet"
    pq.write_table(table, path)
    (block,) = read_columnar(open_columnar(path, "parquet"))
    columns = block.batch.columns
    assert block.batch.ts.dtype == "int64" and columns["small"].dtype == "int64"
    assert columns["single"].dtype == "float64" and columns["code"].dtype == "int64"
    assert columns["at"].tolist() == ["1970-01-01T00:00:00", "1970-01-01T00:00:01.500000"]
    assert columns["raw"].tolist() == ["ok", None]


def test_a_large_parquet_file_is_read_in_blocks(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"ts": list(range(10_000))}), path, row_group_size=1_000)
    blocks = list(read_columnar(open_columnar(path, "parquet"), block_rows=2_500))
    assert [len(b.batch) for b in blocks] == [2_500] * 4
    assert [int(b.batch.seq[0]) for b in blocks] == [0, 2_500, 5_000, 7_500]
    assert sum(b.bytes_read for b in blocks) <= path.stat().st_size


@pytest.mark.parametrize("column", [
    pa.array([0, 1_000, 2_000, 2_500, 4_000, 5_000], pa.timestamp("ms", tz="UTC")),
    pa.array([0.0, 1.0, 2.0, 2.5, 4.0, 5.0]),
    pa.array(["1970-01-01T00:00:00Z", "1970-01-01T00:00:01Z", "1970-01-01T00:00:02Z",
              "1970-01-01T00:00:02.500Z", "1970-01-01T00:00:04Z", "1970-01-01T00:00:05Z"]),
], ids=["timestamp", "float", "iso text"])
def test_event_times_of_any_column_type_follow_the_one_event_time_rule(tmp_path, column):
    query = tmp_path / "q.sase"
    query.write_text("PATTERN SEQ(E a, E b) WHERE a.x < b.x WITHIN 2 seconds RETURN b.x AS x")
    times = column.to_pylist()
    as_json = [t.isoformat() if hasattr(t, "isoformat") else t for t in times]
    events = [{"type": "E", "x": i} for i in range(len(times))]
    jsonl = tmp_path / "e.jsonl"
    write_jsonl(jsonl, [{"ts": t, **e} for t, e in zip(as_json, events, strict=True)],
                [set()] * len(events))
    expected = situflow_run(query, jsonl, "--time-unit", "0.5")
    reasons = [json.loads(line)["reason"] for line in expected[2].splitlines()]
    assert expected[1] and reasons == (
        ["event time 'ts' must be a whole number of ticks, found 2.5"]
        if pa.types.is_floating(column.type) else [])
    table = pa.Table.from_pylist(events).append_column("ts", column)
    for path in write_columnar(tmp_path, table, 4):
        assert situflow_run(query, path, "--time-unit", "0.5") == expected, path.name
