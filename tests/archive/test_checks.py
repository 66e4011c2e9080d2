"""Bad archives get errors that name the files and seq ranges involved, never fewer rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from situflow.archive import ArchiveError, check_topic, open_archive
from situflow.archive.blocks import sidecar_name
from tests.archive.archives import write_partition

TOPIC = "cars.ordered"


def three_segments(root: Path) -> list[Path]:
    """Segments of seq 0-3, 4-7 and 8-11 with times 0..11."""
    return write_partition(root, TOPIC, 0, [[{"ts": t, "speed": t} for t in range(s, s + 4)]
                                            for s in (0, 4, 8)], block_rows=2)


def test_a_sound_archive_passes(tmp_path: Path) -> None:
    three_segments(tmp_path)
    assert check_topic(open_archive(tmp_path), TOPIC, attributes=["speed"], lo=3, hi=5) == []


def test_a_truncated_segment_is_named_with_its_seq_range(tmp_path: Path) -> None:
    middle = three_segments(tmp_path)[1]
    middle.write_bytes(middle.read_bytes()[:-100])
    archive = open_archive(tmp_path)
    with pytest.raises(ArchiveError, match=rf"{middle} \(seq from 4\): truncated or corrupt"):
        check_topic(archive, TOPIC)
    with pytest.raises(ArchiveError, match=rf"{middle} \(seq from 4\).*truncated or corrupt"):
        archive.read(TOPIC, 0, 5, 6)
    assert archive.read(TOPIC, 0, 9, 11).num_rows == 3  # the other segments stay readable


def test_a_segment_that_is_no_parquet_and_has_no_sidecar_is_named(tmp_path: Path) -> None:
    last = three_segments(tmp_path)[2]
    last.write_bytes(b"garbage")
    (last.parent / sidecar_name(last.name)).unlink()
    with pytest.raises(ArchiveError, match=rf"{last} \(seq from 8\): truncated or corrupt"):
        open_archive(tmp_path).blocks(TOPIC, 0)


def test_a_missing_middle_segment_is_a_gap_unless_allowed(tmp_path: Path) -> None:
    first, middle, last = three_segments(tmp_path)
    middle.unlink()
    (middle.parent / sidecar_name(middle.name)).unlink()
    with pytest.raises(ArchiveError, match=rf"seq 4\.\.7 missing between {first} and {last}"):
        check_topic(open_archive(tmp_path), TOPIC)
    warnings = check_topic(open_archive(tmp_path), TOPIC, allow_gaps=True)
    assert warnings == [f"gap: {TOPIC}[0]: seq 4..7 missing between {first} and {last}"]


def test_an_attribute_with_two_types_names_both_segments(tmp_path: Path) -> None:
    first = write_partition(tmp_path, TOPIC, 0, [[{"ts": 1, "speed": 1}], [{"ts": 2, "speed": 1.5}]])
    drifted = write_partition(tmp_path, TOPIC, 0, [[{"ts": 3, "speed": "fast"}]], first_seq=2)
    with pytest.raises(ArchiveError, match=rf"'speed' is a number in {first[0]} but a string in "
                                           rf"{drifted[0]} \(seq from 2\)"):
        check_topic(open_archive(tmp_path), TOPIC)


def test_an_attribute_no_segment_has_and_a_range_without_data_are_named(tmp_path: Path) -> None:
    three_segments(tmp_path)
    archive = open_archive(tmp_path)
    with pytest.raises(ArchiveError, match=r"no segment has attribute\(s\) 'colour'"):
        check_topic(archive, TOPIC, attributes=["speed", "colour"])
    with pytest.raises(ArchiveError, match=r"no data in the range 20\.\.30: the archive spans "
                                           r"0\.\.11"):
        check_topic(archive, TOPIC, lo=20, hi=30)
    with pytest.raises(ArchiveError, match="no data: the archive has no segments of topic "
                                           r"'bikes\.ordered'"):
        check_topic(archive, "bikes.ordered")


def test_segments_without_a_block_index_are_a_warning(tmp_path: Path) -> None:
    segment = three_segments(tmp_path)[0]
    (segment.parent / sidecar_name(segment.name)).unlink()
    assert check_topic(open_archive(tmp_path), TOPIC) == [
        f"{segment}: no block index (run `situflow index blocks`)"]


def test_a_block_index_of_another_segment_is_caught(tmp_path: Path) -> None:
    middle = three_segments(tmp_path)[1]
    wrong = write_partition(tmp_path / "other", TOPIC, 0, [[{"ts": 4, "speed": 4}]],
                            first_seq=4)[0]
    (middle.parent / sidecar_name(middle.name)).write_bytes(
        (wrong.parent / sidecar_name(wrong.name)).read_bytes())
    with pytest.raises(ArchiveError, match=rf"{middle} \(seq 4\.\.4\): holds 4 rows in 2 row "
                                           r"groups, .* say 1 in 1"):
        check_topic(open_archive(tmp_path), TOPIC)


def test_a_renamed_segment_is_caught(tmp_path: Path) -> None:
    last = three_segments(tmp_path)[2]
    renamed = last.with_name("00000000000000000012.parquet")
    last.rename(renamed)
    (last.parent / sidecar_name(last.name)).rename(renamed.parent / sidecar_name(renamed.name))
    with pytest.raises(ArchiveError, match=rf"{renamed}: holds seq 8\.\.11, but its name"):
        check_topic(open_archive(tmp_path), TOPIC)
