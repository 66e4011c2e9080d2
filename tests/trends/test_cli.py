"""``situflow run`` and ``situflow check`` on COGRA queries (CLI contract, ARCHITECTURE.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situflow.cli import main
from tests.trends.harness import RUNNING, stream


def write(tmp_path: Path, query: str, events: list[dict]) -> tuple[Path, Path]:
    q = tmp_path / "q.cogra"
    q.write_text(query)
    e = tmp_path / "events.jsonl"
    e.write_text("".join(json.dumps(event) + "\n" for event in events))
    return q, e


def test_run_prints_one_line_per_window_and_group(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    events = [dict(e, speed=e["attr"]) for e in stream(RUNNING)]
    for e in events:
        e["driver"] = "d1" if e["ts"] % 2 else "d2"
    q, path = write(tmp_path, "RETURN driver, COUNT(*), AVG(A.speed)\nPATTERN (SEQ(A+, B))+\n"
                              "SEMANTICS skip-till-any-match\nGROUP-BY driver\n"
                              "WITHIN 6 SLIDE 4\n", events)
    assert main(["run", str(q), "--input", str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["window_start"], r["window_end"], r["group"]) for r in lines] == [
        (0, 6, "d1"), (0, 6, "d2"), (4, 10, "d1"), (4, 10, "d2"), (8, 14, "d2")]
    assert set(lines[0]) == {"query", "group", "window_start", "window_end", "values"}
    # Odd times: a1 a3 c5 a7 (no B); even: b2 a4 b6 b8, so (a4, b6) and (a4, b8) in [4, 10).
    assert [r["values"]["COUNT(*)"] for r in lines] == [0, 0, 0, 2, 0]


def test_check_prints_the_chosen_aggregator(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = write(tmp_path, "RETURN COUNT(*) PATTERN SEQ(P, T+, D) "
                           "SEMANTICS skip-till-next-match WITHIN 30 minutes", [])
    assert main(["check", str(q)]) == 0
    out = capsys.readouterr().out
    assert "granularity: pattern (Table 5)" in out
    assert "Definition 2.6" in out


def test_query_errors_exit_2_with_their_position(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    q, e = write(tmp_path, "RETURN COUNT(*)\nPATTERN A+\nSEMANTICS skip-till-some-match\n"
                           "WITHIN 5\n", stream("a1"))
    assert main(["run", str(q), "--input", str(e)]) == 2
    assert capsys.readouterr().err.startswith(f"{q}:3:11: unknown semantics")
