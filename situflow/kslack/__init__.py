"""K-slack: the reordering of a stream with bounded disorder (thesis §5.6.1, :mod:`.reorder`),
what it takes in (:mod:`.intake`), the input positions it writes (:mod:`.positions`), one input
partition's state around it (:mod:`.buffer`) and the batcher of an unpartitioned stream (thesis
§5.6.3, :mod:`.batches`).

The service :mod:`workers.kslack` feeds these from Kafka; nothing here imports a Kafka client.
The package re-exports only what loads no engine: :mod:`topics.catalog` imports the positions,
and the CLI must not pay for the TPStream engine the batcher's slicer comes from.
"""

from situflow.kslack.intake import check_partition_key, decode_input
from situflow.kslack.positions import (
    ROW_BITS,
    SEQ_FIELD,
    arrow_table,
    input_seq,
    json_table,
    table_of,
)
from situflow.kslack.reorder import ColumnarKSlack, late_by

__all__ = [
    "ROW_BITS", "SEQ_FIELD", "ColumnarKSlack", "arrow_table", "check_partition_key",
    "decode_input", "input_seq", "json_table", "late_by", "table_of",
]
