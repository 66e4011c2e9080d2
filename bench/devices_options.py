"""What the device benchmarks' command lines share (``bench/devices_*.py``): a parser whose
description is the first paragraph of the benchmark's docstring, and the OpenCL device the
benchmark runs on, said on standard output first."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from situflow.devices import DeviceUnavailable, open_device
from situflow.devices.device import Device


def parse(doc: str | None, argv: list[str] | None,
          options: Callable[[argparse.ArgumentParser], None]) -> argparse.Namespace:
    """``argv`` (None: the command line) parsed with the ``options`` a benchmark adds."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    options(parser)
    return parser.parse_args(argv)


def opencl(without: str = "") -> Device | None:
    """The OpenCL device, named on standard output; None if there is none, said with
    ``without`` (what the benchmark does then)."""
    try:
        device = open_device("opencl")
    except DeviceUnavailable as e:
        print(f"no OpenCL device: {e}{without}")
        return None
    print(f"device: {device.info.describe()}")
    return device
