"""Headless Chromium for the picture tests: a local page opened with the network off.

The pictures of ``situflow run --timeline`` and ``situflow explain`` must open from disk on a
machine with no network (issue 18). :class:`Browser` opens such a page in Debian's Chromium
(``make tools`` installs it; Playwright drives it and downloads no browser of its own) and
hands back a :class:`Picture` once Vega has drawn it:

* every request for anything but a ``file:`` URL is blocked and recorded
  (:attr:`Picture.requests`), and the browser context is offline besides, so a page that
  reaches for a CDN fails the test instead of drawing nothing in a closed network;
* the console's errors and the page's uncaught exceptions are collected
  (:attr:`Picture.errors`);
* the items of a named Vega mark are counted in the live DOM (:meth:`Picture.count`), with
  the structure ``situflow/timeline/page.py`` documents and its ``count_marks`` counts in SVG:
  every ``<g>`` whose class holds ``role-mark`` and the mark's name holds one child element
  per item;
* a screenshot of the drawn picture is written as PNG (:meth:`Picture.screenshot`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from playwright.sync_api import (
    BrowserContext,
    ConsoleMessage,
    Error,
    Page,
    Playwright,
    Route,
    WebSocketRoute,
    sync_playwright,
)

#: Chromium's flags for a headless run on a machine with a closed network. Without the
#: background-networking ones Chromium keeps trying Google's hosts (update checks, sync, field
#: trials) and its refused connections flood the log; the sandbox needs privileges a test run as
#: root or in a container lacks. Playwright adds ``--headless`` itself, and the new empty
#: profile is the ``user_data_dir`` of :class:`Browser`.
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: What Vega's SVG renderer has put in the page once it has drawn: the marks' containers. It
#: draws the whole scene in one pass, so once one is there every item is.
DRAWN = "svg g.role-mark"

#: The white margin around a screenshot (pixels), so text that ends at the picture's edge is
#: not cut by the crop.
MARGIN = 8

#: How long Vega may take to draw a picture (milliseconds); a page that draws nothing fails
#: with what its console said.
DRAW_TIMEOUT = 20_000


class Browser:
    """Debian's Chromium, headless, with a new profile in ``profile``; a context manager that
    stops the browser on exit."""

    def __init__(self, executable: str, profile: Path):
        self.executable = executable
        self.profile = profile
        self._playwright: Playwright | None = None
        self._context: BrowserContext | None = None

    def __enter__(self) -> Browser:
        self._playwright = sync_playwright().start()
        self._context = self._playwright.chromium.launch_persistent_context(
            str(self.profile), executable_path=self.executable, headless=True, args=list(FLAGS),
            offline=True, service_workers="block", viewport={"width": 1280, "height": 900})
        return self

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._context is not None:
            self._context.close()
        if self._playwright is not None:
            self._playwright.stop()

    @contextmanager
    def open(self, path: Path, *, timeout: float = DRAW_TIMEOUT) -> Iterator[Picture]:
        """The picture in the local file ``path``, once drawn; its page closes on exit.

        Raises ``AssertionError`` with the console's errors when nothing is drawn within
        ``timeout`` milliseconds.
        """
        assert self._context is not None, "open() needs the browser started (with Browser(...))"
        page = self._context.new_page()
        picture = Picture(page)
        page.route("**/*", picture._only_files)
        page.route_web_socket("**/*", picture._no_sockets)
        page.on("console", picture._console)
        page.on("pageerror", picture._uncaught)
        try:
            page.goto(path.resolve().as_uri())
            try:
                page.wait_for_selector(DRAWN, state="attached", timeout=timeout)
            except Error as e:
                raise AssertionError(f"{path}: nothing drawn ({e.message.splitlines()[0]}); "
                                     f"console errors: {picture.errors}; "
                                     f"blocked requests: {picture.requests}") from None
            yield picture
        finally:
            page.close()


class Picture:
    """A page whose picture Vega has drawn, and what the page did on the way."""

    def __init__(self, page: Page):
        self.page = page
        #: The console's error messages and the page's uncaught exceptions, in order.
        self.errors: list[str] = []
        #: The URLs the page asked for that are not local files (each one was blocked).
        self.requests: list[str] = []

    def count(self, mark: str) -> int:
        """The number of items of the Vega mark named ``mark`` in the page's DOM."""
        count: int = self.page.evaluate(
            "mark => document.querySelectorAll(`g.role-mark.${CSS.escape(mark)} > *`).length",
            mark)
        return count

    def marks(self) -> dict[str, int]:
        """The item count of every named Vega mark in the page's DOM, by name."""
        marks: dict[str, int] = self.page.evaluate("""() => {
            const counts = {};
            for (const group of document.querySelectorAll('g.role-mark')) {
                for (const name of group.classList) {
                    if (!name.startsWith('mark-') && !name.startsWith('role-')) {
                        counts[name] = (counts[name] || 0) + group.childElementCount;
                    }
                }
            }
            return counts;
        }""")
        return marks

    def texts(self) -> list[str]:
        """The text of every text element of the drawn picture (titles, labels, notes)."""
        texts: list[str] = self.page.evaluate(
            "() => [...document.querySelectorAll('svg text')].map(t => t.textContent)")
        return texts

    def screenshot(self, path: Path) -> Path:
        """Write a PNG of the drawn picture (the SVG element with a small white margin, not
        the empty page around it) to ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        box = self.page.locator(f"svg:has({DRAWN.removeprefix('svg ')})").first.bounding_box()
        assert box is not None, "the picture's SVG element is not displayed"
        x, y = max(0.0, box["x"] - MARGIN), max(0.0, box["y"] - MARGIN)
        self.page.screenshot(path=str(path), full_page=True, animations="disabled", clip={
            "x": x, "y": y, "width": box["x"] + box["width"] + MARGIN - x,
            "height": box["y"] + box["height"] + MARGIN - y})
        return path

    def _only_files(self, route: Route) -> None:
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            self.requests.append(url)
            route.abort("blockedbyclient")

    def _no_sockets(self, socket: WebSocketRoute) -> None:
        self.requests.append(socket.url)
        socket.close()

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location
            self.errors.append(f"{message.text} ({where.get('url', '?')}:{where.get('lineNumber')})")

    def _uncaught(self, error: Error) -> None:
        self.errors.append(f"uncaught {error.name}: {error.message}")
