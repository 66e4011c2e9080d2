"""Dirty input never stops ``situflow run`` (issue #12): the one event-time rule and the one typing
rule (SEMANTICS.md, "Event time and types"), each reproduction of the issue as a regression test,
and a stream where 5% of the lines are bad in every way at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situflow.cli import main

EXAMPLES = Path(__file__).parents[1] / "situflow" / "examples"
TPS, SASE, COGRA = (EXAMPLES / n for n in ("aggressive_drivers.tps", "rising_stocks.sase",
                                           "rising_trends.cogra"))


def cars(n: int = 60) -> list[dict[str, object]]:
    """Two cars that both drive aggressively once (A, then B and C as the example query asks)."""
    events = []
    for t in range(n):
        phase = t % 30
        accel = 9 if 1 <= phase <= 6 else -10 if 9 <= phase <= 12 else 0
        speed = 80 if 2 <= phase <= 12 else 60
        events += [{"id": 2 * t, "ts": t, "car_id": 7, "speed": speed, "accel": accel},
                   {"id": 2 * t + 1, "ts": t, "car_id": 8, "speed": speed + 1, "accel": accel}]
    return events


def stocks(n: int = 80) -> list[dict[str, object]]:
    events = []
    for t in range(n):
        for symbol, base in (("IBM", 100), ("SUN", 50)):
            price = base + (t % 7) * 3
            volume = 2000 if t % 7 else 50
            events.append({"id": len(events), "ts": t * 60, "type": "Stock", "symbol": symbol,
                           "price": price, "volume": volume})
    return events


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def run(query: Path, events: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict], str]:
    out = tmp_path / f"{events.stem}.out"
    code = main(["run", str(query), "--input", str(events), "--output", str(out), *extra])
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, results, ""


def dumps(events: list[dict[str, object]]) -> list[str]:
    return [json.dumps(e) for e in events]


# --- the reproductions of the issue, each alone in a good stream ------------------------------

BAD_EVENTS = {
    "list key": ({"ts": 3, "car_id": [1], "speed": 80, "accel": 9},
                 "partition attribute 'car_id' must be text, a number or a boolean, found a list"),
    "object key": ({"ts": 3, "car_id": {"a": 1}, "speed": 80, "accel": 9},
                   "partition attribute 'car_id' must be text, a number or a boolean, "
                   "found an object"),
    "key beyond 64 bits": ({"ts": 3, "car_id": 2**70, "speed": 80, "accel": 9},
                           "partition attribute 'car_id' is a number beyond 64 bits"),
    "text speed": ({"ts": 3, "car_id": 7, "speed": "abc", "accel": 9},
                   "attribute 'speed' must be a number, found text 'abc'"),
    "boolean speed": ({"ts": 3, "car_id": 7, "speed": True, "accel": 9},
                      "attribute 'speed' must be a number, found a boolean"),
    "list speed": ({"ts": 3, "car_id": 7, "speed": [80], "accel": 9},
                   "attribute 'speed' must be a number, found a list"),
    "object speed": ({"ts": 3, "car_id": 7, "speed": {"v": 80}, "accel": 9},
                     "attribute 'speed' must be a number, found an object"),
    "fractional time": ({"ts": 3.5, "car_id": 7, "speed": 80, "accel": 9},
                        "event time 'ts' must be a whole number of ticks, found 3.5"),
    "time beyond 64 bits": ({"ts": 2**70, "car_id": 7, "speed": 80, "accel": 9},
                            "event time 'ts' 1180591620717411303424 is outside the 64-bit range"),
    "boolean time": ({"ts": True, "car_id": 7, "speed": 80, "accel": 9},
                     "event time 'ts' must be an integer or ISO-8601 text, found a boolean"),
}


@pytest.mark.parametrize("case", BAD_EVENTS, ids=list(BAD_EVENTS))
def test_one_bad_event_is_rejected_alone_with_its_reason(case, tmp_path, capsys):
    bad, reason = BAD_EVENTS[case]
    good = cars()
    lines = dumps(good)
    lines.insert(7, json.dumps(bad))
    code, results, _ = run(TPS, write(tmp_path / "dirty.jsonl", lines), tmp_path)
    err = capsys.readouterr().err
    assert code == 0
    assert f"dirty.jsonl:8: {reason}" in err
    _, expected, _ = run(TPS, write(tmp_path / "clean.jsonl", dumps(good)), tmp_path)
    assert results == expected and len(expected) == 4


def test_a_string_key_among_integer_keys_is_a_key_of_its_own(tmp_path):
    """Keys of unlike types are different keys, never compared with each other."""
    events = cars()
    events += [dict(e, car_id="seven", id=e["id"] + 10_000) for e in cars() if e["car_id"] == 7]
    events.sort(key=lambda e: e["ts"])
    code, results, _ = run(TPS, write(tmp_path / "keys.jsonl", dumps(events)), tmp_path)
    assert code == 0
    assert sorted({json.dumps(r["key"]) for r in results}) == ['"seven"', "7", "8"]


@pytest.mark.parametrize("query", [TPS, SASE, COGRA], ids=["tpstream", "sase", "cogra"])
def test_an_integer_beyond_64_bits_is_a_number_where_a_number_is_expected(query, tmp_path):
    events = cars() if query == TPS else stocks()
    numeric = "speed" if query == TPS else "price"
    huge = dict(events[5], **{numeric: 2**70})
    lines = dumps(events)
    lines[5] = json.dumps(huge)
    code, results, _ = run(query, write(tmp_path / "huge.jsonl", lines), tmp_path)
    assert code == 0
    floated = dict(huge, **{numeric: float(2**70)})
    lines[5] = json.dumps(floated)
    _, expected, _ = run(query, write(tmp_path / "floated.jsonl", lines), tmp_path)
    assert results == expected


def test_an_iso_time_among_integer_times_is_read_by_the_same_rule(tmp_path, capsys):
    """An ISO-8601 time is ticks since the epoch (seconds here): far after the integer times,
    so the events after it go backwards in time and are reported, and nothing crashes."""
    lines = dumps(cars())
    lines[4] = json.dumps(dict(json.loads(lines[4]), ts="2024-05-01T12:00:00Z"))
    code, _, _ = run(TPS, write(tmp_path / "iso.jsonl", lines), tmp_path)
    assert code == 0
    assert "iso.jsonl:6: event time 2 is earlier than 1714564800" in capsys.readouterr().err


def test_iso_times_and_millisecond_times_mean_the_same_with_the_time_unit(tmp_path):
    """One event-time rule: a stream of ISO times and the same stream in integer milliseconds
    give the same results under --time-unit 0.001 (query durations converted alike)."""
    events = cars()
    millis = [dict(e, ts=1_714_564_800_000 + 1000 * e["ts"]) for e in events]
    iso = [dict(e, ts=f"2024-05-01T12:{e['ts'] // 60:02d}:{e['ts'] % 60:02d}Z") for e in events]
    _, from_millis, _ = run(TPS, write(tmp_path / "ms.jsonl", dumps(millis)), tmp_path,
                            "--time-unit", "0.001")
    _, from_iso, _ = run(TPS, write(tmp_path / "iso.jsonl", dumps(iso)), tmp_path,
                         "--time-unit", "0.001")
    assert from_iso == from_millis and len(from_millis) == 4
    assert from_millis[0]["bindings"]["A"]["ts"] == 1_714_564_801_000


def test_strict_stops_at_the_first_bad_event_with_exit_1(tmp_path, capsys):
    lines = dumps(cars())
    lines[9] = json.dumps(dict(json.loads(lines[9]), speed="fast"))
    code, _, _ = run(TPS, write(tmp_path / "strict.jsonl", lines), tmp_path, "--strict")
    assert code == 1
    assert "strict.jsonl:10: attribute 'speed' must be a number" in capsys.readouterr().err


def test_an_attribute_no_event_carries_is_reported_at_the_end(tmp_path, capsys):
    query = tmp_path / "typo.tps"
    query.write_text(TPS.read_text().replace("avg(B.speed)", "avg(B.sped)"))
    assert main(["run", str(query), "--input", str(write(tmp_path / "e.jsonl",
                                                             dumps(cars())))]) == 0
    assert "the query uses attribute 'sped', which no event carried" in capsys.readouterr().err


# --- 5% of the lines bad in every way at once --------------------------------------------------

BAD_LINES = [
    "{not json", "[1, 2]", '"text"', "", "null", '{"ts": NaN, "car_id": 7}',
    '{"car_id": 7, "speed": 80}',
    *(json.dumps(bad) for bad, _ in BAD_EVENTS.values()),
]


def test_a_stream_with_five_percent_bad_lines_gives_the_results_of_its_good_lines(tmp_path,
                                                                                  capsys):
    good = cars(600)
    lines = dumps(good)
    for k, i in enumerate(range(10, len(lines), 20)):
        bad = BAD_LINES[k % len(BAD_LINES)]
        if bad.startswith('{"ts": 3,'):  # in time order, to be rejected by the typing rule
            bad = bad.replace('{"ts": 3,', f'{{"ts": {json.loads(lines[i - 1])["ts"]},', 1)
        lines.insert(i, bad)
    rejected = tmp_path / "rejected.jsonl"
    code, results, _ = run(TPS, write(tmp_path / "dirty.jsonl", lines), tmp_path,
                           "--rejected", str(rejected))
    err = capsys.readouterr().err
    assert code == 0
    _, expected, _ = run(TPS, write(tmp_path / "clean.jsonl", dumps(good)), tmp_path)
    assert results == expected and len(expected) == 40
    skipped = [json.loads(line) for line in rejected.read_text().splitlines()]
    blank = sum(1 for line in lines if not line.strip())
    assert len(skipped) + blank + len(good) == len(lines)
    assert f"{len(skipped)} bad input line(s) skipped, by reason:" in err
    assert "attribute 'speed' must be a number, found text '…'" in err


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_no_json_in_a_block_pyarrow_reads_whole(constant, tmp_path, capsys):
    """pyarrow's reader accepts them; the line reader does not: the block is read line by
    line, so a line is rejected whatever block it is in (found by tests/fuzz/test_events.py)."""
    lines = dumps(cars(5))
    lines[1] = json.dumps(dict(json.loads(lines[1]), speed="X")).replace('"X"', constant)
    code, _, _ = run(TPS, write(tmp_path / "nan.jsonl", lines), tmp_path)
    assert code == 0
    assert f"nan.jsonl:2: invalid JSON: {constant} is not a JSON value" in \
        capsys.readouterr().err
