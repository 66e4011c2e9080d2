"""What K-slack writes to ``<stream>.late``: the rows and the reasons, as tables of cases
(situflow/kslack/late.py)."""

from __future__ import annotations

import pyarrow as pa

from situflow.kslack import SEQ_FIELD, ColumnarKSlack, arrow_table, input_seq, json_table
from situflow.kslack.late import LateRows


def late_rows(first: list[int], then: list[int], *, arrow: bool) -> LateRows:
    """The late rows of pushing ``then`` (at offset 1) after ``first`` (offset 0), slack 2."""
    kslack = ColumnarKSlack(2)
    kslack.push(arrow_table(pa.RecordBatch.from_pylist([{"ts": t} for t in first]), 0))
    before = kslack.released
    pushed = (arrow_table(pa.RecordBatch.from_pylist([{"ts": t} for t in then]), 1) if arrow
              else json_table([{"ts": t} for t in then], list(range(1, len(then) + 1))))
    _, late = kslack.push(pushed)
    return LateRows(late, "ts", before, kslack.released, 2)


def test_an_arrow_messages_late_rows_are_one_batch_without_seq() -> None:
    batch, reason = late_rows([1, 10, 20], [3, 2, 25], arrow=True).as_batch()
    assert batch.schema.names == ["ts"] and batch.column(0).to_pylist() == [3, 2]
    assert reason == ("2 event(s) with event times 2..3: the earliest is 8 before the released "
                      "time 10 (slack 2)")


def test_each_json_event_has_its_seq_and_reason() -> None:
    assert late_rows([1, 10, 20], [3, 2, 25], arrow=False).per_event() == [
        (input_seq(1), "event time 3 is 7 before the released time 10 (slack 2)"),
        (input_seq(2), "event time 2 is 8 before the released time 10 (slack 2)"),
    ]


def test_late_against_the_time_the_push_released() -> None:
    """2 was not late before this push (released: 1): the reason names the time it reached."""
    rows = late_rows([1, 10], [3, 2, 20], arrow=False)
    assert rows.rows.column(SEQ_FIELD).to_pylist() == [input_seq(2)]
    assert rows.per_event() == [(input_seq(2), "event time 2 is 8 before the released time 10 "
                                               "(slack 2)")]
