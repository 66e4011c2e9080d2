"""Arrow IPC events: one stream of record batches per message, checked against the schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from situflow.codecs.arrow_events import (
    HEADERS,
    batch_from_events,
    concat,
    decode_batch,
    encode_batch,
    events_from_batch,
    is_arrow,
    is_json_text,
)
from situflow.codecs.errors import InputError

CARS = pa.schema([("ts", pa.int64()), ("car", pa.string()), ("speed", pa.float64())])
EVENTS = [
    {"ts": 1, "car": "A", "speed": 98.5},
    {"ts": 2, "car": "B", "speed": None},
]


def stream_of(*batches: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return bytes(sink.getvalue())


def test_events_round_trip_through_one_message() -> None:
    message = encode_batch(batch_from_events(EVENTS, CARS))
    assert events_from_batch(decode_batch(message, schema=CARS)) == EVENTS


def test_several_batches_in_one_stream_decode_as_one_batch_in_order() -> None:
    first, second = (batch_from_events([e], CARS) for e in EVENTS)
    assert events_from_batch(decode_batch(stream_of(first, second))) == EVENTS


def test_a_stream_without_rows_decodes_as_an_empty_batch() -> None:
    decoded = decode_batch(encode_batch(batch_from_events([], CARS)), schema=CARS)
    assert (decoded.num_rows, decoded.schema.names) == (0, ["ts", "car", "speed"])


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (pa.array([7, -2], pa.int32()), [7, -2]),  # widened to int64, unit unchanged
        (pa.array([1_500, -1], pa.timestamp("ms")), [1_500, -1]),
        (pa.array([1_500_999, -1], pa.timestamp("us", tz="UTC")), [1_500, -1]),  # rounded down
        (pa.array([2, 0], pa.timestamp("s")), [2_000, 0]),
        (pa.array(["1970-01-01T00:00:02Z", "1970-01-01T00:00:00.0015"]), [2_000, 1]),
    ],
)
def test_the_time_column_becomes_int64_ticks(column: pa.Array, expected: list[int]) -> None:
    """In a stream of milliseconds."""
    batch = pa.RecordBatch.from_arrays([column], names=["ts"])
    decoded = decode_batch(encode_batch(batch), time_unit=0.001)
    assert (decoded.schema.field("ts").type, decoded.column(0).to_pylist()) == (
        pa.int64(),
        expected,
    )


def test_the_time_field_can_have_another_name() -> None:
    batch = pa.RecordBatch.from_pydict({"when": [3], "ts": ["free text"]})
    assert events_from_batch(decode_batch(encode_batch(batch), time_field="when")) == [
        {"when": 3, "ts": "free text"}
    ]


def test_extra_columns_are_kept() -> None:
    batch = batch_from_events([{**EVENTS[0], "lane": 2}])
    assert events_from_batch(decode_batch(encode_batch(batch), schema=CARS)) == [
        {**EVENTS[0], "lane": 2}
    ]


def test_a_column_whose_values_share_no_arrow_type_travels_as_json_text() -> None:
    """Types are the queries' to decide, never the first event's (SEMANTICS.md)."""
    events = [{"ts": 1, "car": 7, "speed": 2**70}, {"ts": 2, "car": "x7", "speed": [1]}]
    batch = batch_from_events(events)
    assert is_json_text(batch.schema.field("car")) and is_json_text(batch.schema.field("speed"))
    assert events_from_batch(decode_batch(encode_batch(batch))) == events


def test_tables_that_disagree_on_a_column_unify_it_as_json_text() -> None:
    first = pa.Table.from_batches([batch_from_events([{"ts": 1, "speed": "abc", "car": 1}])])
    second = pa.Table.from_batches([batch_from_events([{"ts": 2, "speed": 80, "car": 2.5}])])
    table = concat([first, second])
    assert table.schema.field("car").type == pa.float64()  # promoted: no text needed
    assert is_json_text(table.schema.field("speed"))
    assert events_from_batch(table) == [{"ts": 1, "speed": "abc", "car": 1.0},
                                        {"ts": 2, "speed": 80, "car": 2.5}]


def test_every_attribute_of_any_event_is_a_column() -> None:
    """Events of one stream may carry different attributes (a close event has no price): the
    batch has them all, null where an event lacks one."""
    batch = batch_from_events([{"ts": 1, "a": 1}, {"ts": 2, "a": 2, "b": 5}])
    assert events_from_batch(batch) == [{"ts": 1, "a": 1, "b": None}, {"ts": 2, "a": 2, "b": 5}]


BAD = [
    # (message, reason)
    (encode_batch(pa.RecordBatch.from_pydict({"car": ["A"]})), "missing event-time field 'ts'"),
    (encode_batch(pa.RecordBatch.from_pydict({"ts": pa.array([1, None])})),
     "row 1: missing event time 'ts'"),
    (encode_batch(pa.RecordBatch.from_pydict({"ts": [1.5, 2.5]})),
     "row 0: event time 'ts' must be a whole number of ticks, found 1.5 (and 1 more rows)"),
    (encode_batch(pa.RecordBatch.from_pydict({"ts": pa.array([2**64 - 1], pa.uint64())})),
     "row 0: event time 'ts' 18446744073709551615 is outside the 64-bit range"),
    (encode_batch(pa.RecordBatch.from_pydict({"ts": [1], "car": ["A"]})),
     "Arrow batch lacks field 'speed' (double)"),
    (encode_batch(pa.RecordBatch.from_pydict({"ts": [1], "car": [1], "speed": [1.0]})),
     "Arrow field 'car' has type int64, expected string"),
]


@pytest.mark.parametrize(("message", "reason"), BAD)
def test_rejects_a_bad_message_with_its_reason(message: bytes, reason: str) -> None:
    with pytest.raises(InputError) as raised:
        decode_batch(message, schema=CARS)
    assert raised.value.reason == reason


def truncated() -> bytes:
    message = encode_batch(batch_from_events(EVENTS, CARS))
    return message[: len(message) // 2]


@pytest.mark.parametrize("message", [b"", b'{"ts": 1}', truncated()], ids=["empty", "json", "cut"])
def test_bytes_that_are_no_arrow_stream_are_rejected(message: bytes) -> None:
    """The reason goes on with pyarrow's own words, which differ between pyarrow versions."""
    with pytest.raises(InputError) as raised:
        decode_batch(message)
    assert raised.value.reason.startswith("invalid Arrow IPC stream: ")


def test_events_that_do_not_fit_the_schema_are_rejected() -> None:
    with pytest.raises(InputError, match="events do not fit the Arrow schema"):
        batch_from_events([{"ts": "noon", "car": "A", "speed": 1.0}], CARS)


@pytest.mark.parametrize(
    ("headers", "arrow"),
    [
        (HEADERS, True),
        ([("Content-Type", b"application/vnd.apache.arrow.stream; charset=binary")], True),
        ([("content-type", b"application/json")], False),
        ([], False),
        (None, False),
    ],
)
def test_the_content_type_header_selects_the_codec(
    headers: list[tuple[str, bytes]] | None, arrow: bool
) -> None:
    assert is_arrow(headers) is arrow


def test_the_codecs_import_no_kafka_client() -> None:
    """The core boundary of ARCHITECTURE.md: codecs must work with Kafka clients absent."""
    blocker = (
        "import sys\n"
        "for name in ('faust', 'aiokafka', 'kafka', 'confluent_kafka'):\n"
        "    sys.modules[name] = None\n"
        "import situflow.codecs.json_events, situflow.codecs.arrow_events\n"
    )
    subprocess.run([sys.executable, "-c", blocker], check=True, cwd=Path(__file__).parents[2])
