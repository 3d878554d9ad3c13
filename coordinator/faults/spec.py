"""The fault vocabulary (docs/testing.md): what a fault request may say, parsed once for the
engine, the HTTP endpoint, the CLI and the Python handle.

A fault is a JSON object ``{"fault": NAME, ...params}``. ``parse_fault`` turns one into a frozen
spec or raises :class:`FaultError` with a message naming what was wrong and what would be valid,
so that a test author's typo reads as an answer rather than a stack trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

__all__ = ["FAULTS_OFF", "FaultError", "FaultSpec", "FAULT_NAMES", "LastingSpec", "parse_fault", "parse_api", "parse_error",
           "api_name", "DEFAULT_DURATION_MS", "Rebalance", "KickMember", "MoveCoordinator", "Fail", "Delay",
           "DropConnections", "PauseHeartbeats", "LeaderUnavailable", "CrashRestart"]

#: What a node without ``test.faults.enable`` answers to every fault request (404).
FAULTS_OFF = "fault injection is off on this node: start it with test.faults.enable=true"

#: How long a ``fail`` or ``delay`` lasts when its request gives no ``duration_ms``.
DEFAULT_DURATION_MS = 60_000


class FaultError(Exception):
    """A fault request refused: ``status`` is the HTTP status the endpoint answers with (400 a
    bad request, 404 an unknown group or fault id, 409 a fault this node cannot apply)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def api_name(key: ApiKey) -> str:
    """Kafka's CamelCase name of an API (``OFFSET_COMMIT`` → ``OffsetCommit``), as in its docs."""
    return "".join(part.capitalize() for part in key.name.split("_"))


_API_BY_NAME: dict[str, ApiKey] = {}
for _key in ApiKey:
    _API_BY_NAME[api_name(_key).lower()] = _key
    _API_BY_NAME[_key.name.lower()] = _key

_ERROR_BY_NAME: dict[str, ErrorCode] = {name.lower(): code for name, code in ErrorCode.__members__.items()}

E = TypeVar("E", ApiKey, ErrorCode)


def _lookup(value: object, by_name: Mapping[str, E], by_code: Callable[[int], E]) -> E | None:
    """``value`` as a name (any case) or an int code (also as a string); None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        try:
            return by_code(int(value))
        except ValueError:
            return None
    if isinstance(value, str):
        return by_name.get(value.strip().lower())
    return None


def parse_api(value: object) -> ApiKey:
    """An API by its CamelCase name, its enum name, or its int key."""
    key = _lookup(value, _API_BY_NAME, ApiKey)
    if key is None:
        raise FaultError(400, f"unknown api {value!r}: give Kafka's API name (e.g. 'OffsetCommit' or "
                              f"'OFFSET_COMMIT') or its key; known: {', '.join(api_name(k) for k in ApiKey)}")
    return key


def parse_error(value: object) -> ErrorCode:
    """A Kafka error by its name (``REBALANCE_IN_PROGRESS``) or its int code."""
    error = _lookup(value, _ERROR_BY_NAME, ErrorCode)
    if error is None:
        raise FaultError(400, f"unknown error {value!r}: give Kafka's error name (e.g. 'REBALANCE_IN_PROGRESS') "
                              f"or its code; known: {', '.join(e.name for e in ErrorCode)}")
    return error


@dataclass(frozen=True)
class Rebalance:
    group: str


@dataclass(frozen=True)
class KickMember:
    group: str
    member: str | None = None


@dataclass(frozen=True)
class MoveCoordinator:
    group: str
    load_ms: int = 0
    not_coordinator_ms: int = 0


@dataclass(frozen=True)
class Fail:
    api: ApiKey
    error: ErrorCode
    count: int = 1
    group: str | None = None
    topic: str | None = None
    duration_ms: int = DEFAULT_DURATION_MS


@dataclass(frozen=True)
class Delay:
    api: ApiKey
    ms: int
    count: int | None = None
    group: str | None = None
    topic: str | None = None
    duration_ms: int = DEFAULT_DURATION_MS


@dataclass(frozen=True)
class DropConnections:
    client_id: str | None = None


@dataclass(frozen=True)
class PauseHeartbeats:
    duration_ms: int
    group: str | None = None


@dataclass(frozen=True)
class LeaderUnavailable:
    topic: str
    partition: int
    duration_ms: int


@dataclass(frozen=True)
class CrashRestart:
    pass


#: Faults that stay in force for a while (they get an id and show in the listing).
LastingSpec: TypeAlias = Fail | Delay | PauseHeartbeats | LeaderUnavailable
FaultSpec: TypeAlias = Rebalance | KickMember | MoveCoordinator | DropConnections | CrashRestart | LastingSpec

#: Each fault's name, its class, its required params and its optional ones.
_FAULTS: dict[str, tuple[type, tuple[str, ...], tuple[str, ...]]] = {
    "rebalance": (Rebalance, ("group",), ()),
    "kick-member": (KickMember, ("group",), ("member",)),
    "move-coordinator": (MoveCoordinator, ("group",), ("load_ms", "not_coordinator_ms")),
    "fail": (Fail, ("api", "error"), ("count", "group", "topic", "duration_ms")),
    "delay": (Delay, ("api", "ms"), ("count", "group", "topic", "duration_ms")),
    "drop-connections": (DropConnections, (), ("client_id",)),
    "pause-heartbeats": (PauseHeartbeats, ("duration_ms",), ("group",)),
    "leader-unavailable": (LeaderUnavailable, ("topic", "partition", "duration_ms"), ()),
    "crash-restart": (CrashRestart, (), ()),
}
FAULT_NAMES: tuple[str, ...] = tuple(_FAULTS)
_NAME_OF: dict[type, str] = {cls: name for name, (cls, _req, _opt) in _FAULTS.items()}


def fault_name(spec: FaultSpec) -> str:
    return _NAME_OF[type(spec)]


def _string(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise FaultError(400, f"{name} must be a non-empty string, not {value!r}")
    return value


def _int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FaultError(400, f"{name} must be an integer >= {minimum}, not {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise FaultError(400, f"{name} must be an integer >= {minimum}, not {value!r}") from None
    if number < minimum:
        raise FaultError(400, f"{name} must be an integer >= {minimum}, not {value!r}")
    return number


_STRINGS = frozenset({"group", "member", "topic", "client_id"})
_MINIMUM = {"count": 1, "duration_ms": 1, "ms": 0, "load_ms": 0, "not_coordinator_ms": 0, "partition": 0}


def parse_fault(body: Mapping[str, object], max_duration_ms: int) -> FaultSpec:
    """The spec ``body`` asks for; FaultError(400) naming what is unknown or bad."""
    if not isinstance(body, Mapping):
        raise FaultError(400, f"a fault is a JSON object {{\"fault\": NAME, ...}}, not {body!r}")
    name = body.get("fault")
    if name not in _FAULTS:
        raise FaultError(400, f"unknown fault {name!r}: valid faults are {', '.join(FAULT_NAMES)}")
    assert isinstance(name, str)
    cls, required, optional = _FAULTS[name]
    allowed = required + optional
    for key in body:
        if key != "fault" and key not in allowed:
            valid = ", ".join(allowed) if allowed else "none"
            raise FaultError(400, f"unknown parameter {key!r} for fault {name!r}: valid parameters are {valid}")
    missing = [key for key in required if body.get(key) is None]
    if missing:
        raise FaultError(400, f"fault {name!r} needs {', '.join(missing)}")
    params: dict[str, object] = {}
    for key in allowed:
        value = body.get(key)
        if value is None:
            continue
        if key == "api":
            params[key] = parse_api(value)
        elif key == "error":
            params[key] = parse_error(value)
        elif key in _STRINGS:
            params[key] = _string(key, value)
        else:
            params[key] = _int(key, value, _MINIMUM[key])
    for key in ("duration_ms", "ms", "load_ms", "not_coordinator_ms"):
        value = params.get(key)
        if isinstance(value, int) and value > max_duration_ms:
            raise FaultError(400, f"{key} {value} is above test.faults.max.duration.ms ({max_duration_ms})")
    if cls in (Fail, Delay) and "duration_ms" not in params and DEFAULT_DURATION_MS > max_duration_ms:
        params["duration_ms"] = max_duration_ms
    spec: FaultSpec = cls(**params)
    return spec
