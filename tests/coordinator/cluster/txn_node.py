"""``python -m tests.coordinator.cluster.txn_node serve ...``: a node whose ``App`` carries the
cluster-mode transaction wiring txncluster asks of ``coordinator/app.py`` (TXN.md, section
txncluster), so the tests of ``test_txn_cluster.py`` run the real pieces on real nodes before
``app.py`` has the lines. Once it has them, each step below finds its piece in place and does
nothing; then this module can go.

* every coordinator type's service follows its topic through ``CoordinatorLeadership``;
* the transaction coordinator's markers go through ``ClusterMarkerChannel`` (other nodes' partitions
  as WriteTxnMarkers to their leaders);
* Produce verifies with ``ClusterVerifier`` (AddPartitionsToTxn v4 to the id's coordinator).
"""

from __future__ import annotations

import sys

from coordinator import app as app_module
from coordinator.cli import main
from coordinator.cluster.coordinator_leadership import CoordinatorLeadership, CoordinatorService
from coordinator.cluster.txn_marker_channel import ClusterMarkerChannel
from coordinator.cluster.txn_verifier import ClusterVerifier
from coordinator.context import NodeInfo
from coordinator.server.server import Handler
from coordinator.topics.registry import CONSUMER_OFFSETS, TRANSACTION_STATE
from protocol.apis import ApiKey


class TxnClusterApp(app_module.App):
    def _build_cluster(self, node: NodeInfo) -> None:
        super()._build_cluster(node)
        assert self.replicas is not None and self.view is not None
        if not any(isinstance(getattr(f, "__self__", None), CoordinatorLeadership)
                   for f in self.replicas.leadership_listeners):
            services: dict[str, CoordinatorService] = {CONSUMER_OFFSETS: self.groups,
                                                       TRANSACTION_STATE: self.transactions}
            leadership = CoordinatorLeadership()
            for ctype in self.coordinator_types:
                leadership.register(ctype.topic, services[ctype.topic])
            self.replicas.leadership_listeners[:] = [leadership.on_leadership]
        if not isinstance(self.transactions.marker_writer, ClusterMarkerChannel):
            self.transactions.marker_writer = ClusterMarkerChannel(node.node_id, self.view, self.txn_markers)

    def _build_handlers(self, node: NodeInfo) -> dict[ApiKey, Handler]:
        handlers = super()._build_handlers(node)
        produce = getattr(handlers[ApiKey.PRODUCE], "__self__", None)
        if self.view is not None and produce is not None and produce.verifier is self.transactions:
            produce.verifier = ClusterVerifier(node.node_id, self.view, self.transactions)
        return handlers


if __name__ == "__main__":
    app_module.App = TxnClusterApp  # type: ignore[misc]  # cli.py imports App when it serves
    sys.exit(main())
