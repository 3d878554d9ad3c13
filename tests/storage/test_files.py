"""The high watermark checkpoint (``storage/files.py``, Kafka's ``replication-offset-checkpoint``):
the format written, what reads back, and that a file not in the format raises
``CorruptCheckpointError`` naming it, as the leader-epoch checkpoint does (files.py rule 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.errors import CorruptCheckpointError
from storage.files import HW_CHECKPOINT_FILE, read_hw_checkpoint, write_hw_checkpoint


def test_the_high_watermarks_are_written_in_kafkas_format_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    entries = {("t", 1): 0, ("__consumer_offsets", 49): 1_000_000, ("t", 0): 5}
    write_hw_checkpoint(path, entries)
    # Version 0, the entry count, then "<topic> <partition> <offset>" lines, sorted.
    assert path.read_text() == "0\n3\n__consumer_offsets 49 1000000\nt 0 5\nt 1 0\n"
    assert read_hw_checkpoint(path) == entries
    write_hw_checkpoint(path, {})
    assert read_hw_checkpoint(path) == {}


def test_a_missing_checkpoint_is_empty(tmp_path: Path) -> None:
    assert read_hw_checkpoint(tmp_path / HW_CHECKPOINT_FILE) == {}


@pytest.mark.parametrize("content", [
    b"",                           # no version line
    b"1\n0\n",                     # another version
    b"0\n2\nt 0 5\n",              # the count says 2, one line follows
    b"0\n1\nt 0\n",                # a line without its offset
    b"0\n1\nt x 5\n",              # a partition that is no number
    b"0\n1\nt 0 5 6\n",            # one field too many
    b"0\n1\n\xff\xfe 0 5\n",       # not UTF-8 text
])
def test_a_file_not_in_the_format_raises_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as raised:
        read_hw_checkpoint(path)
    assert raised.value.path == path
    assert str(path) in str(raised.value)


def test_an_unreadable_checkpoint_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    path.mkdir()  # a directory where the file should be: the read fails with an OSError
    with pytest.raises(CorruptCheckpointError, match="unreadable"):
        read_hw_checkpoint(path)
