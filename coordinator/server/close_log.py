"""Rate-limited "closing connection" lines (issue 22): a hostile or broken client opening
connection after connection with bad frames must not fill the disk with log lines. Lines are
counted per client host (not host:port: such a client opens many connections), at most
``LINES_PER_WINDOW`` per ``WINDOW_S``; past that, one summary line per host and window says how
many closings went unlogged."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

__all__ = ["CloseLog"]

LINES_PER_WINDOW = 5
WINDOW_S = 1.0


def host_of(peer: str) -> str:
    if peer.startswith("["):
        return peer[1:].split("]", 1)[0]
    return peer.rsplit(":", 1)[0]


class CloseLog:
    def __init__(self, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.clock = clock
        #: host -> [window start, lines logged in it, closings not logged]
        self._hosts: dict[str, list[float]] = {}

    def closing(self, peer: str, reason: str) -> None:
        host = host_of(peer)
        now = self.clock()
        entry = self._hosts.get(host)
        if entry is None or now - entry[0] >= WINDOW_S:
            if entry is not None:
                self._summary(host, entry)
            entry = self._hosts[host] = [now, 0, 0]
        if entry[1] < LINES_PER_WINDOW:
            entry[1] += 1
            self.log.warning("closing connection", extra={"peer": peer, "reason": reason})
            return
        if entry[2] == 0:
            try:  # the window's summary comes even if this host closes nothing more
                asyncio.get_running_loop().call_later(WINDOW_S, self._flush, host, entry)
            except RuntimeError:
                pass
        entry[2] += 1

    def _flush(self, host: str, entry: list[float]) -> None:
        if self._hosts.get(host) is entry:
            del self._hosts[host]
            self._summary(host, entry)

    def _summary(self, host: str, entry: list[float]) -> None:
        if entry[2]:
            self.log.warning("more connections closed, not logged one by one",
                             extra={"host": host, "closed": int(entry[2]), "window_s": WINDOW_S})
            entry[2] = 0
