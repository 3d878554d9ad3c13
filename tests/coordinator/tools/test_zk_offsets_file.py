"""The Export/ImportZkOffsets file format (coordinator/tools/zk_offsets_file.py): pure tests."""

from __future__ import annotations

import pytest

from coordinator.tools.zk_offsets_file import (
    ZkOffsetLine,
    ZkOffsetsFileError,
    format_zk_offsets,
    parse_zk_offsets,
)


def test_parses_kafka_example_lines() -> None:
    text = "/consumers/group1/offsets/topic1/0:286894308\n/consumers/group1/offsets/topic1/1:284803985\n"
    assert parse_zk_offsets(text) == [ZkOffsetLine("group1", "topic1", 0, 286894308),
                                      ZkOffsetLine("group1", "topic1", 1, 284803985)]


def test_empty_line_ends_the_input_as_kafkas_import_did() -> None:
    text = "/consumers/g/offsets/t/0:5\n\n/consumers/g/offsets/t/1:not-read\n"
    assert parse_zk_offsets(text) == [ZkOffsetLine("g", "t", 0, 5)]


def test_crlf_and_group_with_colon() -> None:
    assert parse_zk_offsets("/consumers/a:b/offsets/t/3:7\r\n") == [ZkOffsetLine("a:b", "t", 3, 7)]


@pytest.mark.parametrize("bad, why", [
    ("/consumers/g/offsets/t/1", "expected"),
    ("/consumers/g/offsets/t/1:x", "offset 'x'"),
    ("/consumers/g/offsets/t/1:-1", "offset '-1'"),
    ("/consumers/g/offsets/t/p:1", "partition 'p'"),
    ("/consumers/g/owners/t/1:1", "expected a path"),
    ("/consumers/g/offsets/t/1/2:1", "expected a path"),
    ("consumers/g/offsets/t/1:1", "expected a path"),
    ("/consumers//offsets/t/1:1", "empty group"),
])
def test_malformed_line_names_its_number(bad: str, why: str) -> None:
    text = f"/consumers/g/offsets/t/0:5\n{bad}\n"
    with pytest.raises(ZkOffsetsFileError) as info:
        parse_zk_offsets(text)
    assert str(info.value).startswith("line 2: ")
    assert why in str(info.value)
    assert repr(bad) in str(info.value)


def test_duplicate_partition_is_an_error() -> None:
    with pytest.raises(ZkOffsetsFileError, match=r"line 3: /consumers/g/offsets/t/0 already given on line 1"):
        parse_zk_offsets("/consumers/g/offsets/t/0:5\n/consumers/g/offsets/t/1:5\n/consumers/g/offsets/t/0:6\n")


def test_format_round_trips_sorted_per_group() -> None:
    text = format_zk_offsets({"g2": {("t", 1): 9, ("t", 0): 8}, "g1": {("a", 0): 1}})
    assert text == "/consumers/g2/offsets/t/0:8\n/consumers/g2/offsets/t/1:9\n/consumers/g1/offsets/a/0:1\n"
    assert format_zk_offsets(parse_zk_offsets(text)) == text
