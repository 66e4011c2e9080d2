"""What K-slack takes in: decoding a message and checking its partition attributes, as tables
of cases (situflow/kslack/intake.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.kslack import SEQ_FIELD, check_partition_key, decode_input, input_seq
from situflow.kslack.intake import inbox_table

ARROW = arrow_events.encode_batch(pa.RecordBatch.from_pylist([{"ts": 1, "car": "a"},
                                                              {"ts": 2, "car": "b"}]))

# (case, value, Arrow headers, events decoded or the error's reason)
DECODE = [
    ("a JSON event", b'{"ts": 3, "car": "a"}', False, [{"ts": 3, "car": "a"}]),
    ("an Arrow batch", ARROW, True, [{"ts": 1, "car": "a"}, {"ts": 2, "car": "b"}]),
    ("a null value", None, False, "empty message"),
    ("a JSON event without its key", b'{"ts": 3}', False, "missing partition attribute 'car'"),
    ("a JSON event with a list as key", b'{"ts": 3, "car": [1]}', False, "car"),
]


@pytest.mark.parametrize(("value", "arrow", "expected"), [c[1:] for c in DECODE],
                         ids=[c[0] for c in DECODE])
def test_decode_input(value: bytes | None, arrow: bool, expected: list[dict] | str) -> None:
    headers = arrow_events.HEADERS if arrow else None
    if isinstance(expected, str):
        with pytest.raises(InputError, match=expected):
            decode_input(value, headers, "ts", 1.0, ["car"])
        return
    decoded = decode_input(value, headers, "ts", 1.0, ["car"])
    assert (decoded.to_pylist() if isinstance(decoded, pa.RecordBatch) else [decoded]) == expected


# (case, key fields, attribute names, problem, error)
KEYS = [
    ("every key field present", ("car",), {"car", "ts"}, None, None),
    ("a missing key field", ("car", "lane"), {"car", "ts"}, None,
     "missing partition attribute 'lane'"),
    ("a key field whose value is no single value", ("car",), {"car"}, "a list", "a list"),
    ("no key fields", (), {"ts"}, None, None),
]


@pytest.mark.parametrize(("fields", "names", "problem", "error"), [c[1:] for c in KEYS],
                         ids=[c[0] for c in KEYS])
def test_check_partition_key(fields: tuple[str, ...], names: set[str], problem: str | None,
                             error: str | None) -> None:
    def check() -> None:
        check_partition_key(fields, names, lambda name: problem)

    if error is None:
        check()
    else:
        with pytest.raises(InputError, match=error):
            check()


def test_inbox_table_keeps_each_events_source_by_seq() -> None:
    table, sources = inbox_table([("m7", {"ts": 4, "car": "a"}), ("m9", {"ts": 2, "car": 1})],
                                 lambda source: int(source[1:]))
    assert table.column(SEQ_FIELD).to_pylist() == [input_seq(7), input_seq(9)]
    assert table.column("ts").to_pylist() == [4, 2]
    assert sources == {input_seq(7): "m7", input_seq(9): "m9"}
