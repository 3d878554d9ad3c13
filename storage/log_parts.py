"""What the group-commit writer and the cleaner may touch of a ``Log``: two narrow interfaces.

``Log`` owns the writer (``group_commit.GroupCommitWriter``) and runs the cleaner
(``cleaner.clean_log``); both reach back into the log's state. Typing them against these
Protocols instead of ``Log`` keeps the dependency one way (``log`` imports ``group_commit`` and
``cleaner``, never the reverse; tests/test_layering.py forbids import circles) and states, in
one place, which of the log's fields each may read or move. ``Log`` satisfies both structurally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from .leader_epoch import LeaderEpochCache
from .options import LogOptions
from .segment import LogSegment

__all__ = ["WriterLog", "CleanerLog"]


class WriterLog(Protocol):
    """The log as its group-commit writer sees it: it appends segments and moves the recovery point."""

    directory: Path
    options: LogOptions
    clock: Callable[[], int]
    #: Live segments in offset order (the writer appends rolled ones) and their base offsets.
    _segments: list[LogSegment]
    _bases: list[int]
    #: Everything below is fsynced; the checkpointed value is what the file on disk says.
    _recovery_point: int
    _recovery_point_checkpointed: int
    #: Exclusive operations waiting for ``_write_lock``; the writer yields to them.
    _exclusive_waiters: int
    _write_lock: asyncio.Lock
    _last_sync_ms: int
    _closed: bool
    #: The write error that stopped appends, if any.
    _failed: BaseException | None
    #: Leader epoch -> start offset; the writer adds the epochs of committed batches.
    _leader_epochs: LeaderEpochCache

    def _arm_flush_timer(self) -> None: ...


class CleanerLog(Protocol):
    """The log as the cleaner sees it: it swaps sealed segments below the checkpointed recovery point."""

    directory: Path
    options: LogOptions
    clock: Callable[[], int]
    _segments: list[LogSegment]
    _recovery_point_checkpointed: int
    #: Held for a whole cleaning pass, so truncation and retention never pull a file from under it.
    _structure_lock: asyncio.Lock

    @property
    def log_start_offset(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def _retire(self, seg: LogSegment, *, delete: bool) -> None: ...

    async def clean(self, *, force: bool = False, max_offset: int | None = None) -> object: ...
