"""Parallel derivation of situation batches and their merge (thesis §5.6.3/§5.6.5), against the
sequential deriver on the same events.

For the aggressive-drivers query without PARTITION BY over one car's stream (unpartitioned),
and as written over a few cars (keyed batches), prints, measured in the same run (best of
``--runs``):
- sequential: ``SituationDeriver`` over every batch (events/s), the baseline;
- one deriver: ``derive_batch`` of every batch plus its JSON encoding (events/s per deriver);
- the merger: JSON decoding plus ``BatchMerger.push`` of every batch (events/s; its records are
  checked to equal the sequential deriver's);
- the matcher: ``SituationMatcher`` on those records (events/s), which runs beside the merger;
- merger / sequential and merger / matcher: how the one merging stage compares with deriving
  sequentially and with the matching it feeds.

    python bench/tpstream_batches.py [--events 1000000] [--cars 10] [--batch 32768]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tpstream import best_of  # bench/tpstream.py: this script runs from bench/

from situflow.datagen.cars import car_batches
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.tpstream.split.batches import SituationBatch, derive_batch
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.merger import BatchMerger

QUERY = (Path(__file__).parents[1] / "situflow" / "examples" / "aggressive_drivers.tps").read_text()


def measure(label: str, text: str, events: int, cars: int, batch: int, runs: int) -> None:
    query = compile_query(text, QueryOptions(name="aggressive_drivers"))
    batches = list(car_batches(events, cars, batch))
    SituationDeriver(query).process(batches[0])  # compile the kernel outside the measurement

    def sequential():
        deriver = SituationDeriver(query)
        return [r for b in batches for r in deriver.process(b)]

    def derive():
        return [json.dumps(derive_batch(query, s, b).to_dict()) for s, b in enumerate(batches)]

    t_seq, expected = best_of(runs, sequential)
    t_derive, encoded = best_of(runs, derive)

    def merge():
        merger = BatchMerger(query)
        return [r for text in encoded for r in merger.push(SituationBatch.from_dict(json.loads(text)))]

    t_merge, merged = best_of(runs, merge)
    assert merged == expected, "the merged records differ from the sequential deriver's"
    t_match, _ = best_of(runs, lambda: SituationMatcher(query).process(merged))
    size = sum(map(len, encoded))
    print(f"{label}: {events:,} events, {cars:,} car(s), batches of {batch:,}; "
          f"{len(expected):,} records; {size / events:.1f} JSON bytes per event")
    print(f"  {'sequential deriver':<40}{events / t_seq:>14,.0f} events/s")
    print(f"  {'one deriver: derive_batch + JSON':<40}{events / t_derive:>14,.0f} events/s")
    print(f"  {'the merger: JSON + BatchMerger.push':<40}{events / t_merge:>14,.0f} events/s")
    print(f"  {'the matcher: SituationMatcher':<40}{events / t_match:>14,.0f} events/s")
    print(f"  {'merger / sequential (speed)':<40}{t_seq / t_merge:>14.2f}")
    print(f"  {'merger / matcher (speed)':<40}{t_match / t_merge:>14.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--cars", type=int, default=10)
    p.add_argument("--batch", type=int, default=32_768)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    measure("unpartitioned", QUERY.replace(" PARTITION BY car_id", ""), a.events, 1, a.batch,
            a.runs)
    measure("keyed batches", QUERY, a.events, a.cars, a.batch, a.runs)


if __name__ == "__main__":
    main()
