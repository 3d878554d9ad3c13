"""What a handler knows about the request it serves, besides the request itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

from protocol.kafka_types import KafkaRequest, KafkaResponse

__all__ = ["RequestContext", "NodeInfo", "Handler", "Reply"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    #: Who sent it (``Type:name``, Kafka's KafkaPrincipal string): ``User:ANONYMOUS`` on a
    #: PLAINTEXT listener or before authentication, the SASL or mapped TLS identity otherwise.
    principal: str = "User:ANONYMOUS"
    #: The client's address as ACL host entries name it (an IP string, no port; "" unknown).
    client_host: str = ""
    #: The name of the listener the request came in on (Kafka's ``listeners`` name, upper case):
    #: Metadata, FindCoordinator and DescribeCluster advertise that listener's endpoints.
    listener: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """This node as clients see it: id, advertised endpoint, and the cluster it belongs to."""

    node_id: int
    host: str
    port: int
    cluster_id: str
    #: Every advertised listener, (NAME, host, port); empty: one PLAINTEXT listener at host:port.
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where clients of listener ``listener`` reach this node (Kafka answers with the endpoints
        of the listener a request arrived on), or None when it has no such listener."""
        if not self.endpoints:
            return (self.host, self.port) if listener == "PLAINTEXT" else None
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


#: What a handler answers: a response (kafka-python's, or one of ours with an ``encode(version)``,
#: protocol/hot_responses.py), ``EncodedResponse`` frames, None for nothing (acks=0), or a future or
#: coroutine of one of these. The server tells them apart itself (coordinator/server/server.py).
Handler = Callable[[RequestContext, KafkaRequest], object]

#: A kafka-python response now, or an awaitable of one (a handler that must wait, sometimes).
Reply: TypeAlias = "KafkaResponse | Awaitable[KafkaResponse]"
