"""What the in-process and the subprocess server (embedded.py, subprocess_server.py) hold alike:
the data directory, the settings (``FIXTURE_SETTINGS`` overridden by the caller's), the Kafka
listener's address, and the fault handle once a test asked for it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .settings import server_settings

if TYPE_CHECKING:
    from .faults import FaultHandle

__all__ = ["ServerBase"]


class ServerBase:
    def __init__(self, data_dir: str | Path, settings: Mapping[str, object] | None = None, port: int = 0) -> None:
        self.data_dir = Path(data_dir)
        self.settings = server_settings(settings)
        self.host = "127.0.0.1"
        #: The Kafka listener's port: the one asked for, then the one the first start bound.
        self.port = port
        self._faults: FaultHandle | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def faults_used(self) -> bool:
        """Whether ``faults`` was asked for (the plugin clears faults only then)."""
        return self._faults is not None
