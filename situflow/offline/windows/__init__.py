"""Offline windowed aggregation from lightweight indexes (thesis §3.3, §3.3.1–§3.3.3).

**Query form.** A COGRA query over a single-event pattern, written as it runs online in the
trends service, e.g. ``RETURN COUNT(*), SUM(E.v), MIN(E.v), MAX(E.v), AVG(E.v) PATTERN
Reading E SEMANTICS skip-till-any-match WITHIN 10 minutes SLIDE 1 minute`` (COGRA's grammar
asks for a SEMANTICS clause; with one event per trend every semantics gives the same trends).
Every trend is one eligible event, so COUNT(*) and COUNT(E) count the eligible events, SUM,
MIN and MAX skip missing values, and AVG is SUM / COUNT(E): exactly what a block's
count/sum/min/max answer (§3.3.1: the index helps only when the aggregate is materialized).
:func:`index_refusal` says why another query cannot use the index (adjacent predicates,
negation, Kleene closures, sequences, ``AND``/``OR`` patterns); it then replays in full.

**GROUP-BY** (which the services ask of every COGRA query on a keyed stream) is answered per
group: a block's statistics are not per group, but when they show a single group for all of
its rows (min = max and no nulls on every GROUP-BY attribute, or no value at all) the block
counts for that group; a block that mixes groups is replayed. Archives keep a key's events
together only by chance (the ordered topic is partitioned by key, blocks are cut by seq), so
this pays for few keys per partition or long runs of one key. ``[attr]`` changes nothing for
single-event trends and is ignored.

**Local predicates** (``WHERE E.v > 3``) are allowed: a block whose statistics make every
local predicate and the event type true for all of its rows (a comparison of one attribute
with a constant, the attribute never null in the block, min/max on the right side) counts as
a whole block, a block that min/max make all-false is skipped, and every other block is
replayed (read and aggregated row by row, with the operator's own predicates). A predicate of
another form decides no block, so the query then replays every block.

**Windows** are COGRA's (SEMANTICS.md): ``[k·SLIDE, k·SLIDE + WITHIN)`` for ``k >= 0``, one
result per window with at least one eligible event, in window order, values formatted by the
operator's own :func:`~situflow.trends.operator.window_results` (ints where whole, AVG a
float, MIN/MAX null without a value).

**Algorithm** (§3.3.1, optimized variant; §3.3.3 for any slide): the time axis is cut into
slices of ``slide2 = WITHIN mod SLIDE`` and ``slide1 = SLIDE - slide2`` (just SLIDE when it
divides WITHIN), so every window is a run of whole slices. Each slice gets one partial
aggregate per group: the sum of the statistics of the blocks that lie inside it, merged with
the rows of the blocks that cross its bounds (the thesis' boundary leaves). A two-stacks sliding
aggregator (the online baseline's role, Tangwongsan et al.) combines slices into windows in
O(1) amortized merges per window. Archive partitions are merged at the slice level, so the
results are those of ``situflow run`` over the whole stream. Count windows (§3.3.3) use the
same slicing on the archive seq of one partition (:func:`count_windows`); the query languages
have no count-window syntax, so they are a core function only.

**Cost rule** (§3.3.2, Table 3.1): :func:`use_index` compares the merges per slide of both
methods, C_index(slide1) + C_index(slide2) against C_replay = slide·r.

Counts, integer sums, MIN and MAX equal the operator's bit for bit. A sum of non-integral
floats adds the same values in another order (per slice, then per window) than the operator
(event by event), so it may differ from the operator's in the last bits.

**Modules**, one concept each: :mod:`.slices` (the slicing of §3.3.3), :mod:`.partials` (the
values kept per slice and group), :mod:`.sliding` (the two-stacks aggregator), :mod:`.cost`
(the cost rule), :mod:`.query` (the query form and the block decisions), :mod:`.plan`
(planning and evaluation), :mod:`.counts` (count windows).
"""

from situflow.offline.windows.cost import CostParameters, costs, use_index
from situflow.offline.windows.counts import CountWindow, count_windows
from situflow.offline.windows.partials import Group, Grouped, Measures, Partials
from situflow.offline.windows.plan import (
    Method,
    Reader,
    WindowPlan,
    aggregate_windows,
    evaluate,
    plan_windows,
)
from situflow.offline.windows.query import ALL, NONE, SOME, WindowedAggregation, index_refusal
from situflow.offline.windows.slices import Slicing, WindowError
from situflow.offline.windows.sliding import sliding_windows

__all__ = [
    "ALL", "NONE", "SOME", "CostParameters", "CountWindow", "Group", "Grouped", "Measures",
    "Method", "Partials", "Reader", "Slicing", "WindowError", "WindowPlan", "WindowedAggregation",
    "aggregate_windows", "costs", "count_windows", "evaluate", "index_refusal", "plan_windows",
    "sliding_windows", "use_index",
]
