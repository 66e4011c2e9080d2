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

import pyarrow as pa

from situflow.archive.format import segment_name
from situflow.codecs.arrow_events import is_json_text
from situflow.errors import SituflowError

if TYPE_CHECKING:
    from situflow.archive.location import Archive


class ArchiveError(SituflowError):
    """An archive that cannot be read as it is: a truncated or corrupt segment, a gap in the
    seq, an attribute with two types, an attribute or a range without data. The message names
    the files and seq ranges and says what to do."""


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


def field_kind(field: pa.Field) -> str:
    """:func:`attribute_kind` of a column, "json" for JSON text (values of any JSON type, as
    K-slack and the import hold values that share no Arrow type)."""
    return "json" if is_json_text(field) else attribute_kind(field.type)


def drift(kind: str, other: str) -> bool:
    """Whether an attribute of ``kind`` in one segment and ``other`` in another is schema drift
    (a missing or a JSON-text column combines with any)."""
    return kind != other and not {"null", "json"} & {kind, other}


def attribute_kind(kind: pa.DataType) -> str:
    """The kind of a Parquet column's type; two kinds of one attribute are schema drift
    (integers and floats mix: both are numbers)."""
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_null(kind):
        return "null"
    return str(kind)
