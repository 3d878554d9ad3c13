"""The consume-transform-produce copiers (java/TxnCopier.java, txn_confluent_copier.py) on a 3-node cluster, their topics
replicated three times, while one node — picked at random, so sometimes the transaction
coordinator's, the group coordinator's or a partition leader's — is SIGKILLed and restarted: the
clients follow the new leaders and coordinators, and a read_committed consumer of the output still
sees every input exactly once, in order (issue 32, "done when": the exactly-once loop under
SIGKILLs on a 3-node cluster)."""

from __future__ import annotations

import random
import signal
import sys
import time

import pytest

from tests.clients.background import Background, start_java
from tests.clients.tools import unique_topic
from tests.clients.txn_io import assert_exactly_once, committed_offsets, create_topic, read_topic, seed_input

pytestmark = [pytest.mark.clients, pytest.mark.timeout(200)]

#: Few coordinator partitions, so the cluster is up quickly; a classic group forms at once.
CLUSTER_SETTINGS = ("offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3",
                    "group.initial.rebalance.delay.ms=0")


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_copier_on_a_cluster_with_a_node_sigkilled(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import REPO
    from tests.coordinator.cluster.conftest import running_cluster

    rng = random.Random()
    seed, victim, after = rng.randrange(1 << 30), rng.randint(1, 3), rng.randint(2, 6)
    partitions, per_partition = 3, 200
    inp, out, group = unique_topic("ctxn-in"), unique_topic("ctxn-out"), unique_topic("ctxn-g")
    with running_cluster(tmp_path / "cluster", *CLUSTER_SETTINGS) as cluster:
        inputs = seed_input(cluster.bootstrap, inp, partitions, per_partition, replication_factor=3)
        create_topic(cluster.bootstrap, out, partitions, replication_factor=3)

        def logs() -> str:
            return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                             for line in cluster.log_path(b).read_text(errors="replace").splitlines()[-25:])

        txn_id = unique_topic("ctxn-id")
        if kind == "java":
            copier = start_java("TxnCopier", [cluster.bootstrap, inp, out, group, txn_id, "30", "0.15", "assign",
                                              str(seed)], ["TxnCopier.java"])
        else:
            copier = Background([sys.executable, "-m", "tests.clients.txn_confluent_copier", cluster.bootstrap, inp,
                                 out, group, txn_id, "30", "6", "assign"], env={"PYTHONPATH": str(REPO)})
        try:
            assert copier.wait_for(lambda ls: sum(x.startswith("C ") for x in ls) >= after, 90), \
                copier.describe() + "\n" + logs()
            cluster.procs[victim].send_signal(signal.SIGKILL)
            cluster.procs[victim].wait()
            time.sleep(1.0)
            cluster.restart(victim)
            rc = copier.wait(120)
        finally:
            copier.stop()
        print(f"{kind}: seed {seed}, node {victim} killed after {after} commits")
        ctx = f"{kind}: seed {seed}, node {victim} killed after {after} commits\n" + copier.describe(40) + "\n" + logs()
        assert rc == 0 and any(x.startswith("copier.done") for x in copier.lines), ctx
        output = read_topic(cluster.bootstrap, out, partitions, "read_committed", partitions * per_partition)
        assert_exactly_once(inputs, output, ctx)
        assert committed_offsets(cluster.bootstrap, group, inp, partitions) == [per_partition] * partitions, ctx
