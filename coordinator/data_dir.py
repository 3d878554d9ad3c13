"""The data directory: an exclusive lock, ``meta.properties`` and atomic small-file writes.

``meta.properties`` follows Kafka's (``version``, ``cluster.id``, ``node.id``): the cluster id is
generated once, on first start, and kept so clients see the same cluster across restarts.
"""

from __future__ import annotations

import base64
import fcntl
import os
import uuid
from pathlib import Path

from storage.files import atomic_write

from .config import ConfigError

__all__ = ["DataDir", "new_cluster_id", "atomic_write"]


def new_cluster_id() -> str:
    """A random UUID as 22 URL-safe base64 characters, as Kafka's ``Uuid.toString`` prints it.

    Kafka re-draws ids that start with ``-`` so they cannot be mistaken for command-line flags.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


class DataDir:
    """An opened, locked data directory."""

    def __init__(self, path: Path, node_id: int) -> None:
        self.path = path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create data directory {path}: {exc.strerror}") from None
        self._lock_fd = os.open(path / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise ConfigError(f"data directory {path} is in use by another groupcoord process") from None
        self.cluster_id, self.node_id = self._load_meta(node_id)

    def _load_meta(self, node_id: int) -> tuple[str, int]:
        meta = self.path / "meta.properties"
        if not meta.exists():
            cluster_id = new_cluster_id()
            atomic_write(meta, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
            return cluster_id, node_id
        fields: dict[str, str] = {}
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                fields[key.strip()] = value.strip()
        cluster_id = fields.get("cluster.id", "")
        if len(cluster_id) != 22:
            raise ConfigError(f"{meta}: cluster.id {cluster_id!r} is not a 22-character id; fix or remove the file")
        stored = fields.get("node.id", "")
        if stored != str(node_id):
            raise ConfigError(f"{meta}: node.id is {stored!r} but the configuration says {node_id}")
        return cluster_id, node_id

    def close(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1
