"""The entry point for ``spark-submit``: ``spark-submit batch/submit.py QUERY --archive URI
--stream NAME ...`` (or ``python -m batch.submit``) takes the arguments of ``situflow offline``.
Apart from batch/cli.py so that the offline job does not import the command line back."""

from __future__ import annotations

import sys

from batch.cli import offline_parser


def main(argv: list[str] | None = None) -> int:
    args = offline_parser().parse_args(argv)
    return int(args.command(args))


if __name__ == "__main__":
    sys.exit(main())
