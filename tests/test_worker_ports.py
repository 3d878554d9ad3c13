"""``free_ports`` under pytest-xdist: each worker draws from its own slice of 20000..32000, so
two workers cannot both pick (and later bind) the same consecutive ports."""

from __future__ import annotations

import pytest

from tests.conftest import _worker_port_range, free_ports


def test_a_serial_run_uses_the_whole_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert _worker_port_range() == (20000, 32000)


def test_workers_get_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
        slices.append(_worker_port_range())
    assert slices == [(20000, 23000), (23000, 26000), (26000, 29000), (29000, 32000)]
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    for _ in range(20):
        base = free_ports(3)
        assert 26000 <= base and base + 3 <= 29000, base
