"""The ``situflow`` command line (CLI contract in ARCHITECTURE.md).

    situflow run QUERY_FILE --input EVENTS.jsonl|EVENTS.parquet|EVENTS.arrow|- [--output RESULTS.jsonl]
                 [--input-format jsonl|parquet|arrow] [--timeline FILE.html|FILE.svg]
    situflow check QUERY_FILE
    situflow explain QUERY_FILE [--output PICTURE.html|PICTURE.svg]
    situflow demo [--events N] [--cars N]
    situflow devices
    situflow query submit|list|delete ...   (Kafka: workers/cli.py)
    situflow topics create ...               (Kafka: workers/cli.py)

Query errors print ``QUERY_FILE:line:col: message`` with the line and a caret, exit code 2.
Bad input lines are reported with their line number and skipped (a count at the end), unless
``--strict``, which stops at the first with exit code 1. Parquet and Arrow IPC inputs
(:mod:`situflow.io.columnar`) follow the same rules, with the 1-based row number for the line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from situflow import jit
from situflow.devices.discovery import DeviceUnavailable
from situflow.errors import EXIT_INPUT, EXIT_QUERY, InputError, QueryError
from situflow.event_types import carried, conform
from situflow.events import EventBatch
from situflow.io.columnar import FORMATS, ColumnarFile, input_format, open_columnar, read_columnar
from situflow.io.jsonl import STDIN, STDIN_NAME, Block, Fields, read_blocks
from situflow.io.pandas_probe import skip_pandas_probe
from situflow.lang.attributes import AttributeTypes
from situflow.languages import compile_query
from situflow.operator import CompiledQuery, QueryOptions, Result
from situflow.timeline import timeline_for
from situflow.timeline.option import add_timeline_option, timeline_checked, write_timeline

DEVICES = ("cpu", "opencl", "auto")
#: Inputs smaller than this (about 2,000 events of 60 bytes) run the numba kernels as Python:
#: importing numba and loading its cached kernels costs more CPU (0.3-0.5 s) than interpreting
#: them over so few events (2 µs per event for TPStream derivation, up to 0.4 ms for an NFA^b
#: with many live runs).
INTERPRET_BELOW = 128 << 10
#: The same bound for Parquet and Arrow inputs, in rows (about 64 bytes of JSON each).
INTERPRET_ROWS_BELOW = INTERPRET_BELOW // 64
#: The languages whose operators always run numba kernels (SASE+ runs them for some queries):
#: for these, numba loads while the first block is parsed.
KERNEL_LANGUAGES = ("tpstream", "cogra")
KAFKA_COMMANDS = ("query", "topics", "serve", "status")
#: The commands no plug-in adds to or changes (the Kafka one changes ``demo``).
PLUGIN_FREE = ("run", "check", "explain", "devices")
#: Entry point group of the packages that add commands: ``register(subparsers)`` each.
COMMAND_PLUGINS = "situflow.commands"


def main(argv: list[str] | None = None) -> int:
    args = _parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    try:
        return int(args.command(args))
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="situflow", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="evaluate a query over a file of events")
    run.add_argument("query", type=Path, metavar="QUERY_FILE")
    run.add_argument("--input", "-i", type=Path, required=True, metavar="EVENTS",
                     help="JSON lines, Parquet (.parquet) or Arrow IPC (.arrow, .arrows); "
                          "- reads JSON lines from standard input")
    run.add_argument("--input-format", choices=FORMATS,
                     help="the input's format (default: by its suffix; JSON lines otherwise)")
    run.add_argument("--output", "-o", type=Path, metavar="RESULTS.jsonl",
                     help="write results here instead of standard output")
    _add_stream_options(run)
    run.add_argument("--device", choices=DEVICES,
                     default=os.environ.get("SITUFLOW_DEVICE", "cpu"),
                     help="kernel backend (results are identical on every device)")
    run.add_argument("--strict", action="store_true", help="stop at the first bad input line")
    run.add_argument("--rejected", type=Path, metavar="REJECTED.jsonl",
                     help='write every skipped input line here: {"line": N, "reason": "..."}')
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show a progress bar on standard error (default: when it is a terminal)")
    add_timeline_option(run)
    run.set_defaults(command=_run)

    check = sub.add_parser("check", help="parse and validate a query, print its plan")
    check.add_argument("query", type=Path, metavar="QUERY_FILE")
    _add_stream_options(check)
    check.set_defaults(command=_check)

    explain = sub.add_parser("explain", help="draw a query's structure (HTML or SVG)")
    explain.add_argument("query", type=Path, metavar="QUERY_FILE")
    explain.add_argument("--output", "-o", type=Path, metavar="PICTURE.html|PICTURE.svg",
                         help="where to write the picture (default: the query file's name "
                              "with .html, in the working directory)")
    _add_stream_options(explain)
    explain.set_defaults(command=_explain)

    demo = sub.add_parser("demo", help="the aggressive-drivers query over a generated stream")
    demo.add_argument("--events", type=int, default=1_000_000)
    demo.add_argument("--cars", type=int, default=2_000)
    demo.add_argument("--show", type=int, default=20, help="print at most this many results")
    demo.set_defaults(command=_demo)

    devices = sub.add_parser("devices", help="list the OpenCL devices and which one --device uses")
    devices.set_defaults(command=_devices)
    if _may_need_plugins(argv):
        _add_kafka_commands(sub)
    return parser


def _may_need_plugins(argv: list[str]) -> bool:
    """Whether ``argv`` may run or list (``--help``) a command of a plug-in: loading them
    imports the Kafka and Spark layers, a quarter of a second ``situflow run`` does not need."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command not in PLUGIN_FREE


def _add_kafka_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands of installed plug-ins (entry point group :data:`COMMAND_PLUGINS`): the Kafka
    commands of ``workers/cli.py``, which the core does not import (no Kafka in it)."""
    from importlib.metadata import entry_points

    for plugin in entry_points(group=COMMAND_PLUGINS):
        plugin.load()(sub)
    for name in KAFKA_COMMANDS:
        if name not in sub.choices:
            stub = sub.add_parser(name, help="(needs the situflow repository or image)")
            stub.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            stub.set_defaults(command=_needs_workers)


def _needs_workers(args: argparse.Namespace) -> int:
    print("situflow: no installed package provides this command (entry point group "
          f"{COMMAND_PLUGINS}); install situflow with the kafka extra: pip install -e '.[kafka]'",
          file=sys.stderr)
    return EXIT_INPUT


def _add_stream_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-field", default="ts", help="event-time field (default: ts)")
    p.add_argument("--type-field", default="type", help="event-type field (default: type)")
    p.add_argument("--time-unit", type=float, default=1.0, metavar="SECONDS",
                   help="seconds per event-time tick (default: 1; 0.001 for milliseconds)")
    p.add_argument("--name", help="query name in results (default: the file name)")


def _compile(args: argparse.Namespace) -> tuple[CompiledQuery | None, int]:
    try:
        text = args.query.read_text(encoding="utf-8")
    except OSError as e:
        print(f"situflow: cannot read {args.query}: {e.strerror}", file=sys.stderr)
        return None, EXIT_QUERY
    except UnicodeDecodeError as e:
        print(f"situflow: {args.query}: not UTF-8 text (byte {e.start})", file=sys.stderr)
        return None, EXIT_QUERY
    device = getattr(args, "device", "cpu")
    if device not in DEVICES:  # SITUFLOW_DEVICE is the default, which argparse does not check
        print(f"situflow: SITUFLOW_DEVICE must be one of {', '.join(DEVICES)}, not {device!r}",
              file=sys.stderr)
        return None, EXIT_INPUT
    options = QueryOptions(name=args.name or args.query.stem, time_unit=args.time_unit,
                           type_field=args.type_field, device=device)
    try:
        return compile_query(text, options), 0
    except QueryError as e:
        print(e.render(str(args.query), text), file=sys.stderr)
        return None, EXIT_QUERY
    except DeviceUnavailable as e:
        print(f"situflow: --device opencl: {e}", file=sys.stderr)
        return None, EXIT_INPUT


def _check(args: argparse.Namespace) -> int:
    compiled, code = _compile(args)
    if compiled is None:
        return code
    print(f"-- {compiled.language} query {compiled.query_id}")
    print(compiled.describe())
    return 0


def _devices(args: argparse.Namespace) -> int:
    from situflow.devices.command import show_devices

    return show_devices()


def _explain(args: argparse.Namespace) -> int:
    from situflow.timeline.option import picture_refused
    from situflow.timeline.page import PictureFormatError

    output = args.output or Path(args.query.stem + ".html")
    refused = picture_refused(output, "--output")
    if refused is not None:
        return EXIT_QUERY if isinstance(refused, PictureFormatError) else EXIT_INPUT
    compiled, code = _compile(args)
    if compiled is None:
        return code
    # Imported here: the plotting libraries load only when a picture is asked for.
    from situflow.timeline.explain import write_explanation

    try:
        write_explanation(compiled, output)
    except OSError as e:
        print(f"situflow: cannot write {output}: {e.strerror}", file=sys.stderr)
        return EXIT_INPUT
    print(f"situflow: wrote {output}", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    if not timeline_checked(args.timeline):
        return EXIT_INPUT
    compiled, code = _compile(args)
    if compiled is None:
        return code
    fields = Fields(args.time_field, args.type_field, "id", args.time_unit)
    opened = _open_input(args)
    if opened is None:
        return EXIT_INPUT
    skip_pandas_probe()
    if isinstance(opened, ColumnarFile):
        total = opened.size
        small = opened.rows is not None and opened.rows < INTERPRET_ROWS_BELOW
    else:
        total = opened
        small = total < INTERPRET_BELOW and str(args.input) != STDIN
    if not small and compiled.language in KERNEL_LANGUAGES:
        jit.compile_in_background()
    with jit.interpreted(small):
        blocks = (read_columnar(opened, fields) if isinstance(opened, ColumnarFile)
                  else read_blocks(args.input, fields))
        return _evaluate(args, compiled, fields, blocks, total)


def _open_input(args: argparse.Namespace) -> ColumnarFile | int | None:
    """The columnar input opened, or the size of a JSON-lines one in bytes (0 for standard
    input); None, the reason printed, if it cannot be read."""
    fmt = input_format(args.input, args.input_format)
    if str(args.input) == STDIN:
        if fmt != "jsonl":
            print(f"situflow: standard input is read as JSON lines, not {fmt}: give a file",
                  file=sys.stderr)
            return None
        return 0
    try:
        return open_columnar(args.input, fmt) if fmt != "jsonl" else args.input.stat().st_size
    except OSError as e:
        print(f"situflow: cannot read {args.input}: {e.strerror}", file=sys.stderr)
    except InputError as e:
        print(f"situflow: {e}", file=sys.stderr)
    return None


def _evaluate(args: argparse.Namespace, compiled: CompiledQuery, fields: Fields,
              blocks: Iterable[Block], total: int) -> int:
    """``situflow run`` once the query compiled and the input is open: the results, the
    rejections and the timeline."""
    show = sys.stderr.isatty() if args.progress is None else args.progress
    progress = Progress(total, "bytes") if show else None
    out: IO[str] = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115
    op = compiled.operator()
    types = compiled.attribute_types.without({fields.time, fields.type, fields.id})
    rejections = Rejections(open(args.rejected, "w") if args.rejected else None)  # noqa: SIM115
    unseen = set(types.used)
    timeline = timeline_for(compiled) if args.timeline else None
    try:
        source = STDIN_NAME if str(args.input) == STDIN else str(args.input)
        stream = _ordered(_typed(blocks, types, unseen, source), source)
        for batch, errors, read in stream:
            if errors and args.strict:
                print(f"situflow: {min(errors, key=lambda e: e.position or 0)}", file=sys.stderr)
                return EXIT_INPUT
            rejections.add(errors)
            results = op.process(batch)
            write_results(results, out)
            if timeline:
                timeline.add(batch, results)
            if progress:
                progress.advance(read)
        results = op.finish()
        write_results(results, out)
        if timeline:
            timeline.add(None, results)
    except InputError as e:  # a file that stops being readable part of the way through
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    finally:
        rejections.close()
        if progress:
            progress.close()
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()
    rejections.summary()
    for name in sorted(unseen):
        print(f"situflow: warning: the query uses attribute '{name}', which no event carried "
              "(a typo?)", file=sys.stderr)
    if timeline:
        write_timeline(timeline, args.timeline, compiled.name)
    return 0


class Rejections:
    """Bad input lines: the first few reported one by one, all counted by reason, and every
    one written to ``log`` if given (nothing is lost silently)."""

    SHOWN = 10

    def __init__(self, log: IO[str] | None = None):
        self.log = log
        self.count = 0
        self.by_reason: Counter[str] = Counter()

    def add(self, errors: list[InputError]) -> None:
        for error in sorted(errors, key=lambda e: e.position or 0):
            self.count += 1
            if self.count <= self.SHOWN:
                print(f"situflow: skipped {error}", file=sys.stderr)
            self.by_reason[_reason_kind(error.reason)] += 1
            if self.log is not None:
                self.log.write(json.dumps({"line": error.position, "reason": error.reason}) + "\n")

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    def summary(self) -> None:
        if not self.count:
            return
        print(f"situflow: {self.count} bad input line(s) skipped, by reason:", file=sys.stderr)
        for reason, count in self.by_reason.most_common():
            print(f"  {count:>8}  {reason}", file=sys.stderr)


def _reason_kind(reason: str) -> str:
    """A reason without the values that differ from line to line (numbers, quoted text)."""
    reason = re.sub(r"(text|ISO-8601 text:) '.*'", r"\1 '…'", reason)
    return re.sub(r"(?<![\w-])-?\d+(\.\d+)?(e[+-]?\d+)?(?![\w-])", "N", reason)


Checked = tuple[EventBatch, list[InputError], int]


def _typed(blocks: Iterable[Block], types: AttributeTypes, unseen: set[str],
           source: str) -> Iterator[Checked]:
    """Each block's events that follow the typing rule, with the errors of the others, and the
    bytes read; the attributes the events carry are removed from ``unseen``. Typing comes
    before the time order: a rejected event is as if it had never been there (SEMANTICS.md,
    "Event time and types"), so its time cannot make the next events late."""
    for block in blocks:
        if unseen:
            unseen -= carried(block.batch, unseen)
        conformed = conform(block.batch, types)
        errors = block.errors + [InputError(reason, source, seq + 1)
                                 for seq, reason in conformed.rejected]
        yield conformed.batch, errors, block.bytes_read


def _ordered(blocks: Iterable[Checked], source: str) -> Iterator[Checked]:
    """Drop events whose time goes backwards: the file must be in event-time order."""
    last = np.iinfo(np.int64).min
    for batch, errors, read in blocks:
        if len(batch):
            running = np.maximum.accumulate(np.concatenate(([last], batch.ts)))[:-1]
            late = np.flatnonzero(batch.ts < running)
            if len(late):
                errors += [InputError(f"event time {batch.ts[i]} is earlier than {running[i]}; "
                                      "the input must be ordered by time", source,
                                      int(batch.seq[i]) + 1) for i in late]
                errors.sort(key=lambda e: e.position or 0)
                batch = batch.take(np.flatnonzero(batch.ts >= running))
            if len(batch):
                last = max(last, int(batch.ts.max()))
        yield batch, errors, read


def write_results(results: Iterable[Result], out: IO[str]) -> None:
    for r in results:
        out.write(json.dumps(r.to_dict()) + "\n")


def _demo(args: argparse.Namespace) -> int:
    from situflow.datagen.cars import car_batches

    path = Path(__file__).parent / "examples" / "aggressive_drivers.tps"
    text = path.read_text()
    print(text, file=sys.stderr)
    compiled = compile_query(text, QueryOptions(name="aggressive_drivers"))
    op = compiled.operator()
    progress = Progress(args.events, "events")
    found = 0
    started = time.perf_counter()
    for batch in car_batches(args.events, args.cars, batch_size=50_000):
        for result in op.process(batch):
            found += 1
            if found <= args.show:
                progress.clear()
                print(json.dumps(result.to_dict()))
        progress.advance(len(batch))
    progress.close()
    elapsed = time.perf_counter() - started
    print(f"{found} aggressive drivers found in {args.events:,} events from {args.cars:,} cars "
          f"({args.events / elapsed:,.0f} events/s)", file=sys.stderr)
    return 0


class Progress:
    """A one-line progress bar on standard error."""

    def __init__(self, total: int, unit: str):
        self.total, self.unit, self.done = max(total, 1), unit, 0
        self.started = self.shown = time.perf_counter()

    def advance(self, amount: int) -> None:
        self.done += amount
        now = time.perf_counter()
        if now - self.shown >= 0.1 or self.done >= self.total:
            self.shown = now
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 30)
            rate = self.done / max(now - self.started, 1e-9)
            sys.stderr.write(f"\r[{bar:<30}] {share:6.1%} {rate:,.0f} {self.unit}/s ")
            sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r" + " " * 70 + "\r")

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
