"""``situflow run`` on JSON lines: what the block reader (situflow.io.jsonl) must keep as the
line reader keeps it."""

from __future__ import annotations

import json
from pathlib import Path

from situflow.cli import main


def test_iso_8601_text_in_an_attribute_stays_text(tmp_path: Path, capsys) -> None:
    # pyarrow's JSON reader reads such text as timestamps; only the event time may be one.
    query = tmp_path / "q.sase"
    query.write_text("PATTERN SEQ(E a, E b) WHERE a.speed = b.speed WITHIN 10 seconds "
                     "RETURN a.when AS w")
    events = tmp_path / "e.jsonl"
    events.write_text("".join(json.dumps({"ts": t, "type": "E", "speed": 80,
                                          "when": f"2024-01-01T00:00:0{t}"}) + "\n"
                              for t in (1, 2)))
    assert main(["run", str(query), "--input", str(events), "--no-progress"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["values"] == {"w": "2024-01-01T00:00:01"}
