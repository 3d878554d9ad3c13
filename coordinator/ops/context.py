"""What the HTTP side of a node (metrics, health, dashboard) is handed: one object, built by
``coordinator/app.py`` when ``http.listen`` is set, so nothing under ``coordinator/ops`` reaches
into the node's parts by itself."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry

from ..config import Config
from ..context import Handler

if TYPE_CHECKING:
    from protocol.apis import ApiKey

    from ..faults.engine import FaultEngine
    from .lag_monitor import LagMonitor
    from .readiness import Readiness
    from .state_view import StateView

__all__ = ["OpsContext", "Exposition"]


class Exposition(Protocol):
    """What /metrics serves (``metrics.MetricsExposition``; a protocol here, so the context does
    not import the metrics that import it)."""

    async def render(self, names: Collection[str] | None = None) -> bytes:
        """Every family, or only those with a sample named in ``names`` (``/metrics?name[]=``)."""
        ...

    async def render_parts(self, names: Collection[str] | None = None) -> list[bytes]:
        """``render``'s body in pieces, for the listener to write one after the other."""
        ...


@dataclass
class OpsContext:
    config: Config
    view: StateView
    lag: LagMonitor
    readiness: Readiness
    #: The node's Kafka handlers by api key: the dashboard runs an action through the real
    #: handler (an OffsetCommit for a reset) so that API's ACLs and validation apply.
    handlers: Mapping[ApiKey, Handler]
    #: The node's authorizer (None: no ``authorizer.class.name``, every check passes).
    authorizer: Any = None
    #: SCRAM credentials (``.get(user, mechanism)``) for HTTP Basic on mutating endpoints when
    #: SASL is configured; ``plain_users`` the JAAS PLAIN ``user_<name>="<password>"`` entries.
    scram_store: Any = None
    plain_users: Mapping[str, str] = field(default_factory=dict)
    admin_enabled: bool = False
    #: The registry /metrics exposes (a private one: no process-global state between nodes).
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    #: The cluster id, and this node's id (labels; ``lag.cluster.name`` overrides the first).
    cluster_id: str = ""
    node_id: int = -1
    #: The current time in ms (injected so tests drive it).
    clock_ms: Callable[[], int] | None = None
    #: What /metrics serves (``metrics.register_metrics`` sets it; None: the registry alone).
    metrics: Exposition | None = None
    #: ``test.faults.enable``: the node's fault engine, served on /faults (ops/faults_routes.py).
    faults: FaultEngine | None = None
    #: Cluster mode with ``http.listen``: ZooKeeper-era groups read from /consumers (ops/zk_era_groups.py).
    zk_era: Any = None

    @property
    def cluster_name(self) -> str:
        """The ``cluster_name`` label: ``lag.cluster.name`` if set, else the cluster id."""
        return str(self.config["lag.cluster.name"]) or self.cluster_id
