"""What a handler knows about the request it serves, besides the request itself."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RequestContext", "NodeInfo"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """This node as clients see it: id, advertised endpoint, and the cluster it belongs to."""

    node_id: int
    host: str
    port: int
    cluster_id: str
