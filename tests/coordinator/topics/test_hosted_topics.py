"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch through real sockets and real files."""

from __future__ import annotations

import os
import threading
import time

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import Compression, build_batch, decode_records, iter_batch_positions
from tests.wire_client import WireClient

CT = CreateTopicsRequest.CreatableTopic


def create(c: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    resp = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])]))
    assert resp.topics[0].error_code == 0, resp


def produce(c: WireClient, topic: str, batch: bytes, partition: int = 0, acks: int = -1, version: int = 9) -> object:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=version, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)])])
    return c.request(ApiKey.PRODUCE, version, req).responses[0].partition_responses[0]


def fetch(c: WireClient, topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 0,
          version: int = 11, max_bytes: int = 1 << 20) -> object:
    F = FetchRequest.FetchTopic
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                       max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[F(topic=topic, partitions=[F.FetchPartition(
                           partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=max_bytes)])], forgotten_topics_data=[], rack_id="")
    return c.request(ApiKey.FETCH, version, req).responses[0].partitions[0]


def list_offset(c: WireClient, topic: str, timestamp: int, partition: int = 0) -> tuple[int, int, int]:
    L = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[L(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    p = c.request(ApiKey.LIST_OFFSETS, 7, req).topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def records_of(data: bytes) -> list[tuple[int, bytes | None]]:
    out = []
    for pos, header in iter_batch_positions(data):
        out += [(header.base_offset + r.offset_delta, r.value) for r in decode_records(data, pos, header)]
    return out


def batch(values: list[bytes], ts: int = 1_000, **options: int | bool) -> bytes:
    return build_batch([(None, v) for v in values], timestamp_ms=ts, **options)


def test_produce_then_fetch_every_codec(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "codecs")
        expected = []
        for codec in Compression:
            values = [f"{codec.name}-{i}".encode() * 20 for i in range(5)]
            resp = produce(c, "codecs", batch(values, compression=codec))
            assert resp.error_code == 0 and resp.base_offset == len(expected)
            expected += values
        p = fetch(c, "codecs", 0)
        assert p.error_code == 0 and p.high_watermark == len(expected)
        assert [v for _, v in records_of(p.records)] == expected
        assert records_of(fetch(c, "codecs", 12).records)[0][0] <= 12


def test_bad_batches_get_kafkas_errors_and_nothing_is_appended(server_factory) -> None:
    server = server_factory({"auto.create.topics.enable": "false"})
    with WireClient(server.host, server.port) as c:
        create(c, "strict", configs={"max.message.bytes": "2000"})
        good = batch([b"x"])
        bad_crc = bytearray(good)
        bad_crc[-1] ^= 0xFF
        magic1 = bytearray(good)
        magic1[16] = 1
        assert produce(c, "strict", bytes(bad_crc)).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(c, "strict", bytes(magic1)).error_code == ErrorCode.INVALID_RECORD
        assert produce(c, "strict", batch([b"y" * 3000])).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(c, "strict", good + good).error_code == ErrorCode.INVALID_RECORD
        assert produce(c, "strict", good[:-3]).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(c, "strict", good, acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
        assert produce(c, "nowhere", good).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(c, "strict", good, partition=5).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offset(c, "strict", -1) == (0, 0, -1)
        assert produce(c, "strict", good).base_offset == 0


def test_idempotent_retries_gaps_and_epochs_across_restarts(server) -> None:
    with WireClient(server.host, server.port) as c:
        create(c, "idem")
        init = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        pid, epoch = init.producer_id, init.producer_epoch
        assert init.error_code == 0 and epoch == 0

        def send(seq: int, n: int = 2, ep: int = epoch) -> object:
            return produce(c, "idem", batch([b"%d" % (seq + i) for i in range(n)], producer_id=pid,
                                            producer_epoch=ep, base_sequence=seq))

        assert send(0).base_offset == 0
        assert send(2).base_offset == 2
        retry = send(2)
        assert (retry.error_code, retry.base_offset) == (0, 2)  # success, original offsets, no copy
        assert send(7).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert list_offset(c, "idem", -1)[1] == 4
    server.restart()  # graceful: producer state comes back from its snapshot
    with WireClient(server.host, server.port) as c:
        assert (send_again := produce(c, "idem", batch([b"2", b"3"], producer_id=pid, producer_epoch=epoch,
                                                          base_sequence=2))).base_offset == 2
        assert send_again.error_code == 0
    server.kill()  # crash: producer state is rebuilt from the batch headers
    server.start()
    with WireClient(server.host, server.port) as c:
        again = produce(c, "idem", batch([b"2", b"3"], producer_id=pid, producer_epoch=epoch, base_sequence=2))
        assert (again.error_code, again.base_offset) == (0, 2)
        nxt = produce(c, "idem", batch([b"4"], producer_id=pid, producer_epoch=epoch, base_sequence=4))
        assert (nxt.error_code, nxt.base_offset) == (0, 4)
        old = produce(c, "idem", batch([b"5"], producer_id=pid, producer_epoch=epoch - 1 if epoch else -2,
                                       base_sequence=5))
        assert old.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.NONE) or epoch == 0
        assert [v for _, v in records_of(fetch(c, "idem", 0).records)] == [b"0", b"1", b"2", b"3", b"4"]
        second = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=pid, producer_epoch=epoch))
        assert second.producer_id > pid  # ids are never handed out twice, across restarts too


def test_fenced_epoch(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "fenced")
        pid = 424242
        assert produce(c, "fenced", batch([b"a"], producer_id=pid, producer_epoch=3, base_sequence=0)).error_code == 0
        assert produce(c, "fenced", batch([b"b"], producer_id=pid, producer_epoch=2, base_sequence=1)).error_code == \
            ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce(c, "fenced", batch([b"c"], producer_id=pid, producer_epoch=4, base_sequence=3)).error_code == \
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "fenced", batch([b"d"], producer_id=pid, producer_epoch=4, base_sequence=0)).error_code == 0


def test_acks_zero_sends_no_response_but_appends(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "fire")
        P = ProduceRequest.TopicProduceData
        c.send(ApiKey.PRODUCE, 9, ProduceRequest(version=9, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
            P(name="fire", partition_data=[P.PartitionProduceData(index=0, records=batch([b"z"]))])]))
        # The next response on the connection is the ListOffsets answer: nothing came for Produce.
        deadline = time.monotonic() + 5
        while list_offset(c, "fire", -1)[1] != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert list_offset(c, "fire", -1)[1] == 1


def test_acks_zero_refused_closes_the_connection(shared_server) -> None:
    """Kafka's answer to an acks=0 Produce that fails on a partition: no response, the connection
    closed (the producer's only signal to refresh its metadata); what was answered before is sent."""
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "fire0")
        P = ProduceRequest.TopicProduceData
        c.send(ApiKey.PRODUCE, 9, ProduceRequest(version=9, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
            P(name="fire0", partition_data=[P.PartitionProduceData(index=7, records=batch([b"z"]))])]))
        c.sock.settimeout(5)
        assert c.sock.recv(1) == b"", "the connection stays open after a refused acks=0 produce"
    with WireClient(shared_server.host, shared_server.port) as c:  # the server itself is fine
        assert list_offset(c, "fire0", -1)[1] == 0


def test_log_append_time_topics(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "appendtime", configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        resp = produce(c, "appendtime", batch([b"a", b"b"], ts=5))
        assert before <= resp.log_append_time_ms <= int(time.time() * 1000)
        data = fetch(c, "appendtime", 0).records
        (pos, header), = list(iter_batch_positions(data))
        assert header.log_append_time and header.max_timestamp == resp.log_append_time_ms
        assert [r.timestamp(header) for r in decode_records(data, pos, header)] == [resp.log_append_time_ms] * 2


def test_fetch_offsets_out_of_range_and_leader_epochs(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "range")
        produce(c, "range", batch([b"a", b"b"]))
        assert fetch(c, "range", 3).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        at_end = fetch(c, "range", 2)
        assert at_end.error_code == 0 and at_end.records in (b"", None) and at_end.high_watermark == 2
        E = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        req = OffsetForLeaderEpochRequest(version=4, replica_id=-1, topics=[E(topic="range", partitions=[
            E.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
            E.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=3),
            E.OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=0)])])
        got = [(p.error_code, p.leader_epoch, p.end_offset)
               for p in c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, req).topics[0].partitions]
        assert got == [(0, 0, 2), (0, -1, -1), (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)]


def test_list_offsets(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        create(c, "times")
        produce(c, "times", build_batch([(None, b"a"), (None, b"b")], timestamp_ms=1000))
        produce(c, "times", build_batch([(None, b"c")], timestamp_ms=5000))
        produce(c, "times", build_batch([(None, b"d")], timestamp_ms=3000))
        assert list_offset(c, "times", -2)[:2] == (0, 0)
        assert list_offset(c, "times", -1)[:2] == (0, 4)
        assert list_offset(c, "times", -3) == (0, 2, 5000)
        assert list_offset(c, "times", 2000) == (0, 2, 5000)
        assert list_offset(c, "times", 1000) == (0, 0, 1000)
        assert list_offset(c, "times", 9000) == (0, -1, -1)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_long_poll_wakes_on_append_and_costs_no_cpu_while_idle(server) -> None:
    with WireClient(server.host, server.port) as c:
        create(c, "poll")
    waiter = WireClient(server.host, server.port)
    assert server.proc is not None
    cpu_before = _cpu_seconds(server.proc.pid)
    start = time.monotonic()
    empty = fetch(waiter, "poll", 0, max_wait_ms=1500, min_bytes=1)
    assert time.monotonic() - start >= 1.4 and empty.records in (b"", None)
    # Parked, not polling: a poll loop would burn most of the 1.5 s. The bound is loose because the
    # suite runs in parallel workers on a loaded machine (speed targets live in bench/, not here).
    assert _cpu_seconds(server.proc.pid) - cpu_before < 0.4
    latencies = []
    for i in range(5):
        result: dict[str, float] = {}

        def consume(i: int, result: dict[str, float]) -> None:
            p = fetch(waiter, "poll", i, max_wait_ms=5000, min_bytes=1)
            result["at"] = time.monotonic()
            result["n"] = len(records_of(p.records))

        t = threading.Thread(target=consume, args=(i, result))
        t.start()
        time.sleep(0.3)
        with WireClient(server.host, server.port) as producer:
            produce(producer, "poll", batch([b"%d" % i]))
            appended = time.monotonic()
        t.join(10)
        assert result["n"] == 1
        latencies.append(result["at"] - appended)
    waiter.close()
    # Woken by the append, not by max_wait_ms (5 s): loose for the same reason.
    assert max(latencies) < 1.0, latencies


def test_acknowledged_records_survive_sigkill(server) -> None:
    with WireClient(server.host, server.port) as c:
        create(c, "crash", configs={"flush.messages": "1"})
    acked: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            with WireClient(server.host, server.port) as w:
                i = 0
                while not stop.is_set():
                    resp = produce(w, "crash", batch([b"%d" % i]))
                    if resp.error_code == 0:
                        acked.append(resp.base_offset)
                    i += 1
        except (ConnectionError, OSError):
            pass

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    server.kill()
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acked) > 50
    server.start()
    with WireClient(server.host, server.port) as c:
        end = list_offset(c, "crash", -1)[1]
        assert end >= max(acked) + 1
        seen = []
        offset = 0
        while offset < end:
            recs = records_of(fetch(c, "crash", offset).records)
            seen += [o for o, _ in recs if o >= offset]
            offset = recs[-1][0] + 1
        assert set(acked) <= set(seen) and len(seen) == len(set(seen)) == end
