"""What can be wrong with an archive, said with the files and seq ranges involved.

:func:`check_topic` reads every segment's footer (not its rows) and finds: a truncated or
corrupt segment (no Parquet footer, or fewer rows than its metadata says), a gap in the seq
between consecutive segments (or before the first), schema drift (an attribute that is a
number in one segment and a string in another: both files named), an attribute the query needs
that no segment has, and a time range without data. Gaps are errors unless allowed: then they
come back as warnings that list them, and the offline job proceeds past them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from situflow.archive.format import ArchiveError, drift, field_kind, segment_name

if TYPE_CHECKING:
    from situflow.archive.location import Archive


def check_topic(archive: Archive, topic: str, *, allow_gaps: bool = False,
                attributes: Sequence[str] = (), lo: int | None = None,
                hi: int | None = None) -> list[str]:
    """Check every segment of ``topic``; the warnings (allowed gaps, segments without a block
    index), or ``ArchiveError`` for the first problem (module doc)."""
    partitions = archive.partitions(topic)
    if not partitions:
        raise ArchiveError(f"{archive.path(topic)}: no data: the archive has no segments of "
                           f"topic {topic!r} (topics: {', '.join(archive.topics()) or 'none'})")
    warnings, gaps = [], []
    kinds: dict[str, tuple[str, str]] = {}  # attribute -> (kind, first segment with it)
    spans = []
    for partition in partitions:
        expected, previous = 0, "the start of the partition"
        for segment in archive.segments(topic, partition):
            meta = segment.meta
            footer = archive.parquet_file(segment.path).metadata
            if footer.num_rows != meta.rows or footer.num_row_groups != len(segment.blocks):
                raise ArchiveError(
                    f"{segment.path} (seq {meta.first_seq}..{meta.next_seq - 1}): holds "
                    f"{footer.num_rows} rows in {footer.num_row_groups} row groups, its "
                    f"metadata and block index say {meta.rows} in {len(segment.blocks)}: a "
                    "corrupt segment or a block index of another one (delete the "
                    ".blocks.json and run `situflow index blocks`)")
            if segment.name != segment_name(meta.first_seq):
                raise ArchiveError(f"{segment.path}: holds seq {meta.first_seq}.."
                                   f"{meta.next_seq - 1}, but its name says it starts at "
                                   f"another seq: a renamed or copied segment")
            if meta.first_seq != expected:
                gap = (f"{topic}[{partition}]: seq {expected}..{meta.first_seq - 1} missing "
                       f"between {previous} and {segment.path}")
                if meta.first_seq < expected:
                    raise ArchiveError(f"{segment.path}: starts at seq {meta.first_seq}, inside "
                                       f"{previous} (seq up to {expected - 1}): overlapping "
                                       "segments")
                gaps.append(gap)
            expected, previous = meta.next_seq, segment.path
            for field in archive.parquet_file(segment.path).schema_arrow:
                kind = field_kind(field)
                first = kinds.setdefault(field.name, (kind, segment.path))
                if drift(kind, first[0]):
                    raise ArchiveError(
                        f"schema drift in {topic}: attribute {field.name!r} is a {first[0]} in "
                        f"{first[1]} but a {kind} in {segment.path} (seq from "
                        f"{meta.first_seq}); re-import one of them with the attribute "
                        "converted")
            if not segment.indexed:
                warnings.append(f"{segment.path}: no block index (run `situflow index blocks`)")
            spans += [(b.ts_min, b.ts_max) for b in segment.blocks]
    if gaps and not allow_gaps:
        raise ArchiveError("gaps in the archive's seq (restore the missing segments, or "
                           "proceed past them with the allow-gaps flag):\n  " + "\n  ".join(gaps))
    missing = [a for a in attributes if a not in kinds]
    if missing:
        raise ArchiveError(f"{archive.path(topic)}: no segment has attribute(s) "
                           f"{', '.join(map(repr, missing))} (attributes: "
                           f"{', '.join(sorted(kinds))})")
    if (lo is not None or hi is not None) and not any(
            (lo is None or t_max >= lo) and (hi is None or t_min <= hi) for t_min, t_max in spans):
        extent = (f"{min(s[0] for s in spans)}..{max(s[1] for s in spans)}" if spans
                  else "nothing")
        raise ArchiveError(f"{archive.path(topic)}: no data in the range "
                           f"{'' if lo is None else lo}..{'' if hi is None else hi}: the archive "
                           f"spans {extent}")
    return [*(f"gap: {g}" for g in gaps), *warnings]
