"""``gc_policy``: what exists when the server freezes is left out of later full collections."""

from __future__ import annotations

import gc

import pytest

from coordinator import gc_policy
from coordinator.gc_policy import freeze_long_lived, leave_to_host


@pytest.fixture(autouse=True)
def not_hosting(monkeypatch: pytest.MonkeyPatch) -> None:
    # An embedded node started earlier in this worker process (tests/testing/) marks the process as
    # a host for good; these tests are about a served node's process.
    monkeypatch.setattr(gc_policy, "_hosted", False)


def test_long_lived_objects_leave_the_collected_generations() -> None:
    state = [{"group": i} for i in range(1000)]  # stands for a loaded partition's groups
    gc.unfreeze()
    try:
        freeze_long_lived()
        assert gc.get_freeze_count() >= len(state)
        assert not any(o is state for o in gc.get_objects())  # no generation holds it any more
        later = [{"request": i} for i in range(10)]
        assert any(o is later for o in gc.get_objects())  # what comes after is collected as usual
    finally:
        gc.unfreeze()


def test_a_process_hosting_an_embedded_node_freezes_nothing() -> None:
    gc.unfreeze()
    try:
        leave_to_host()
        freeze_long_lived()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
