"""The pytest plugin (entry point ``pytest11``: ``groupcoord``). Placeholder until the fixtures land."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "groupcoord(config=None, mode=None, scope=None): settings of the "
                            "groupcoord server a test gets (docs/testing.md)")
