"""Issue 18's acceptance: the pictures open in a real headless Chromium with the network off.

First the harness itself (:mod:`tests.timeline.browser`) on small hand-made pictures, then the
pictures ``situflow run --timeline`` and ``situflow explain`` draw for the bundled examples.
Every test writes a screenshot; with ``SITUFLOW_UPDATE_PICTURES=1`` the screenshots go to
``docs/images/``, where the README shows them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import altair as alt
import pytest

from situflow import tpstream
from situflow.cli import main
from situflow.datagen.cars import car_batches
from situflow.datagen.cars import write_jsonl as write_cars
from situflow.timeline.page import SVG_NS, count_marks, write_picture
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.records import FINISHED, STARTED
from tests.ops.conftest import REPO
from tests.timeline.browser import Browser

PNG = b"\x89PNG\r\n\x1a\n"


def bars(count: int) -> alt.Chart:
    """A small picture: ``count`` bars of the mark ``situation`` under a title."""
    rows = [{"start": i, "end": i + 2, "lane": f"S{i % 2}"} for i in range(count)]
    return alt.Chart(alt.Data(values=rows), name="situation", title="hand-made").mark_bar(
        ).encode(x="start:Q", x2="end:Q", y="lane:N")


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ``bars.html`` and ``bars.svg``: five bars drawn by ``write_picture``
    (once: inlining the libraries takes seconds)."""
    directory = tmp_path_factory.mktemp("hand-made")
    for suffix in ("html", "svg"):
        write_picture(bars(5), directory / f"bars.{suffix}", title="five bars")
    return directory


def page_with(hand_made: Path, tmp_path: Path, extra: str) -> Path:
    """The hand-made picture's page with ``extra`` HTML added at the end of its body."""
    # The last "</body>": the inlined libraries hold the text too.
    head, end, tail = (hand_made / "bars.html").read_text().rpartition("</body>")
    path = tmp_path / "picture.html"
    path.write_text(f"{head}{extra}\n{end}{tail}")
    return path


def test_a_written_picture_opens_from_disk_with_no_request_and_no_error(
        browser: Browser, hand_made: Path, tmp_path: Path):
    with browser.open(hand_made / "bars.html") as picture:
        assert picture.errors == []
        assert picture.requests == []
        assert "hand-made" in picture.texts()
        shot = picture.screenshot(tmp_path / "bars.png")
    assert shot.read_bytes().startswith(PNG)


def test_the_browser_counts_the_items_that_count_marks_counts_in_svg(browser: Browser,
                                                                      hand_made: Path):
    with browser.open(hand_made / "bars.html") as picture:
        in_page = picture.count("situation")
    assert in_page == count_marks((hand_made / "bars.svg").read_text(), "situation") == 5


def test_a_request_beyond_the_local_file_is_blocked_and_recorded(browser: Browser,
                                                                 hand_made: Path,
                                                                 tmp_path: Path):
    path = page_with(hand_made, tmp_path, '<img src="https://cdn.example.org/logo.png">')
    with browser.open(path) as picture:
        assert picture.requests == ["https://cdn.example.org/logo.png"]
        assert any("ERR_BLOCKED_BY_CLIENT" in error for error in picture.errors)


def test_console_errors_and_uncaught_exceptions_are_collected(browser: Browser,
                                                              hand_made: Path, tmp_path: Path):
    path = page_with(hand_made, tmp_path, "<script>console.error('said'); throw new Error('thrown')"
                               "</script>")
    with browser.open(path) as picture:
        assert [error.split(" (")[0] for error in picture.errors] == [
            "said", "uncaught Error: thrown"]


def test_a_page_that_draws_nothing_fails_with_what_its_console_said(browser: Browser,
                                                                    tmp_path: Path):
    path = tmp_path / "blank.html"
    path.write_text("<!DOCTYPE html><html><body><script src='https://cdn.example.org/vega.js'>"
                    "</script><script>vegaEmbed('#x', {})</script></body></html>")
    with pytest.raises(AssertionError, match="nothing drawn") as failure, \
            browser.open(path, timeout=1000):
        pass
    assert "vegaEmbed is not defined" in str(failure.value)
    assert "https://cdn.example.org/vega.js" in str(failure.value)


# --- the pictures of the bundled examples ------------------------------------------------------
# Each picture is drawn twice: as a page by the CLI in its own process, as a user runs it, and as
# SVG in this one. The browser's DOM must hold the marks the SVG holds, item for item.

EXAMPLES = REPO / "situflow" / "examples"
#: The aggressive-drivers input: 5 cars for 600 seconds, with 3 matches in 3 cars and 63
#: situations (the seed is chosen for a picture with a few of each).
CARS = {"events": 3_000, "cars": 5, "seed": 10}
#: The stock input: three symbols, one quote a minute each, for 24 minutes: 12 rising runs, and
#: every result under the caps of the drawing rule (situflow/timeline/limits.py).
STOCK_MINUTES = 24
#: Each bundled example and the input it runs on.
BUNDLED = {
    "aggressive_drivers.tps": "cars",
    "aggressive_drivers_edbt.tps": "cars",
    "speeding.tps": "cars",
    "rising_stocks.sase": "stocks",
    "rising_trends.cogra": "stocks",
    "downtrends.cogra": "stocks",
}


def stock_events(minutes: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """Quotes of three stocks in two sectors, one a minute each: prices on a random walk, the
    volume now and then above 1,000 (where a rising run of ``rising_stocks.sase`` starts)."""
    rng = random.Random(seed)
    price = dict.fromkeys(("ACME", "BOLT", "CORE"), 100.0)
    for minute in range(minutes):
        for symbol in price:
            price[symbol] = round(price[symbol] * (1 + rng.gauss(0, 0.01)), 2)
            volume = rng.randrange(1100, 3000) if rng.random() < 0.04 else rng.randrange(300, 1000)
            yield {"ts": minute * 60, "type": "Stock", "symbol": symbol, "company": symbol,
                   "sector": "energy" if symbol == "CORE" else "tech",
                   "price": price[symbol], "volume": volume}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The event files: ``cars``, ``stocks`` and ``calm`` (cars that never speed: no match)."""
    directory = tmp_path_factory.mktemp("inputs")
    write_cars(directory / "cars.jsonl", CARS["events"], CARS["cars"], CARS["seed"])
    (directory / "stocks.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in stock_events(STOCK_MINUTES)))
    (directory / "calm.jsonl").write_text("".join(
        json.dumps({"ts": t, "car_id": car, "speed": 50.0, "accel": 0.5}) + "\n"
        for t in range(60) for car in (1, 2)))
    return {path.stem: path for path in directory.iterdir()}


@dataclass(frozen=True)
class Drawn:
    """A picture as a page and as SVG, and the results of the run that drew it (if a run)."""

    page: Path
    svg: Path
    results: list[dict[str, Any]]


def situflow(*args: str | Path) -> None:
    """Run the situflow CLI in its own process, as a user does."""
    done = subprocess.run([sys.executable, "-m", "situflow.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr


def timeline(query: Path, events: Path, directory: Path) -> Drawn:
    """``situflow run QUERY --input EVENTS --timeline`` as a page and as SVG."""
    directory.mkdir(parents=True, exist_ok=True)
    page, svg, results = (directory / name for name in ("timeline.html", "timeline.svg",
                                                         "results.jsonl"))
    situflow("run", query, "--input", events, "--output", results, "--timeline", page)
    assert main(["run", str(query), "--input", str(events), "--output", os.devnull,
                 "--timeline", str(svg)]) == 0
    return Drawn(page, svg, [json.loads(line) for line in results.read_text().splitlines()])


def explanation(query: Path, directory: Path) -> Drawn:
    """``situflow explain QUERY`` as a page and as SVG."""
    directory.mkdir(parents=True, exist_ok=True)
    page, svg = directory / "explain.html", directory / "explain.svg"
    situflow("explain", query, "--output", page)
    assert main(["explain", str(query), "--output", str(svg)]) == 0
    return Drawn(page, svg, [])


@pytest.fixture(scope="module")
def timelines(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, Drawn]:
    """Every bundled example run with ``--timeline``, by query file name."""
    directory = tmp_path_factory.mktemp("timelines")
    return {name: timeline(EXAMPLES / name, inputs[events], directory / name)
            for name, events in BUNDLED.items()}


def svg_marks(svg: str) -> dict[str, int]:
    """The item count of every named Vega mark in an SVG document, by name (the structure
    ``situflow/timeline/page.py`` documents)."""
    counts: dict[str, int] = {}
    for group in ElementTree.fromstring(svg).iter(f"{SVG_NS}g"):
        classes = group.get("class", "").split()
        if "role-mark" in classes:
            for name in classes:
                if not name.startswith(("mark-", "role-")):
                    counts[name] = counts.get(name, 0) + len(group)
    return counts


def check_in_browser(browser: Browser, drawn: Drawn, screenshot: Path) -> None:
    """The page draws with no console error and no request, the same marks as the SVG, and
    its screenshot is written."""
    with browser.open(drawn.page) as picture:
        assert picture.errors == []
        assert picture.requests == []
        assert picture.marks() == svg_marks(drawn.svg.read_text())
        picture.screenshot(screenshot)


def picture_name(kind: str, query: str) -> str:
    """A screenshot's file name: ``timeline-rising-stocks.png`` for ``rising_stocks.sase``."""
    return f"{kind}-{Path(query).stem.replace('_', '-')}.png"


@pytest.mark.slow
@pytest.mark.parametrize("query", BUNDLED)
def test_every_bundled_example_s_timeline_draws_in_the_browser_as_in_its_svg(
        browser: Browser, timelines: dict[str, Drawn], screenshots: Path, query: str):
    check_in_browser(browser, timelines[query], screenshots / picture_name("timeline", query))


@pytest.mark.slow
@pytest.mark.parametrize("query", BUNDLED)
def test_every_bundled_example_s_explanation_draws_in_the_browser_as_in_its_svg(
        browser: Browser, screenshots: Path, tmp_path: Path, query: str):
    check_in_browser(browser, explanation(EXAMPLES / query, tmp_path),
                     screenshots / picture_name("explain", query))


def situations(query: Path) -> int:
    """How many situations the core's deriver finds in the aggressive-drivers input: those it
    finished, and those still open at the end."""
    deriver = SituationDeriver(tpstream.compile(query.read_text()))
    finished, running = 0, set()
    for batch in car_batches(CARS["events"], CARS["cars"], 1_000, CARS["seed"]):
        for record in deriver.process(batch):
            if record.kind == STARTED:
                running.add((record.key, record.situation))
            elif record.kind == FINISHED:
                running.discard((record.key, record.situation))
                finished += 1
    return finished + len(running)


@pytest.mark.slow
def test_the_aggressive_drivers_page_has_one_bar_per_situation_and_one_bracket_per_match(
        browser: Browser, timelines: dict[str, Drawn]):
    drawn = timelines["aggressive_drivers.tps"]
    assert len(drawn.results) == 3
    with browser.open(drawn.page) as picture:
        assert picture.count("match") == len(drawn.results)
        assert picture.count("situation") == situations(EXAMPLES / "aggressive_drivers.tps") == 63


@pytest.mark.slow
def test_the_rising_stocks_page_has_one_mark_per_selected_event_and_one_line_per_match(
        browser: Browser, timelines: dict[str, Drawn]):
    drawn = timelines["rising_stocks.sase"]
    with browser.open(drawn.page) as picture:
        assert picture.count("match") == len(drawn.results) > 0
        assert picture.count("event") == sum(len(events) for r in drawn.results
                                             for events in r["bindings"].values())


@pytest.mark.slow
@pytest.mark.parametrize("query", ["rising_trends.cogra", "downtrends.cogra"])
def test_a_trends_page_has_one_bar_per_result_row(browser: Browser,
                                                  timelines: dict[str, Drawn], query: str):
    drawn = timelines[query]
    with browser.open(drawn.page) as picture:
        assert picture.count("window") == len(drawn.results) > 0


@pytest.mark.slow
def test_an_empty_result_draws_a_page_that_says_so(browser: Browser, inputs: dict[str, Path],
                                                  screenshots: Path, tmp_path: Path):
    drawn = timeline(EXAMPLES / "aggressive_drivers.tps", inputs["calm"], tmp_path)
    assert drawn.results == []
    check_in_browser(browser, drawn, screenshots / "timeline-empty.png")
    with browser.open(drawn.page) as picture:
        assert picture.count("situation") == picture.count("match") == 0
        assert any("no matches" in text for text in picture.texts())
