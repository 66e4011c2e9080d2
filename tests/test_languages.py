"""The language registry: which language a query is in, and what partitions its stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from situflow.languages import compile_query

EXAMPLES = Path(__file__).parents[1] / "situflow" / "examples"


@pytest.mark.parametrize(("example", "language", "attributes"), [
    ("aggressive_drivers.tps", "tpstream", ("car_id",)),
    ("rising_stocks.sase", "sase", ("symbol",)),
    # A COGRA group sums the trends of every [company] partition in it: only GROUP-BY splits.
    ("downtrends.cogra", "cogra", ("sector",)),
])
def test_partition_attributes_are_those_no_result_spans(example: str, language: str,
                                                        attributes: tuple[str, ...]) -> None:
    query = compile_query((EXAMPLES / example).read_text())
    assert query.language == language
    assert query.partition_attributes == attributes
