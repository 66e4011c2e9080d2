"""The CLI contract (ARCHITECTURE.md): run, check, errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situflow.cli import main

EXAMPLES = Path(__file__).parents[1] / "situflow" / "examples"
SPEED7 = [60, 65, 72, 75, 78, 80, 82, 82, 80, 76, 72, 68, 60, 60]
ACCEL7 = [0, 9, 9, 9, 9, 9, 0, 0, -10, -10, -10, -10, 0, 0]


@pytest.fixture
def car7(tmp_path: Path) -> Path:
    path = tmp_path / "car7.jsonl"
    path.write_text("".join(json.dumps({"ts": t, "car_id": 7, "speed": s, "accel": a}) + "\n"
                            for t, (s, a) in enumerate(zip(SPEED7, ACCEL7, strict=True))))
    return path


def test_run_prints_results_of_the_contract(car7, capsys):
    query = EXAMPLES / "aggressive_drivers.tps"
    assert main(["run", str(query), "--input", str(car7)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert set(result) == {"query", "key", "ts", "emitted_at", "values", "bindings"}
    assert result["query"] == "aggressive_drivers"
    assert result["emitted_at"] == result["ts"] == 11
    assert result["bindings"]["C"] == {"ts": 8, "te": None, "open": True}


def test_run_writes_the_output_file(car7, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    query = EXAMPLES / "aggressive_drivers.tps"
    assert main(["run", str(query), "--input", str(car7), "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert len(out.read_text().splitlines()) == 1


def test_a_query_error_is_located_and_exits_2(tmp_path, car7, capsys):
    query = tmp_path / "bad.tps"
    query.write_text("FROM S\nDEFINE A AS x >\nPATTERN A before B WITHIN 5s RETURN count(A) AS n")
    assert main(["run", str(query), "--input", str(car7)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{query}:3:1: expected an expression, found 'PATTERN'")


def test_bad_input_lines_are_reported_with_their_line_number_and_skipped(car7, capsys):
    lines = car7.read_text().splitlines()
    lines[3] = '{"ts": 3, "car_id": 7, "speed": '  # broken JSON
    lines[5] = '{"car_id": 7, "speed": 80, "accel": 9}'  # no event time
    car7.write_text("\n".join(lines) + "\n")
    query = EXAMPLES / "aggressive_drivers.tps"
    assert main(["run", str(query), "--input", str(car7)]) == 0
    captured = capsys.readouterr()
    assert f"skipped {car7}:4: invalid JSON" in captured.err
    assert f"skipped {car7}:6: missing event time 'ts'" in captured.err
    assert "2 bad input line(s) skipped" in captured.err
    assert main(["run", str(query), "--input", str(car7), "--strict"]) == 1


def test_out_of_order_lines_are_reported(car7, capsys):
    lines = car7.read_text().splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    car7.write_text("\n".join(lines) + "\n")
    assert main(["run", str(EXAMPLES / "aggressive_drivers.tps"), "--input", str(car7)]) == 0
    assert f"{car7}:4: event time 2 is earlier than 3" in capsys.readouterr().err


def test_check_prints_the_normalized_query_and_the_evaluation_order(capsys):
    assert main(["check", str(EXAMPLES / "aggressive_drivers_edbt.tps")]) == 0
    out = capsys.readouterr().out
    assert "PATTERN A meets;overlaps;starts;during B" in out
    assert "on C: C -> B -> A" in out


def test_unknown_language_is_a_located_error(tmp_path, capsys):
    query = tmp_path / "q.txt"
    query.write_text("SELECT * FROM t")
    assert main(["check", str(query)]) == 2
    assert "q.txt:1:1: a query starts with FROM (TPStream), PATTERN (SASE+) or RETURN" in \
        capsys.readouterr().err


@pytest.mark.parametrize("query", sorted(EXAMPLES.iterdir()), ids=lambda p: p.name)
def test_every_example_query_checks(query, capsys):
    assert main(["check", str(query)]) == 0
    assert capsys.readouterr().out.startswith("-- ")


def test_a_query_file_that_is_no_utf8_text_is_refused_with_exit_2(tmp_path, car7, capsys):
    query = tmp_path / "latin1.tps"
    query.write_bytes("FROM S -- caf\xe9\n".encode("latin-1"))
    assert main(["run", str(query), "--input", str(car7)]) == 2
    assert capsys.readouterr().err == f"situflow: {query}: not UTF-8 text (byte 13)\n"
