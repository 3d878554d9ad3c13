"""A wire tap for the client tests: a TCP relay in front of one server that decodes the requests
clients send through it (with the server's own request decoder) and keeps those of chosen APIs.

The server advertises the relay's address (``advertised.listeners``), so every connection a
client opens — bootstrap, coordinator, partition leader — goes through the relay, and a test can
assert on the exact request a stock client put on the wire.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable

from protocol.connection import ServerConnection
from protocol.events import NEED_DATA, ProtocolViolation, RequestReceived
from tests.conftest import free_port

__all__ = ["WireTap"]


class WireTap:
    """Relays 127.0.0.1:``port`` to ``target``; ``requests`` holds the decoded requests of ``api_keys``."""

    def __init__(self, target: tuple[str, int], api_keys: Iterable[int]) -> None:
        self.target = target
        self.api_keys = frozenset(api_keys)
        self.port = free_port()
        self.requests: list[RequestReceived] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in list(self._sockets):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, ServerConnection()), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, None), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, decoder: ServerConnection | None) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if decoder is not None:
                    decoder.receive_data(data)
                    while (event := decoder.next_event()) is not NEED_DATA and not isinstance(event, ProtocolViolation):
                        if isinstance(event, RequestReceived) and event.api_key in self.api_keys:
                            self.requests.append(event)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
