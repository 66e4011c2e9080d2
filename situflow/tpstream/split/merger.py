"""MergeSituations (thesis §5.6.3, Alg. 5.5) behind a K-slack on batch sequence numbers (§5.6.5):
situation batches derived in parallel in, the sequential deriver's situation records out (the
design: :mod:`situflow.tpstream.split`).

Derivers send :class:`situflow.tpstream.split.batches.SituationBatch` values as unsorted runs;
:meth:`BatchMerger.push` takes them in any order and merges batch ``s`` once batches ``0 .. s-1``
are merged. The "K-slack on sequence numbers" waits for exactly the next number
(sequence numbers have no gaps, so nothing later can be merged first). It buffers at most
``max_pending`` batches: a batch that would have to wait beyond that raises
:class:`situflow.errors.SequenceError` naming the missing batch, and is not taken (the caller
still holds it and may offer it again); nothing is dropped. ``len(pending)`` and
``waiting_for`` are gauges for metrics. A batch whose number was merged or is waiting already is
a redelivery of the same derivation and is skipped (counted in ``duplicates``); a batch that
does not fit the query is an :class:`InputError` and is not taken either.

Merging batch ``s`` follows Alg. 5.5 for each key of the batch and each definition, where
*tail* is the situation ongoing after batch ``s-1`` (the merger's state) and *head* the run at
the key's first event in batch ``s``:

i.   no situation in the previous tail: the batch's own records stand as derived;
ii.  a tail but no head run: the situation ends at the key's first event in the batch;
iii. both: the situation goes on in the batch; it ends where its head run ends, or, if the run
     lasts to the batch's end, it covers the whole batch and is the new tail.

Cases ii and iii are carried out by continuing Alg. 5.1 from the tail over the head's events
(the sequential deriver's own code), which fixes the end, merges the aggregates exactly (float
sums in event order), decides the duration constraint on the whole situation, finds where an
``AT LEAST`` situation becomes visible, and gives the ``started``, ``running`` and ``finished``
records there. After the last head run of a key has ended, derivation on a fresh state and the
sequential one agree, so the batch's records stand from there on. Two things the batch cannot
know are decided here, from the records as they are emitted: when each definition was last
visible, and so whether a ``running`` record's step is feasible (``running`` records exist only
at feasible steps); and the state after the batch, which is the batch's tail except where a
head run covered the whole batch.

The output is exactly the record stream :class:`SituationDeriver` produces over the same events
(``tests/tpstream/test_batch_merger.py``): same records, order, values and positions, so
:class:`SituationMatcher` and result ids work unchanged. The work per batch is its records plus
the heads of keys whose situation crosses into it; a situation that lasts through whole batches
makes the merger re-derive those batches' events of its key.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from situflow.errors import InputError, SequenceError
from situflow.results import Match
from situflow.snapshot import unwrap, wrap
from situflow.tpstream.lifecycle import STATE_VERSION, EventDriven
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.batches import TAIL_FIELDS, SituationBatch, head_rows
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.records import RUNNING, SituationRecord

#: Batches a merger buffers while it waits for a missing one.
MAX_PENDING = 1024
MERGER, BATCH_MATCHER = "tpstream-batch-merger", "tpstream-batch-matcher"


class BatchMerger(EventDriven):
    """Merges the situation batches of one query, in sequence, into situation records."""

    def __init__(self, query: TPStreamQuery, max_pending: int = MAX_PENDING):
        if max_pending < 0:
            raise ValueError("max_pending must not be negative")
        self.query = query
        self.max_pending = max_pending
        # The sequential derivation state of every key, after the batches merged so far.
        self.situations = SituationDeriver(query)
        self.definitions = {d.name: i for i, d in enumerate(query.definitions)}
        self.window = float(query.window)
        self.next_seq = 0
        self.last_event: int | None = None
        self.pending: dict[int, SituationBatch] = {}
        self.duplicates = 0

    def push(self, batch: SituationBatch) -> list[SituationRecord]:
        """Take one batch; returns the records of every batch this completes, in stream order."""
        if batch.query_id != self.query.query_id:
            raise InputError(f"situation batch {batch.seq} was derived for another query "
                             f"({batch.query_id}, not {self.query.query_id})")
        if batch.seq < self.next_seq or batch.seq in self.pending:
            self.duplicates += 1
            return []
        self._check_shape(batch)
        if batch.seq != self.next_seq and len(self.pending) >= self.max_pending:
            raise SequenceError(
                f"situation batch {self.next_seq} is missing while {len(self.pending)} later "
                f"batches (up to {max(self.pending)}) wait; batch {batch.seq} cannot be buffered. "
                "Check that the deriver of that batch runs, or raise max_pending")
        self.pending[batch.seq] = batch
        return self._drain()

    def start_at(self, seq: int) -> list[SituationRecord]:
        """Merge from batch ``seq`` on instead of from batch 0, for a query that begins while
        the stream runs (its batches before ``seq`` are never derived); only before any batch
        is merged. Pending batches before ``seq`` are dropped (as duplicates); returns the
        records of the pending batches from ``seq`` on that this completes."""
        if self.next_seq or self.last_event is not None:
            raise ValueError(f"the merger has merged batches already; it cannot start at {seq}")
        for early in [s for s in self.pending if s < seq]:
            del self.pending[early]
            self.duplicates += 1
        self.next_seq = seq
        return self._drain()

    def _drain(self) -> list[SituationRecord]:
        """Merge the pending batches that come next."""
        out: list[SituationRecord] = []
        while self.next_seq in self.pending:
            try:
                self._check_order(self.pending[self.next_seq])
            except SequenceError:
                if out:  # hand out what was merged; the next push raises again
                    break
                raise
            out += self._merge(self.pending.pop(self.next_seq))
            self.next_seq += 1
        return out

    @property
    def waiting_for(self) -> int:
        """The sequence number of the next batch to merge."""
        return self.next_seq

    def stats(self) -> dict[str, int]:
        return {"open_situations": self.situations.deriver.open_situations,
                "pending_batches": len(self.pending), "duplicate_batches": self.duplicates}

    def _merge(self, batch: SituationBatch) -> list[SituationRecord]:
        """Alg. 5.5 for batch ``s`` after batch ``s-1`` (see the module doc)."""
        if batch.span is not None:
            self.last_event = batch.span[1]
        head = batch.head
        if not len(head):  # an empty batch; any other has its keys' first events in its head
            return []
        deriver = self.situations.deriver
        codes = deriver.slots(head)
        # Cases ii and iii: the runs of definitions whose situation was ongoing before the batch.
        ongoing = deriver.open_[: len(deriver.key_list)].copy()
        in_head, whole = head_rows(codes, batch.conditions, ongoing)
        rows = np.flatnonzero(in_head)
        merged = self.situations.derive(head.take(rows), codes[rows], batch.conditions[:, rows]) \
            if len(rows) else []
        own = self._feasible_steps(batch.records, set(head.seq[rows].tolist()))
        self._take_tail(batch, np.setdiff1d(np.unique(codes), whole))
        return list(heapq.merge(merged, own, key=lambda r: r.seq))

    def _feasible_steps(self, records: list[SituationRecord],
                        merged: set[int]) -> list[SituationRecord]:
        """The batch's records outside the merged heads, with ``running`` records only at
        feasible steps; keeps when each definition was last visible up to date."""
        deriver = self.situations.deriver
        last_visible = deriver.last_visible
        out: list[SituationRecord] = []
        m, i = len(records), 0
        while i < m:
            seq, j = records[i].seq, i
            while j < m and records[j].seq == seq:
                j += 1
            if seq not in merged:
                step = records[i:j]
                slot = deriver.slot(step[0].key)
                changed = [r for r in step if r.kind != RUNNING]
                for r in changed:  # started or finished: visible from its start on
                    last_visible[slot, self.definitions[r.situation]] = r.ts
                # As the kernel decides feasibility: in float64, with the state after the step.
                if len(changed) < len(step) and \
                        (last_visible[slot].astype(np.float64) < float(step[0].at) - self.window).any():
                    step = changed
                out += step
            i = j
        return out

    def _take_tail(self, batch: SituationBatch, slots: np.ndarray) -> None:
        """The state after the batch of the keys in ``slots`` (all but those whose head run
        covered the whole batch, whose merged state is already right): the batch's tail."""
        deriver = self.situations.deriver
        deriver.open_[slots] = False
        deriver.visible[slots] = False
        tail = batch.tail
        keep = np.isin([deriver.slot(key) for key in tail["keys"]], slots).tolist()
        deriver.set_rows({name: [row for row, k in zip(tail[name], keep, strict=True) if k]
                          for name in ("keys", *TAIL_FIELDS)}, TAIL_FIELDS)

    def _check_shape(self, batch: SituationBatch) -> None:
        """Refuse a batch this query's derivation cannot have produced (before it waits)."""
        deriver = self.situations.deriver
        tail = batch.tail
        widths = {name: getattr(deriver, name).shape[1] for name in TAIL_FIELDS}
        try:
            tail_ok = all(len(tail[name]) == len(tail["keys"]) and
                          all(len(row) == width for row in tail[name])
                          for name, width in widths.items())
        except (KeyError, TypeError):
            tail_ok = False
        head = batch.head
        if not tail_ok or batch.conditions.shape[0] != deriver.ndef or \
                any(r.situation not in self.definitions for r in batch.records) or \
                (len(head) and any(a not in head.columns for a in self.query.partition_by)):
            raise InputError(f"situation batch {batch.seq} does not fit query "
                             f"{self.query.name!r}: its conditions, tail, situation names or "
                             "partition attributes are not the query's")

    def _check_order(self, batch: SituationBatch) -> None:
        """Refuse the next batch to merge if its events do not follow the last one's."""
        if batch.span is not None and self.last_event is not None and \
                batch.span[0] <= self.last_event:
            raise SequenceError(f"situation batch {batch.seq} starts at event {batch.span[0]}, "
                                f"not after event {self.last_event}, the last one merged; "
                                "batches must be numbered in the order of their events")

    def finish(self) -> list[SituationRecord]:
        """End of input: situations still open are never emitted (SEMANTICS.md), but a batch
        still waiting means one never came (or came out of order)."""
        if self.next_seq in self.pending:
            self._check_order(self.pending[self.next_seq])
        if self.pending:
            raise SequenceError(f"the input ended while situation batch {self.next_seq} is "
                                f"missing and {len(self.pending)} later batches wait")
        return []

    def snapshot(self) -> dict[str, Any]:
        return wrap(MERGER, STATE_VERSION, self.query.query_id, {
            "situations": self.situations.snapshot(), "next_seq": self.next_seq,
            "last_event": self.last_event, "duplicates": self.duplicates,
            "pending": [self.pending[s].to_dict() for s in sorted(self.pending)]})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any],
                max_pending: int = MAX_PENDING) -> BatchMerger:
        state = unwrap(MERGER, STATE_VERSION, query.query_id, snapshot)
        op = cls(query, max_pending)
        op.situations = SituationDeriver.restore(query, state["situations"])
        op.next_seq = state["next_seq"]
        op.last_event = state["last_event"]
        op.duplicates = state["duplicates"]
        op.pending = {b.seq: b for b in map(SituationBatch.from_dict, state["pending"])}
        return op


class BatchMatcher(EventDriven):
    """The matching half of unpartitioned TPStream: situation batches in any order, merged in
    sequence into the sequential deriver's records (:class:`BatchMerger`), matched by a
    :class:`SituationMatcher` ("one matcher", thesis §5.6.5). ``started`` once the batch its
    query begins at has come (before, batches wait in the merger); ``registered_at``: the
    registration its batches were derived under (None until the first batch)."""

    def __init__(self, query: TPStreamQuery, max_pending: int = MAX_PENDING):
        self.query = query
        self.merger = BatchMerger(query, max_pending)
        self.matcher = SituationMatcher(query)
        self.started = False
        self.registered_at: int | None = None

    def process(self, batch: SituationBatch, starts: bool) -> list[Match]:
        """The matches of the records this batch completes; ``SequenceError`` if it can
        neither be merged nor wait (the merger keeps what it holds)."""
        records: list[SituationRecord] = []
        if starts and not self.started:
            self.started = True
            records += self.merger.start_at(batch.seq)
        records += self.merger.push(batch)
        return self.matcher.process(records)

    def stats(self) -> dict[str, int]:
        return {**self.merger.stats(),
                "buffered_situations": self.matcher.stats()["buffered_situations"]}

    def snapshot(self) -> dict[str, Any]:
        return wrap(BATCH_MATCHER, STATE_VERSION, self.query.query_id,
                    {"merger": self.merger.snapshot(), "matcher": self.matcher.snapshot(),
                     "started": self.started, "registered_at": self.registered_at})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any],
                max_pending: int = MAX_PENDING) -> BatchMatcher:
        state = unwrap(BATCH_MATCHER, STATE_VERSION, query.query_id, snapshot)
        op = cls(query, max_pending)
        op.merger = BatchMerger.restore(query, state["merger"], max_pending)
        op.matcher = SituationMatcher.restore(query, state["matcher"])
        op.started = state["started"]
        op.registered_at = state["registered_at"]
        return op
