"""Distributed TPStream (thesis §5.6): derivation and matching in separate processes, joined by
the situation stream. This docstring is the one account of the design; the modules and the
services link here.

The thesis splits TPStream at the situation stream: derivers turn events into situation
updates and write them to a topic; matchers file them into their buffers and match, "an
independent process waiting for the input of the deriver" (§5.6.5). The algorithms are the
fused operator's (:mod:`situflow.tpstream.fused`): derivation is Alg. 5.1
(:mod:`situflow.tpstream.derive`), matching Alg. 5.3/5.4 (:mod:`situflow.tpstream.match`), so
both paths report the same matches with the same result ids (``tests/tpstream/test_split.py``,
``tests/tpstream/test_batch_merger.py``). What differs is the stream between them.

**Partitioned streams** (§5.6.5): every partition key's events stay in one input partition,
in event-time order, so one deriver per partition derives them sequentially.
:class:`~situflow.tpstream.split.deriver.SituationDeriver` emits situation records
(:mod:`~situflow.tpstream.split.records`: ``started``, ``running``, ``finished``), grouped in
steps, the records of one event of one key; the
:class:`~situflow.tpstream.split.matcher.SituationMatcher` files and matches them step by
step. A redelivered step is skipped by its key's position
(:func:`~situflow.tpstream.split.halves.match_situations`).

**Unpartitioned streams** (§5.6.3): the stream has no partition key, so no key splits the
work; instead the one producer that can restore a global event-time order (the K-slack
service) cuts the ordered stream into consecutive *event batches* with dense numbers 0, 1, 2,
... (:class:`~situflow.tpstream.split.batches.EventSlicer` decides where a batch ends) and
spreads them over the partitions. Derivers derive each batch on its own, in parallel, from a
fresh state (:func:`~situflow.tpstream.split.batches.derive_batch`, the deriving phase), into
a :class:`~situflow.tpstream.split.batches.SituationBatch` with a *head* (what a situation
ongoing before the batch would continue into) and a *tail* (what is ongoing after it). One
matcher per query takes the batches in any order, waits for each next number (the "K-slack on
sequence numbers", §5.6.5) and merges them (Alg. 5.5,
:class:`~situflow.tpstream.split.merger.BatchMerger`) into exactly the sequential deriver's
records, which a ``SituationMatcher`` matches
(:class:`~situflow.tpstream.split.merger.BatchMatcher`). A missing batch is waited
for, never skipped; a redelivered one is a duplicate of its number and skipped.

Queries come and go while the stream runs. Derivers and matchers follow the query registry
independently, so each situation message (:mod:`~situflow.tpstream.split.messages`) carries
the registry offset of the registration it was derived under, and an unpartitioned query
begins at the first batch cut after its registration was read, the same batch for every
deriver (:func:`~situflow.tpstream.split.halves.derived_for`).

:mod:`~situflow.tpstream.split.halves` makes each half a compiled query
(``as_deriver(q)``, ``as_matcher(q)``, ``as_batch_deriver(q)``, ``as_batch_matcher(q)``), so
the services evaluate either half as they evaluate any query.
"""
