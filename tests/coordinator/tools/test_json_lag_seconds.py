"""Lag in seconds over the wire: ``GroupAdmin.first_unconsumed_timestamps`` (a small Fetch at the
committed offset) and ``groups --describe --output json``'s ``lag_seconds``, against a real server
holding records with known timestamps (tests/coordinator/tools/time_lag_records.py)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import pytest

from coordinator.groups_cli import run
from coordinator.tools.group_admin import GroupAdmin
from protocol.apis import ApiKey
from tests.conftest import ServerProcess
from tests.coordinator.tools.time_lag_records import (
    AFTER_TXN_MS,
    TIMESTAMPS,
    TOPIC,
    TRIMMED,
    TXN,
    TXN_MS,
    stamped_server,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with stamped_server(tmp_path_factory.mktemp("json-lag") / "data") as s:
        yield s


def test_first_unconsumed_timestamps_reads_the_record_at_each_offset(server: ServerProcess,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with GroupAdmin(server.bootstrap) as admin:
        fetches: list[object] = []
        request = admin._request

        def counting(node: object, key: ApiKey, build: object) -> object:
            if key == ApiKey.FETCH:
                fetches.append(node)
            return request(node, key, build)  # type: ignore[arg-type]

        monkeypatch.setattr(admin, "_request", counting)
        # p0 first: it gets a whole batch; p2's 70 KiB batch is over its share and is asked for again.
        found = admin.first_unconsumed_timestamps({(TOPIC, 0): 2, (TOPIC, 2): 1, (TOPIC, 1): 2, ("absent", 0): 0})
        assert found == {(TOPIC, 0): TIMESTAMPS[0][2], (TOPIC, 2): TIMESTAMPS[2][1], (TOPIC, 1): None,
                         ("absent", 0): None}
        assert len(fetches) == 2  # one for all three partitions, one more for p2's big batch
        fetches.clear()
        assert admin.first_unconsumed_timestamps({(TOPIC, 2): 2}) == {(TOPIC, 2): TIMESTAMPS[2][2]}
        assert len(fetches) == 1  # alone in its Fetch, the big batch comes back whole
        # Every offset of a multi-record partition, the first and the last of it included.
        for offset, ts in enumerate(TIMESTAMPS[0]):
            assert admin.first_unconsumed_timestamps({(TOPIC, 0): offset}) == {(TOPIC, 0): ts}
        assert admin.first_unconsumed_timestamps({}) == {}


def test_record_timestamps_skips_markers_and_reads_from_the_log_start(server: ServerProcess) -> None:
    with GroupAdmin(server.bootstrap) as admin:
        found = admin.record_timestamps({(TXN, 0): [0, 1, 2, 3, 4], (TRIMMED, 0): [0, 2, 3]})
        assert found == {
            ((TXN, 0), 0): TXN_MS, ((TXN, 0), 1): TXN_MS,
            ((TXN, 0), 2): AFTER_TXN_MS,  # the COMMIT marker is skipped
            ((TXN, 0), 3): AFTER_TXN_MS,
            ((TXN, 0), 4): None,  # the high watermark: nothing to read
            ((TRIMMED, 0), 0): TIMESTAMPS[0][2],  # below the log start (2): the first record left
            ((TRIMMED, 0), 2): TIMESTAMPS[0][2],
            ((TRIMMED, 0), 3): None,
        }


def test_record_timestamps_answers_offsets_close_together_with_one_read(server: ServerProcess,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with GroupAdmin(server.bootstrap) as admin:
        fetches: list[object] = []
        request = admin._request

        def counting(node: object, key: ApiKey, build: object) -> object:
            if key == ApiKey.FETCH:
                fetches.append(node)
            return request(node, key, build)  # type: ignore[arg-type]

        monkeypatch.setattr(admin, "_request", counting)
        found = admin.record_timestamps({(TOPIC, 0): range(5)})
        assert found == {((TOPIC, 0), o): TIMESTAMPS[0][o] for o in range(5)}
        assert len(fetches) == 1


def test_describe_json_reports_lag_seconds(server: ServerProcess) -> None:
    out, err = io.StringIO(), io.StringIO()
    before = time.time() * 1000
    assert run(["--bootstrap-server", server.bootstrap, "--describe", "--group", "lag-a", "--group", "lag-b",
                "--output", "json"], out, err) == 0, (out.getvalue(), err.getvalue())
    after = time.time() * 1000
    parts = {(g["group"], p["partition"]): p for g in json.loads(out.getvalue()) for p in g["partitions"]}
    assert set(parts) == {("lag-a", 0), ("lag-a", 1), ("lag-a", 2), ("lag-b", 0)}

    def within(row: dict[str, object], ts: int) -> None:
        seconds = row["lag_seconds"]
        assert isinstance(seconds, float)
        assert (before - ts) / 1000 <= seconds <= (after - ts) / 1000, (row, ts)

    within(parts[("lag-a", 0)], TIMESTAMPS[0][2])
    within(parts[("lag-b", 0)], TIMESTAMPS[0][4])  # the same partition at another offset
    within(parts[("lag-a", 2)], TIMESTAMPS[2][1])
    assert parts[("lag-a", 1)]["lag_seconds"] == 0.0 and parts[("lag-a", 1)]["lag"] == 0  # caught up
    assert parts[("lag-a", 0)]["lag"] == 3


def test_plain_describe_keeps_kafkas_columns(server: ServerProcess) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["--bootstrap-server", server.bootstrap, "--describe", "--group", "lag-a"], out, err) == 0
    header = out.getvalue().strip().splitlines()[0].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]
