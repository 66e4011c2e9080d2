"""The oracle: ``--device opencl`` and ``--device cpu`` give identical results.

Every example query through ``situflow run``, and the property-test workloads of the three
languages (their generators, from tests/tpstream, tests/nfa and tests/trends) through the
operators, compiled once for each device.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.cli import main
from situflow.datagen.cars import write_jsonl
from situflow.devices.counters import COUNTERS
from situflow.operator import QueryOptions
from situflow.sase import compile as compile_sase
from situflow.tpstream import compile as compile_tpstream
from situflow.trends.query import compile as compile_cogra
from tests.nfa.harness import feed
from tests.nfa.test_properties import _records, queries, streams
from tests.profiles import scaled
from tests.tpstream.harness import run as run_tpstream
from tests.tpstream.test_properties import scenarios, text_of
from tests.trends.harness import batch as cogra_batch
from tests.trends.test_properties import cases

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
CPU, OPENCL = QueryOptions(name="q"), QueryOptions(name="q", device="opencl")
ORACLE = settings(max_examples=scaled(0.4), deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, device) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("oracle")
    cars = folder / "cars.jsonl"
    write_jsonl(cars, 3000, 6)
    stocks = folder / "stocks.jsonl"
    stocks.write_text("".join(json.dumps(e) + "\n" for e in stock_events(400)))
    return {"tps": cars, "sase": stocks, "cogra": stocks}


def stock_events(n: int) -> list[dict[str, Any]]:
    """Prices that rise and fall in runs, volumes around 1000, and now and then a reading
    without a price (a missing value: NaN in the columns)."""
    events = []
    for t in range(n):
        symbol = "ABCDE"[t % 5]
        price = 100 + 10 * math.sin(t / (7 + t % 5)) + (t % 3)
        event: dict[str, Any] = {"ts": t, "type": "Stock", "symbol": symbol,
                                 "sector": "tech" if symbol in "ABC" else "energy",
                                 "company": symbol.lower(), "volume": 500 + (t * 37) % 1200}
        if t % 41:
            event["price"] = round(price, 2)
        events.append(event)
    return events


@pytest.mark.parametrize("query", sorted(EXAMPLES.iterdir()), ids=lambda p: p.name)
def test_every_example_query_gives_the_same_results_with_opencl_as_on_the_cpu(
        query, inputs, tmp_path, capsys):
    outputs = {}
    for device in ("cpu", "opencl"):
        out = tmp_path / f"{device}.jsonl"
        code = main(["run", str(query), "--input", str(inputs[query.suffix[1:]]),
                     "--output", str(out), "--device", device])
        assert code == 0, capsys.readouterr().err
        outputs[device] = out.read_text()
    assert outputs["opencl"] == outputs["cpu"]


def test_the_device_really_evaluates_the_example_conditions(inputs, tmp_path):
    before = COUNTERS.kernels
    main(["run", str(EXAMPLES / "aggressive_drivers.tps"), "--input", str(inputs["tps"]),
          "--output", str(tmp_path / "out.jsonl"), "--device", "opencl"])
    assert COUNTERS.kernels > before


@ORACLE
@given(scenarios())
def test_tpstream_property_workloads_match_across_devices(device, scenario):
    ts, conds, constraints, bounds, window, batch = scenario
    text = text_of(len(conds), constraints, bounds, window)
    events = [{"ts": t, **{f"x{d}": int(conds[d][k]) for d in range(len(conds))}}
              for k, t in enumerate(ts)]
    expected = run_tpstream(compile_tpstream(text, CPU), events, batch)
    assert run_tpstream(compile_tpstream(text, OPENCL), events, batch) == expected


@ORACLE
@given(queries(), streams(), st.integers(1, 8))
def test_sase_property_workloads_match_across_devices(device, text, events, batch):
    events = _records(events)
    expected = feed(compile_sase(text, CPU).operator(), events, batch)
    assert feed(compile_sase(text, OPENCL).operator(), events, batch) == expected, text


@ORACLE
@given(cases(max_events=14))
def test_cogra_property_workloads_match_across_devices(device, case):
    text, events = case

    def run(options: QueryOptions) -> list[dict[str, Any]]:
        op = compile_cogra(text, options).operator()
        return [r.to_dict() for r in op.process(cogra_batch(events)) + op.finish()]

    assert run(OPENCL) == run(CPU), text
