"""The ``--timeline FILE.html|FILE.svg`` option of ``situflow run`` and ``situflow offline``:
its help (which states the rule of :mod:`situflow.timeline.limits`), the check made before a
run, and the drawing after it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from situflow.errors import SituflowError
from situflow.timeline import Timeline
from situflow.timeline.limits import LIMITS

#: What a timeline draws of a large result, for ``--help``.
RULE = (f"It draws at most {LIMITS.keys} keys (those with results first) and, per key, the last "
        f"{LIMITS.results} matches (each with at most {LIMITS.events} of its events) or "
        f"{LIMITS.windows} windows and the last {LIMITS.situations} finished situations; what "
        "it leaves out is counted in the picture and on standard error.")


def add_timeline_option(p: argparse.ArgumentParser, more: str = "") -> None:
    """Add ``--timeline FILE`` to a command's arguments; ``more`` ends its help."""
    p.add_argument("--timeline", type=Path, metavar="FILE.html|FILE.svg",
                   help="after the run, draw its results there: a self-contained page or an SVG "
                        f"(needs the timeline extra). {RULE} {more}".rstrip())


def picture_refused(path: Path, option: str) -> SituflowError | None:
    """Why no picture can be drawn into ``path``, the file of ``option`` (``--timeline``,
    ``--output``), said on standard error; None if one can. A command checks before its run,
    not after: a file name of no picture format, or the timeline extra missing."""
    from situflow.timeline.page import PictureFormatError, check_picture

    try:
        check_picture(path)
    except PictureFormatError as e:
        print(f"situflow: {option} FILE {e}", file=sys.stderr)
        return e
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return e
    return None


def timeline_checked(path: Path | None) -> bool:
    """Whether ``--timeline`` can be written (True without it); if not, why on standard
    error."""
    return path is None or picture_refused(path, "--timeline") is None


def write_timeline(timeline: Timeline, path: Path, name: str) -> None:
    """Draw a recorded timeline into ``path``; its notes (what it leaves out) go to standard
    error too."""
    from situflow.timeline.page import write_picture

    picture = timeline.picture()
    for note in picture.notes:
        print(f"situflow: timeline: {note}", file=sys.stderr)
    write_picture(picture.chart, path, title=f"situflow timeline: {name}")
