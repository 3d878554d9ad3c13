"""``groupcoord faults``: list, inject and clear faults on a node started with
``test.faults.enable=true`` and an ``http.listen`` listener (docs/testing.md).

One subcommand per fault of the vocabulary, plus ``list`` and ``clear [ID]``; each sends one request
to the node's ``/faults`` endpoint and prints the node's JSON answer. Exit statuses: 0 done, 1 the
node refused or could not be reached (the message on stderr as ``groupcoord faults: ...``; nothing
changed), 2 bad usage (argparse's).

The endpoint's client, ``HttpTransport``, and its ``FaultError`` live here rather than beside the
fault handle (coordinator/testing/faults.py, which re-exports them): the command line stands below
the testing wing in the import order (tests/test_layering.py), so the handle imports them from here.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

__all__ = ["FaultError", "HttpTransport", "run"]

#: How long a request waits for the node, on top of the waits its own parameters ask for
#: (a coordinator move answers only once the partition is active again).
DEFAULT_TIMEOUT_S = 30.0

#: How long a crash-restart over HTTP waits for the node to answer again (a fresh interpreter,
#: then the replay of its logs).
RESTART_TIMEOUT_S = 60.0


class FaultError(Exception):
    """The node refused the fault, or could not be reached.

    ``status`` is the node's HTTP-like status (400 bad fault, 404 unknown group or fault id, or
    fault injection off, 409 not possible here), or ``None`` when no node answered.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class HttpTransport:
    """``/faults`` on a node's ``http.listen`` listener (JSON over HTTP/1.1, urllib: no extra package)."""

    def __init__(self, base_url: str) -> None:
        url = base_url.strip()
        if "://" not in url:
            url = "http://" + url
        self.base_url = url.rstrip("/")

    def inject(self, body: Mapping[str, object], timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        """``POST /faults``: ``{"id": ... (lasting faults only), "result": {...}}``."""
        answer: dict[str, Any] = self.request("POST", "/faults", dict(body), timeout)
        return answer

    def list(self) -> list[dict[str, Any]]:
        answer = self.request("GET", "/faults")
        faults: list[dict[str, Any]] = answer["faults"]
        return faults

    def clear(self, fault_id: str | None = None) -> int:
        path = "/faults" if fault_id is None else "/faults/" + urllib.parse.quote(fault_id, safe="")
        return int(self.request("DELETE", path)["cleared"])

    def request(self, method: str, path: str, body: object = None, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
        """One request; the node's ``{"error": ...}`` answers and unreachable nodes raise ``FaultError``."""
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(url, exc.code, exc.read()) from None
        except urllib.error.URLError as exc:
            raise FaultError(f"cannot reach {url}: {_reason(exc.reason)}") from None
        except TimeoutError:
            raise FaultError(f"{url} did not answer within {timeout:g} s") from None
        except OSError as exc:
            # The connection broke after it was made (the node went away mid-answer).
            raise FaultError(f"cannot reach {url}: {_reason(exc)}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise FaultError(f"{url} answered something other than JSON: {text[:200]!r}") from None

    def answers(self) -> bool:
        """Whether the listener answers ``GET /faults`` now (with any status)."""
        try:
            self.request("GET", "/faults", timeout=2.0)
        except FaultError as exc:
            return exc.status is not None
        return True

    def ready(self) -> bool:
        """Whether the node says it is ready (``GET /readyz`` 200: its coordinator partitions
        loaded, docs/metrics.md); a listener without that route counts as ready once it answers."""
        try:
            with urllib.request.urlopen(self.base_url + "/readyz", timeout=2.0) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            return exc.code == 404
        except OSError:  # URLError included: not listening (yet)
            return False
        return True

    def crash_restart(self, timeout: float = RESTART_TIMEOUT_S) -> None:
        """Asks the node to crash and restart, then waits until it is back and ready.

        The node answers (or drops the request) and then execs itself. To tell the restarted node
        from the old one, a connection is opened to the listener first: it is the old process's,
        and it breaks when that process goes (its sockets close with it).
        """
        parsed = urllib.parse.urlsplit(self.base_url)
        host = parsed.hostname or "localhost"
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            witness = socket.create_connection((host, port), timeout=5.0)
        except OSError as exc:
            raise FaultError(f"cannot reach {self.base_url}: {_reason(exc)}") from None
        with witness:
            try:
                self.inject({"fault": "crash-restart"})
            except FaultError as exc:
                if exc.status is not None:
                    raise  # refused (409: not available on this node): nothing happened
                # No answer: the node went before it could reply.
            deadline = time.monotonic() + timeout
            witness.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                while witness.recv(4096):
                    pass  # nothing is sent on it; a byte would only mean an idle-timeout notice
            except TimeoutError:
                raise FaultError(f"{self.base_url} did not go down within {timeout:g} s of crash-restart") from None
            except OSError:
                pass  # reset: the old process is gone
        while time.monotonic() < deadline:
            if self.ready():
                return
            time.sleep(0.05)
        raise FaultError(f"{self.base_url} was not ready again within {timeout:g} s of crash-restart")


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the node running, with http.listen set?)"
    if isinstance(reason, BaseException):
        return str(reason) or type(reason).__name__
    return str(reason)


def _refusal(url: str, status: int, body: bytes) -> FaultError:
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        message = None
    if not isinstance(message, str):
        message = f"HTTP {status} from {url}: {body[:200].decode(errors='replace')}"
    return FaultError(message, status)


DEFAULT_URL = "http://localhost:8080"
URL_ENV = "GROUPCOORD_FAULTS_URL"


def _common() -> argparse.ArgumentParser:
    """--url and --json, accepted before or after the action (SUPPRESS keeps an earlier value)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help=f"the node's http.listen address; default ${URL_ENV}, else {DEFAULT_URL}")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print list as JSON rather than a table")
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="groupcoord faults", parents=[common],
        description="Inject, list and clear faults on a node started with test.faults.enable=true "
                    "(docs/testing.md). Talks to the node's http.listen listener: --url, else "
                    f"${URL_ENV}, else {DEFAULT_URL}.")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, parents=[common])

    action("list", "the lasting faults in force")
    clear = action("clear", "end one fault, or all")
    clear.add_argument("id", nargs="?", help="the fault's id (f1, f2, ...); default all")

    rebalance = action("rebalance", "the group rebalances now")
    rebalance.add_argument("--group", required=True)
    kick = action("kick-member", "remove a member as if its session expired")
    kick.add_argument("--group", required=True)
    kick.add_argument("--member", help="member id or group.instance.id; default the first by member id")
    move = action("move-coordinator", "move the group's coordinator (NOT_COORDINATOR, then loading, then active)")
    move.add_argument("--group", required=True)
    move.add_argument("--load-ms", type=int, help="COORDINATOR_LOAD_IN_PROGRESS this long; default 0")
    move.add_argument("--not-coordinator-ms", type=int, help="NOT_COORDINATOR this long first; default 0")

    fail = action("fail", "answer the next requests of an API with an error")
    fail.add_argument("--api", required=True, help="Kafka's API name (OffsetCommit, JoinGroup...) or key")
    fail.add_argument("--error", required=True, help="Kafka's error name (REBALANCE_IN_PROGRESS...) or code")
    fail.add_argument("--count", type=int, help="how many requests; default 1")
    _filters(fail)
    delay = action("delay", "hold the requests of an API before handling them")
    delay.add_argument("--api", required=True, help="Kafka's API name (OffsetCommit, JoinGroup...) or key")
    delay.add_argument("--ms", type=int, required=True, help="how long each waits")
    delay.add_argument("--count", type=int, help="how many requests; default all until it ends")
    _filters(delay)

    drop = action("drop-connections", "close client connections")
    drop.add_argument("--client-id", help="only those with this client id; default all")
    pause = action("pause-heartbeats", "hold Heartbeat and ConsumerGroupHeartbeat requests unanswered")
    pause.add_argument("--group", help="only this group's; default all")
    pause.add_argument("--duration-ms", type=int, required=True)
    leader = action("leader-unavailable", "a partition without leader")
    leader.add_argument("--topic", required=True)
    leader.add_argument("--partition", type=int, required=True)
    leader.add_argument("--duration-ms", type=int, required=True)
    action("crash-restart", "the node stops with no shutdown step and starts again; waits until it answers")
    return parser


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", help="only requests naming this group")
    parser.add_argument("--topic", help="only requests naming this topic")
    parser.add_argument("--duration-ms", type=int, help="ends after this long at the latest; default 60000")


#: The options of each injecting action, in the vocabulary's names (argparse's dest is the same name).
_PARAMS: dict[str, tuple[str, ...]] = {
    "rebalance": ("group",),
    "kick-member": ("group", "member"),
    "move-coordinator": ("group", "load_ms", "not_coordinator_ms"),
    "fail": ("api", "error", "count", "group", "topic", "duration_ms"),
    "delay": ("api", "ms", "count", "group", "topic", "duration_ms"),
    "drop-connections": ("client_id",),
    "pause-heartbeats": ("group", "duration_ms"),
    "leader-unavailable": ("topic", "partition", "duration_ms"),
}


def run(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    url = getattr(args, "url", None) or os.environ.get(URL_ENV) or DEFAULT_URL
    transport = HttpTransport(url)
    try:
        if args.action == "list":
            faults = transport.list()
            if getattr(args, "json", False):
                print(json.dumps(faults), file=out)
            else:
                out.write(format_table(faults))
        elif args.action == "clear":
            print(json.dumps({"cleared": transport.clear(args.id)}), file=out)
        elif args.action == "crash-restart":
            transport.crash_restart()
            print(json.dumps({"restarted": True}), file=out)
        else:
            body: dict[str, object] = {"fault": args.action}
            body.update((name, getattr(args, name)) for name in _PARAMS[args.action] if getattr(args, name) is not None)
            for name in ("api", "error"):
                if name in body:
                    body[name] = _number_or_name(body[name])
            # A coordinator move answers once the partition is active again: after both waits.
            wait_s = ((getattr(args, "load_ms", None) or 0) + (getattr(args, "not_coordinator_ms", None) or 0)) / 1000
            print(json.dumps(transport.inject(body, timeout=DEFAULT_TIMEOUT_S + wait_s)), file=out)
    except FaultError as exc:
        print(f"groupcoord faults: {exc.message}", file=err)
        return 1
    return 0


def _number_or_name(value: object) -> object:
    """An API key or error code given as a number goes as one (the node takes both)."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def format_table(faults: list[dict[str, Any]]) -> str:
    """The faults in force, one a line: id, fault, its parameters, what is left of it."""
    if not faults:
        return "no faults in force\n"
    rows = [("ID", "FAULT", "PARAMS", "REMAINING", "EXPIRES_IN_MS")]
    for fault in faults:
        params = " ".join(f"{key}={value}" for key, value in fault.items()
                          if key not in ("id", "fault", "remaining", "expires_in_ms") and value is not None)
        remaining = fault.get("remaining")
        rows.append((str(fault.get("id", "")), str(fault.get("fault", "")), params or "-",
                     "-" if remaining is None else str(remaining), str(fault.get("expires_in_ms", "-"))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "".join("  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]])
                   + "\n" for row in rows)
