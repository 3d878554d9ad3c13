"""The data directory: an exclusive lock, ``meta.properties`` and atomic small-file writes.

``meta.properties`` follows Kafka's (``version``, ``cluster.id``, ``node.id``): the cluster id is
generated once, on first start, and kept so clients see the same cluster across restarts.
"""

from __future__ import annotations

import base64
import fcntl
import os
import uuid
from collections.abc import Callable
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

    def __init__(self, path: Path, node_id: int, cluster_id_source: Callable[[str | None], str] | None = None) -> None:
        """``cluster_id_source`` (cluster mode) is given the directory's own cluster id, or None for
        a new directory, and returns the cluster's; a directory of another cluster is refused."""
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
        try:
            stored = self._read_meta(node_id)
            if cluster_id_source is None:
                cluster_id = stored or new_cluster_id()
            else:
                cluster_id = cluster_id_source(stored)
                if stored is not None and stored != cluster_id:
                    # Kafka's InconsistentClusterIdException: these logs belong to another cluster.
                    raise ConfigError(f"{path / 'meta.properties'}: cluster.id is {stored} but the cluster in "
                                      f"ZooKeeper is {cluster_id}; this data directory belongs to another cluster")
            if stored is None:
                atomic_write(path / "meta.properties",
                             f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
        except BaseException:
            self.close()
            raise
        self.cluster_id, self.node_id = cluster_id, node_id

    def _read_meta(self, node_id: int) -> str | None:
        """The cluster id in ``meta.properties``, or None when the directory is new."""
        meta = self.path / "meta.properties"
        if not meta.exists():
            return None
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
        return cluster_id

    def close(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1
