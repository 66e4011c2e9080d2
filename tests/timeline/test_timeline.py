"""``situflow run --timeline``: what each picture draws, counted against the run's results
(mark names: the contract of situflow/timeline/page.py), the empty picture, the rule for
large inputs and the file-name check."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from situflow.cli import main
from situflow.datagen.cars import write_jsonl
from situflow.io.jsonl import Fields, read_blocks
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.timeline import timeline_for
from situflow.timeline.limits import Limits
from situflow.timeline.page import count_marks, write_picture
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.records import FINISHED, STARTED

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
FIELDS = Fields("ts", "type", "id", 1.0)


@pytest.fixture(scope="module")
def cars(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight cars for 5,000 seconds: a few aggressive drivers among them."""
    path = tmp_path_factory.mktemp("cars") / "cars.jsonl"
    write_jsonl(path, 40_000, 8)
    return path


@pytest.fixture(scope="module")
def stocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """36 ticks of three stocks: fewer than 25 rising runs of each (nothing left out)."""
    return write_stocks(tmp_path_factory.mktemp("stocks") / "stocks.jsonl", 36)


def write_stocks(path: Path, events: int) -> Path:
    """Three stocks of two sectors, a random walk with a small upward drift."""
    rng = random.Random(3)
    price = {"A": 100.0, "B": 100.0, "C": 100.0}
    sector = {"A": "tech", "B": "tech", "C": "energy"}
    with path.open("w") as f:
        for t in range(events):
            symbol = "ABC"[t % 3]
            price[symbol] = round(price[symbol] + rng.uniform(-2, 2.4), 2)
            f.write(json.dumps({"ts": t * 20, "type": "Stock", "symbol": symbol,
                                "sector": sector[symbol], "company": symbol,
                                "price": price[symbol], "volume": rng.randint(500, 2000)}) + "\n")
    return path


def run(query: Path, events: Path, tmp_path: Path, suffix: str = ".svg") -> tuple[list[dict], str]:
    """The results of ``situflow run … --timeline`` and the picture it wrote."""
    results, picture = tmp_path / "results.jsonl", tmp_path / f"timeline{suffix}"
    assert main(["run", str(query), "--input", str(events), "--output", str(results),
                 "--timeline", str(picture)]) == 0
    lines = results.read_text().splitlines()
    return [json.loads(line) for line in lines], picture.read_text()


def derived_situations(query: Path, events: Path) -> int:
    """The situations the TPStream deriver derives: finished ones (``te > ts``, Def 5.1) and
    those still open at the end of input."""
    deriver = SituationDeriver(compile_query(query.read_text()))  # type: ignore[arg-type]
    finished, open_ = 0, set()
    for block in read_blocks(events, FIELDS):
        for r in deriver.process(block.batch):
            if r.kind == STARTED:
                open_.add((r.key, r.situation))
            elif r.kind == FINISHED:
                open_.discard((r.key, r.situation))
                finished += r.te is not None and r.te > r.ts
    return finished + len(open_)


@pytest.mark.parametrize("example", ["aggressive_drivers.tps", "aggressive_drivers_edbt.tps"])
def test_a_tpstream_timeline_draws_every_situation_and_one_bracket_per_match(
        example, cars, tmp_path):
    results, svg = run(EXAMPLES / example, cars, tmp_path)
    ElementTree.fromstring(svg)
    assert results
    assert count_marks(svg, "match") == len(results)
    assert count_marks(svg, "emitted") == len(results)
    assert count_marks(svg, "situation") == derived_situations(EXAMPLES / example, cars)


def test_a_sase_timeline_draws_each_match_as_a_line_through_its_selected_events(stocks, tmp_path):
    results, svg = run(EXAMPLES / "rising_stocks.sase", stocks, tmp_path)
    ElementTree.fromstring(svg)
    assert results
    assert count_marks(svg, "match") == len(results)
    assert count_marks(svg, "event") == sum(len(ids) for r in results
                                            for ids in r["bindings"].values())
    # One Kleene run (a[ ]) per match, labelled with its length.
    assert count_marks(svg, "run") == len(results)
    assert f"a[1..{len(results[0]['bindings']['a'])}]" in svg


@pytest.mark.parametrize("example", ["downtrends.cogra", "rising_trends.cogra"])
def test_a_cogra_timeline_draws_one_bar_per_window_row(example, stocks, tmp_path):
    results, svg = run(EXAMPLES / example, stocks, tmp_path)
    ElementTree.fromstring(svg)
    assert results
    assert count_marks(svg, "window") == len(results)


@pytest.mark.parametrize(("example", "text"), [
    ("aggressive_drivers.tps", "no matches"),
    ("rising_stocks.sase", "no matches"),
    ("rising_trends.cogra", "no results"),
])
def test_an_empty_result_still_gives_a_picture_that_says_so(example, text, tmp_path, capsys):
    events = tmp_path / "none.jsonl"
    events.write_text("")
    results, svg = run(EXAMPLES / example, events, tmp_path)
    assert results == []
    assert text in svg
    assert count_marks(svg, "match") == count_marks(svg, "window") == 0
    assert f"situflow: timeline: {text}" in capsys.readouterr().err


def test_the_page_is_self_contained_and_drawn_by_vegas_svg_renderer(stocks, tmp_path):
    _, page = run(EXAMPLES / "rising_stocks.sase", stocks, tmp_path, ".html")
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>situflow timeline: rising_stocks</title>" in page
    assert "window.vegaEmbed" in page
    assert '"renderer": "svg"' in page and '"actions": false' in page
    assert "<script src" not in page and "<link" not in page


def test_past_the_caps_the_picture_and_standard_error_count_what_is_not_drawn(cars, tmp_path):
    query = compile_query((EXAMPLES / "aggressive_drivers.tps").read_text(),
                          QueryOptions(name="aggressive_drivers"))
    op = query.operator()
    timeline = timeline_for(query, Limits(keys=2, results=1, situations=5))
    found = 0
    for block in read_blocks(cars, FIELDS):
        results = op.process(block.batch)
        found += len(results)
        timeline.add(block.batch, results)
    picture = timeline.picture()
    svg_path = tmp_path / "capped.svg"
    write_picture(picture.chart, svg_path, title="capped")
    svg = svg_path.read_text()
    assert picture.notes == [
        "6 keys not drawn: at most 2 are drawn, those with matches first",
        f"{found - 2} matches not drawn: only the last 1 of each drawn key are",
        f"{picture.notes[2].split()[0]} situations not drawn: only the last 5 finished ones of "
        "each drawn key are",
    ]
    assert all(note in svg for note in picture.notes)
    assert count_marks(svg, "match") == 2
    # Five finished situations per key, and the ones open at the end of input.
    assert 10 <= count_marks(svg, "situation") <= 10 + 2 * 3


def test_the_cli_says_on_standard_error_what_the_picture_leaves_out(tmp_path, capsys):
    events = write_stocks(tmp_path / "stocks.jsonl", 90)
    results, svg = run(EXAMPLES / "rising_stocks.sase", events, tmp_path)
    assert len({r["key"] for r in results}) == 3
    assert all(sum(r["key"] == key for r in results) > 25 for key in "ABC")
    note = f"{len(results) - 75} matches not drawn: only the last 25 of each drawn key are"
    assert f"situflow: timeline: {note}" in capsys.readouterr().err
    assert note in svg
    assert count_marks(svg, "match") == 75


@pytest.mark.parametrize("name", ["timeline.png", "timeline", "timeline.svg.gz"])
def test_a_timeline_file_must_end_html_or_svg(name, stocks, tmp_path, capsys):
    code = main(["run", str(EXAMPLES / "rising_stocks.sase"), "--input", str(stocks),
                 "--timeline", str(tmp_path / name)])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("situflow: --timeline FILE must end .html or .svg")
    assert captured.out == ""


def test_past_the_events_cap_a_sase_match_draws_its_first_events_and_counts_the_rest(
        stocks, tmp_path):
    query = compile_query((EXAMPLES / "rising_stocks.sase").read_text(),
                          QueryOptions(name="rising_stocks"))
    op = query.operator()
    timeline = timeline_for(query, Limits(events=2))
    results: list[Any] = []
    for block in read_blocks(stocks, FIELDS):
        found = op.process(block.batch)
        results += found
        timeline.add(block.batch, found)
    picture = timeline.picture()
    write_picture(picture.chart, tmp_path / "capped.svg", title="capped")
    svg = (tmp_path / "capped.svg").read_text()
    selected = [sum(len(ids) for ids in r.bindings.values()) for r in results]
    assert picture.notes == [f"{sum(selected) - sum(min(2, n) for n in selected)} selected "
                             "events not drawn: at most 2 of each match are"]
    assert count_marks(svg, "event") == sum(min(2, n) for n in selected)
    # A Kleene run's label gives its whole length.
    longest = max(len(r.bindings["a"]) for r in results)
    assert f"a[1..{longest}]" in svg
