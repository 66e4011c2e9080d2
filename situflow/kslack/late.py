"""Late events: what K-slack writes to ``<stream>.late`` for the rows a push found too late,
and the reason each record gives (how late, against which released time: :func:`.late_by`)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from situflow.kslack.positions import SEQ_FIELD
from situflow.kslack.reorder import late_by


@dataclass(frozen=True)
class LateRows:
    """The rows one push found too late (with their seq), and the released times before and
    after that push."""

    rows: pa.Table
    time_field: str
    before: int | None
    after: int | None
    slack: int

    def as_batch(self) -> tuple[pa.RecordBatch, str]:
        """An Arrow message's late rows as one batch without their seq, and one reason for
        them all: their event times and how late the earliest is."""
        times = self.rows.column(self.time_field).to_pylist()
        batch = self.rows.drop_columns([SEQ_FIELD]).combine_chunks().to_batches()[0]
        earliest = late_by(min(times), self.before, self.after, self.slack)
        return batch, (f"{len(times)} event(s) with event times {min(times)}..{max(times)}: "
                       f"the earliest is {earliest}")

    def per_event(self) -> list[tuple[int, str]]:
        """JSON events' late rows: each one's seq and reason."""
        times = self.rows.column(self.time_field).to_pylist()
        seqs = self.rows.column(SEQ_FIELD).to_pylist()
        return [(seq, f"event time {ts} is {late_by(ts, self.before, self.after, self.slack)}")
                for seq, ts in zip(seqs, times, strict=True)]
