"""What an evaluating service does with one input partition, without Kafka (thesis §5.6).

A service evaluates a :class:`~situflow.runtime.queryset.QuerySet` over the ordered partitions
that K-slack writes. Per partition it keeps one
:class:`~situflow.runtime.partition.PartitionOperators`: each query's operator over every key
of the partition, as ``situflow run`` evaluates the partition's events, and per key the
position (event time, input seq) of the last event evaluated. A redelivered message repeats
rows at or before their key's position; :func:`~situflow.runtime.dedup.fresh_rows` drops them.
The Faust services (``workers/``) and offline replays drive these alike.
"""

from situflow.runtime.attributes import UnseenAttributes
from situflow.runtime.begins import begin_keys, key_name, key_names
from situflow.runtime.dedup import fresh_rows, integer_column, key_groups
from situflow.runtime.ordered import OrderedLayout, decode_ordered, ordered_events
from situflow.runtime.partition import PartitionOperators
from situflow.runtime.queryset import QuerySet

__all__ = ["OrderedLayout", "PartitionOperators", "QuerySet", "UnseenAttributes", "begin_keys",
           "decode_ordered", "fresh_rows", "integer_column", "key_groups", "key_name", "key_names",
           "ordered_events"]
