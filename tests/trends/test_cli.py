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


Q4 = """RETURN patient, COUNT(*)
PATTERN SEQ(Activity S, Activity A+, Activity F)
SEMANTICS contiguous
WHERE [patient] AND S.rate < 60 AND F.rate > 100 AND
A.type = passive GROUP-BY patient
WITHIN 10 minutes SLIDE 30 seconds
"""


def test_q4_verbatim_reads_a_bare_word_as_a_symbolic_constant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Appendix A's q4 as printed: attributes are always qualified in COGRA, so ``passive`` is a
    string. ``A.type`` is the paper's activity attribute; event types come from ``kind`` here
    (SEMANTICS.md, "Event types")."""
    rates = [50, 70, 80, 120, 55, 90, 130]
    activities = ["a", "passive", "passive", "b", "c", "passive", "d"]
    events = [{"kind": "Activity", "ts": t, "patient": 1, "rate": r, "type": a}
              for t, (r, a) in enumerate(zip(rates, activities, strict=True), 1)]
    q, path = write(tmp_path, Q4, events)
    quoted = tmp_path / "quoted.cogra"
    quoted.write_text(Q4.replace("passive", "'passive'"))
    assert main(["check", str(q), "--type-field", "kind"]) == 0
    verbatim = capsys.readouterr().out
    assert "A.type = 'passive' GROUP-BY patient" in verbatim
    assert main(["check", str(quoted), "--type-field", "kind"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == verbatim.splitlines()[0]  # the query id
    assert main(["run", str(q), "--input", str(path), "--type-field", "kind"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["values"] == {"patient": 1, "COUNT(*)": 2}  # s1 a2 a3 f4, s5 a6 f7


@pytest.mark.parametrize(("within", "time_unit"), [("1e300 seconds", "1"), ("1e300 seconds", "1e-300"),
                                                   ("1 days SLIDE 100 ms", "0.001")])
def test_windows_beyond_the_operator_are_query_errors_not_crashes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], within: str, time_unit: str) -> None:
    """Issue #12: WITHIN 1e300 seconds crashed allocating the windows; one beyond the float range
    of ticks crashed rounding. Such windows are located errors (exit 2)."""
    q, e = write(tmp_path, f"RETURN COUNT(*) PATTERN SEQ(A+, B) SEMANTICS skip-till-any-match "
                           f"WITHIN {within}\n", stream("a1 b2"))
    assert main(["run", str(q), "--input", str(e), "--time-unit", time_unit]) == 2
    assert capsys.readouterr().err.startswith(f"{q}:1:")
