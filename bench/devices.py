"""Every device benchmark of issue 17 in one run (thesis chapter 4; bench/README.md, "Devices").

Each part prints the OpenCL device it ran on, events/s of its four implementations
(single-threaded CPU, multi-threaded CPU, OpenCL dispatch, OpenCL zero-copy) per batch or window
size, their ratios to single-threaded and the crossover size:

- the filter (§4.3.2), batches of 2^8 … 2^20 events: ``bench/devices_filter.py``;
- windowed aggregation (§4.3.3) and the windowed join (§4.3.4), windows of 2^8 … 2^20
  events: ``bench/devices_windows.py``;
- cooperative pattern matching (§4.3.5), Exp 1 (``(A, B)`` skip-till-any, windows 2^10 …
  2^17) and Exp 2 (2 … 8 symbols at window 2^16): ``bench/devices_patterns.py``.

    PYTHONPATH=. .venv/bin/python bench/devices.py [--quick]

``--quick`` runs the smaller sizes only (a few minutes); each part also runs on its own, with
its own options.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import devices_filter
import devices_patterns
import devices_windows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 2^14 only")
    args = parser.parse_args(argv)
    largest = 14 if args.quick else 20
    parts = [
        ("filter", devices_filter.main, ["--sizes", "8", str(largest)]),
        ("windows and join", devices_windows.main, ["--max-exp", str(largest)]),
        ("pattern matching, Exp 1", devices_patterns.main,
         ["--exp", "1", "--largest", str(min(largest, 17))]),
        ("pattern matching, Exp 2", devices_patterns.main, ["--exp", "2"]),
    ]
    for title, run, options in parts:
        print(f"\n=== {title} ===", flush=True)
        if run(options):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
