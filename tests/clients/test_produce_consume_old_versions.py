"""kafka-python pinned to older broker versions (``api_version``) drives the lower ends of the
version ranges the server offers: Produce v3+, Fetch v4+, ListOffsets v1+ (magic-2 batches
only, so 0.11 is the oldest that can produce)."""

from __future__ import annotations

import pytest

from tests.clients import py_clients as pc
from tests.clients.records_io import assert_same, create_topic, make_records
from tests.clients.tools import unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

P, N = 3, 150
VERSIONS = [(0, 11), (1, 0), (1, 1), (2, 0), (2, 1), (2, 4), (3, 0)]


@pytest.mark.parametrize("api_version", VERSIONS, ids=[".".join(map(str, v)) for v in VERSIONS])
def test_kafka_python_pinned_versions(shared_server, api_version) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bootstrap = shared_server.bootstrap
    topic = unique_topic("kp-old")
    create_topic(bootstrap, topic, P)
    recs = make_records(N, P, null_header_values=False)
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all", compression_type="gzip")
    try:
        futs = [p.send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp,
                       headers=list(r.headers)) for r in recs]
        p.flush(20)
        offs = [f.get(10).offset for f in futs]
    finally:
        p.close(5)
    for part in range(P):
        assert [o for o, r in zip(offs, recs, strict=True) if r.partition == part] == list(range(N // P))

    c = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=None,
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, q) for q in range(P)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        import time

        deadline = time.monotonic() + 20
        while len(got) < N and time.monotonic() < deadline:
            for _tp, msgs in c.poll(timeout_ms=500).items():
                got += [pc.Got(m.partition, m.offset, m.timestamp, pc.TT.get(m.timestamp_type, "?"), m.key,
                               m.value, pc._headers(m.headers)) for m in msgs]
        assert_same(recs, got, shared_server.log_text()[-3000:])
        assert c.end_offsets(tps) == {tp: N // P for tp in tps}
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        ts = [r.timestamp for r in recs if r.partition == 0]
        probe = ts[20] + 1
        want = next(o for o, t in enumerate(ts) if t >= probe)
        r = c.offsets_for_times({tps[0]: probe})[tps[0]]
        assert (r.offset, r.timestamp) == (want, ts[want])
    finally:
        c.close()
