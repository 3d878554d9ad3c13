"""Where SCRAM credentials live: a file in the data directory on a single node, ZooKeeper's
``/config/users/<user>`` in cluster mode (where Kafka's ZooKeeper mode keeps them, so
``kafka-configs.sh --zookeeper`` era tools and our nodes read the same records).

A credential is Kafka's string form ``salt=..,stored_key=..,server_key=..,iterations=..``
(``ScramCredentialUtils``; reference/security.md §4.3) under its mechanism's name. Reads
(:meth:`get`, called by the SASL gate on the event loop for every SCRAM login) come from memory;
writes block (fsync, ZooKeeper round trips) and belong on a worker thread.

ZooKeeper layout, as ``AdminZkClient.changeConfigs`` writes it
(https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/AdminZkClient.scala): the
user's znode ``/config/users/<sanitized>`` holds ``{"version":1,"config":{"SCRAM-SHA-256":"salt=…"}}``
(other entries, e.g. quotas, are kept as they are), then a ``/config/changes/config_change_<seq>``
notification ``{"version":2,"entity_path":"users/<sanitized>"}`` follows. The name is sanitized as
Kafka's ``Sanitizer.sanitize`` does: URL-encoded, ``*`` as ``%2A``, a space as ``%20``. Every node
watches ``/config/users`` and each user's znode, so a change is in force everywhere at once.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote

from storage.files import atomic_write

from .sasl.scram_formatter import MECHANISMS, ScramCredential, credential_from_string, credential_to_string

__all__ = ["ScramCredentialStore", "FileScramStore", "ZkScramStore", "sanitize_user", "desanitize_user",
           "CREDENTIALS_FILE", "CONFIG_USERS"]

log = logging.getLogger("groupcoord.security.scram")

CREDENTIALS_FILE = "scram-credentials.json"
CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes/config_change_"

#: user → mechanism → credential.
Users = dict[str, dict[str, ScramCredential]]


class ScramCredentialStore(Protocol):
    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def users(self) -> Users:
        """A snapshot of every user's credentials."""
        ...

    def alter(self, upserts: Mapping[tuple[str, str], ScramCredential], deletions: set[tuple[str, str]]) -> None:
        """Apply upserts and deletions of (user, mechanism) in one write (blocking)."""
        ...


def sanitize_user(name: str) -> str:
    # Java's URLEncoder keeps A-Z a-z 0-9 . - * _ and turns a space into +; Sanitizer then writes * and
    # the space in percent form. quote() keeps ~ as well, which URLEncoder encodes.
    return quote(name, safe="").replace("~", "%7E")


def desanitize_user(node: str) -> str:
    return unquote(node)


def _encode_users(users: Users) -> bytes:
    body = {"version": 1, "users": {
        name: {mech: credential_to_string(c) for mech, c in sorted(mechs.items())}
        for name, mechs in sorted(users.items()) if mechs}}
    return json.dumps(body, indent=1).encode() + b"\n"


def _scram_entries(config: Mapping[str, object]) -> dict[str, ScramCredential]:
    out: dict[str, ScramCredential] = {}
    for mech in MECHANISMS:
        value = config.get(mech)
        if isinstance(value, str):
            try:
                out[mech] = credential_from_string(value)
            except ValueError as e:
                log.warning("unreadable SCRAM credential ignored", extra={"mechanism": mech, "error": str(e)})
    return out


def _apply(users: Users, upserts: Mapping[tuple[str, str], ScramCredential],
           deletions: set[tuple[str, str]]) -> Users:
    out = {name: dict(mechs) for name, mechs in users.items()}
    for name, mech in deletions:
        out.get(name, {}).pop(mech, None)
    for (name, mech), credential in upserts.items():
        out.setdefault(name, {})[mech] = credential
    return {name: mechs for name, mechs in out.items() if mechs}


class FileScramStore:
    """``<data dir>/scram-credentials.json``, replaced atomically (temp file, fsync, rename, fsync
    of the directory) on every change; a single node's store."""

    def __init__(self, data_dir: Path | str) -> None:
        self.path = Path(data_dir) / CREDENTIALS_FILE
        self._lock = threading.Lock()
        self._users: Users = self._load()

    def _load(self) -> Users:
        try:
            body = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ValueError(f"{self.path}: unreadable SCRAM credentials file: {e}") from None
        if not isinstance(body, dict) or body.get("version") != 1 or not isinstance(body.get("users"), dict):
            raise ValueError(f"{self.path}: not a version 1 SCRAM credentials file")
        return {name: _scram_entries(mechs) for name, mechs in body["users"].items() if isinstance(mechs, dict)}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> Users:
        return {name: dict(mechs) for name, mechs in self._users.items()}

    def alter(self, upserts: Mapping[tuple[str, str], ScramCredential], deletions: set[tuple[str, str]]) -> None:
        with self._lock:
            users = _apply(self._users, upserts, deletions)
            atomic_write(self.path, _encode_users(users))
            self._users = users  # replaced whole: readers on other threads see the old or the new


class ZkScramStore:
    """``/config/users`` in ZooKeeper, mirrored in memory by watches. ``zk`` is this node's session
    (coordinator/cluster/zookeeper.py ``ZooKeeper``; anything with a started kazoo ``client``)."""

    def __init__(self, zk: Any, on_change: Callable[[], None] | None = None) -> None:
        self._client = zk.client
        self._on_change = on_change
        self._users: Users = {}
        self._watched: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Create ``/config/users`` if missing and start watching (blocking)."""
        self._client.ensure_path(CONFIG_USERS)
        self._client.ChildrenWatch(CONFIG_USERS, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        # kazoo's thread: a DataWatch per new user znode; it reports the data now and on every change.
        for node in children:
            with self._lock:
                if node in self._watched:
                    continue
                self._watched.add(node)
            self._client.DataWatch(f"{CONFIG_USERS}/{node}", self._data_watcher(node))

    def _data_watcher(self, node: str) -> Callable[[bytes | None, Any], bool]:
        name = desanitize_user(node)

        def on_data(data: bytes | None, _stat: Any) -> bool:
            entries: dict[str, ScramCredential] = {}
            if data is not None:
                try:
                    config = json.loads(data).get("config", {})
                except (ValueError, AttributeError):
                    config = {}
                entries = _scram_entries(config if isinstance(config, dict) else {})
            with self._lock:
                users = dict(self._users)
                if entries:
                    users[name] = entries
                else:
                    users.pop(name, None)
                self._users = users
                if data is None:
                    self._watched.discard(node)
            if self._on_change is not None:
                self._on_change()
            return data is not None  # a deleted znode ends its watch; ChildrenWatch re-adds it if it returns

        return on_data

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> Users:
        return {name: dict(mechs) for name, mechs in self._users.items()}

    def alter(self, upserts: Mapping[tuple[str, str], ScramCredential], deletions: set[tuple[str, str]]) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

        self._client.ensure_path(CONFIG_USERS)
        names = {name for name, _ in upserts} | {name for name, _ in deletions}
        for name in sorted(names):
            path = f"{CONFIG_USERS}/{sanitize_user(name)}"
            for _ in range(5):
                try:
                    data, stat = self._client.get(path)
                    body = json.loads(data) if data else {}
                except NoNodeError:
                    body, stat = {}, None
                config = dict(body.get("config", {})) if isinstance(body, dict) else {}
                for user, mech in deletions:
                    if user == name:
                        config.pop(mech, None)
                for (user, mech), credential in upserts.items():
                    if user == name:
                        config[mech] = credential_to_string(credential)
                encoded = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
                change = json.dumps({"version": 2, "entity_path": f"users/{sanitize_user(name)}"},
                                    separators=(",", ":")).encode()
                tx = self._client.transaction()
                if stat is None:
                    tx.create(path, encoded)
                else:
                    tx.set_data(path, encoded, version=stat.version)
                tx.create(CONFIG_CHANGES, change, sequence=True)
                results = tx.commit()
                errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
                if any(isinstance(r, (BadVersionError, NodeExistsError)) for r in errors):
                    continue  # changed under us: read again
                if errors:
                    raise errors[0]
                break
            else:
                raise RuntimeError(f"{path} kept changing")
        # In force here at once (the watch brings the same data a moment later), so a describe right
        # after an alter on this node shows it.
        with self._lock:
            self._users = _apply(self._users, upserts, deletions)
