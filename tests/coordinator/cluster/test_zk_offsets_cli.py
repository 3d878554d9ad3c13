"""``groupcoord zk-offsets export|import`` as a subprocess against a real ZooKeeper (one per module)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from tests.conftest import REPO, ServerProcess, free_port


def zk_offsets(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "coordinator", "zk-offsets", *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)


@pytest.fixture
def chroot(zk_client: Any, request: pytest.FixtureRequest) -> str:
    """A chroot of this test's own, holding ``/consumers`` of two groups written as Kafka 0.8's consumer did."""
    root = "/" + request.node.name
    client = zk_client
    client.create(f"{root}/consumers/billing/offsets/payments/0", b"286894308", makepath=True)
    client.create(f"{root}/consumers/billing/offsets/payments/1", b"284803985", makepath=True)
    client.create(f"{root}/consumers/billing/offsets/refunds/0", b"7", makepath=True)
    client.create(f"{root}/consumers/audit/offsets/payments/0", b"12", makepath=True)
    return root


def test_export_then_import_into_another_group_path(zookeeper: LocalZooKeeper, zk_client: Any, chroot: str,
                                                    tmp_path: Path) -> None:
    connect = zookeeper.connect + chroot
    exported = tmp_path / "offsets.txt"
    done = zk_offsets("--zookeeper", connect, "export", "--output-file", str(exported), "--group", "billing")
    assert done.returncode == 0, done.stderr
    assert exported.read_text() == ("/consumers/billing/offsets/payments/0:286894308\n"
                                    "/consumers/billing/offsets/payments/1:284803985\n"
                                    "/consumers/billing/offsets/refunds/0:7\n")
    # Into another group (an operator's sed), then into another chroot: parents created.
    renamed = tmp_path / "renamed.txt"
    renamed.write_text(exported.read_text().replace("/billing/", "/billing-copy/"))
    done = zk_offsets("--zookeeper", connect, "import", "--input-file", str(renamed))
    assert done.returncode == 0, done.stderr
    assert "Imported 3 offsets of 1 groups" in done.stdout
    client = zk_client
    assert client.get(f"{chroot}/consumers/billing-copy/offsets/payments/0")[0] == b"286894308"
    assert client.get(f"{chroot}/consumers/billing-copy/offsets/payments/1")[0] == b"284803985"
    assert client.get(f"{chroot}/consumers/billing-copy/offsets/refunds/0")[0] == b"7"
    # Every group exported by default, and the round trip reproduces every znode.
    everything = tmp_path / "all.txt"
    assert zk_offsets("--zookeeper", connect, "export", "--output-file", str(everything)).returncode == 0
    elsewhere = zookeeper.connect + chroot + "-restored"
    client.ensure_path(chroot + "-restored")
    assert zk_offsets("--zookeeper", elsewhere, "import", "--input-file", str(everything)).returncode == 0
    again = tmp_path / "again.txt"
    assert zk_offsets("--zookeeper", elsewhere, "export", "--output-file", str(again)).returncode == 0
    assert again.read_text() == everything.read_text()
    assert everything.read_text().count("\n") == 7


def test_malformed_line_names_it_and_writes_nothing(zookeeper: LocalZooKeeper, zk_client: Any, chroot: str,
                                                    tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("/consumers/billing/offsets/payments/0:1\n/consumers/billing/offsets/payments/1:oops\n")
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(bad))
    assert done.returncode == 1
    assert f"{bad} line 2: offset 'oops' is not a non-negative integer" in done.stderr
    assert "nothing imported" in done.stderr
    assert zk_client.get(f"{chroot}/consumers/billing/offsets/payments/0")[0] == b"286894308"


def test_zookeeper_down_is_a_clear_error(tmp_path: Path) -> None:
    connect = f"127.0.0.1:{free_port()}"
    done = zk_offsets("--zookeeper", connect, "--timeout-ms", "1000", "export", "--output-file",
                      str(tmp_path / "out.txt"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"groupcoord zk-offsets: cannot connect to ZooKeeper at {connect} within 1000 ms"
    assert not (tmp_path / "out.txt").exists()


def test_migrate_dry_run_refusal_execute_and_back(zookeeper: LocalZooKeeper, zk_client: Any, chroot: str,
                                                  shared_server: ServerProcess) -> None:
    from coordinator.tools.group_admin import GroupAdmin
    from tests.clients.records_io import create_topic

    create_topic(shared_server.bootstrap, "payments", partitions=2)
    with GroupAdmin(shared_server.bootstrap) as admin:
        assert admin.alter_offsets("billing", {("payments", 1): 284803990}) == {("payments", 1): 0}
    common = ["--zookeeper", zookeeper.connect + chroot, "migrate", "--group", "billing",
              "--bootstrap-server", shared_server.bootstrap]

    def kafka_offsets() -> dict[tuple[str, int], int]:
        with GroupAdmin(shared_server.bootstrap) as admin:
            return {tp: c.offset for tp, c in admin.committed_offsets(["billing"])["billing"].items()}

    dry = zk_offsets(*common)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "GROUP   TOPIC    PARTITION ZK-OFFSET KAFKA-OFFSET ACTION",
        "billing payments 0         286894308 -            moves",
        "billing payments 1         284803985 284803990    kept: other side newer",
        "billing refunds  0         7         -            moves",
        "Dry run: nothing written; --execute moves the 2 offset(s) marked 'moves'.",
    ]
    assert kafka_offsets() == {("payments", 1): 284803990}

    # A consumer still registered in ZooKeeper: refused, nothing written.
    member = f"{chroot}/consumers/billing/ids/billing_host-1-abcd1234"
    zk_client.create(member, b'{"version":1,"subscription":{"payments":1},"pattern":"static","timestamp":"1"}',
                     ephemeral=True, makepath=True)
    refused = zk_offsets(*common, "--execute")
    assert refused.returncode == 1
    assert "group billing has 1 consumer(s) registered in ZooKeeper" in refused.stderr
    assert "nothing written" in refused.stderr
    assert kafka_offsets() == {("payments", 1): 284803990}
    zk_client.delete(member)

    create_topic(shared_server.bootstrap, "refunds", partitions=1)
    done = zk_offsets(*common, "--execute")
    assert done.returncode == 0, done.stderr
    assert "Moved 2 offset(s) of group billing to-kafka." in done.stdout
    assert kafka_offsets() == {("payments", 0): 286894308, ("payments", 1): 284803990, ("refunds", 0): 7}

    back = zk_offsets(*common, "--direction", "to-zookeeper", "--execute")
    assert back.returncode == 0, back.stderr
    assert "Moved 1 offset(s) of group billing to-zookeeper." in back.stdout
    assert zk_client.get(f"{chroot}/consumers/billing/offsets/payments/1")[0] == b"284803990"
    assert zk_client.get(f"{chroot}/consumers/billing/offsets/payments/0")[0] == b"286894308"


def test_export_skips_a_malformed_znode_naming_it(zookeeper: LocalZooKeeper, zk_client: Any, chroot: str,
                                                  tmp_path: Path) -> None:
    zk_client.create(f"{chroot}/consumers/audit/offsets/payments/1", b"twelve", makepath=True)
    out = tmp_path / "audit.txt"
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "export", "--output-file", str(out),
                      "--group", "audit")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "/consumers/audit/offsets/payments/0:12\n"
    assert "skipped: " in done.stderr and "/consumers/audit/offsets/payments/1" in done.stderr


def test_export_of_an_unknown_group_is_an_error(zookeeper: LocalZooKeeper, chroot: str, tmp_path: Path) -> None:
    connect = zookeeper.connect + chroot
    done = zk_offsets("--zookeeper", connect, "export", "--output-file", str(tmp_path / "x.txt"), "--group", "nope")
    assert done.returncode == 1
    assert done.stderr.strip() == f"groupcoord zk-offsets: no such group under /consumers in {connect}: nope"
    assert not (tmp_path / "x.txt").exists()


def test_migrate_with_kafka_down_names_the_bootstrap(zookeeper: LocalZooKeeper, chroot: str) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "--timeout-ms", "2000", "migrate",
                      "--group", "billing", "--bootstrap-server", bootstrap)
    assert done.returncode == 1
    assert done.stderr.startswith(f"groupcoord zk-offsets: Kafka at {bootstrap}: ")
    assert "Traceback" not in done.stderr


def test_import_failing_in_a_later_group_writes_no_group(zookeeper: LocalZooKeeper, zk_client: Any,
                                                         chroot: str, tmp_path: Path) -> None:
    from kazoo.security import make_acl

    # A group znode nobody may create children under: the file's transaction cannot be written.
    zk_client.create(f"{chroot}/consumers/locked", b"", acl=[make_acl("world", "anyone", read=True)])
    source = tmp_path / "two.txt"
    source.write_text("/consumers/first/offsets/t/0:1\n/consumers/locked/offsets/t/0:2\n")
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(source))
    assert done.returncode == 1
    assert "writing offsets of groups first, locked failed, nothing written: NoAuthError()" in done.stderr
    assert done.stderr.rstrip().endswith("nothing imported")
    assert zk_client.exists(f"{chroot}/consumers/first") is None


def test_import_writes_the_whole_file_in_one_transaction(zookeeper: LocalZooKeeper, zk_client: Any, chroot: str,
                                                         tmp_path: Path) -> None:
    """A later group's failed write leaves the earlier groups of the file untouched (not even their parents)."""
    # ZooKeeper refuses a child of an ephemeral znode: group 'blocked' cannot get its offset znode.
    zk_client.create(f"{chroot}/consumers/blocked/offsets/payments", b"", ephemeral=True, makepath=True)
    file = tmp_path / "offsets.txt"
    file.write_text("/consumers/billing/offsets/payments/0:1\n"
                    "/consumers/fresh/offsets/payments/0:5\n"
                    "/consumers/blocked/offsets/payments/0:9\n")
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file))
    assert done.returncode == 1
    assert "groups billing, fresh, blocked failed, nothing written" in done.stderr
    assert "nothing imported" in done.stderr
    assert zk_client.get(f"{chroot}/consumers/billing/offsets/payments/0")[0] == b"286894308"
    assert zk_client.exists(f"{chroot}/consumers/fresh") is None
    assert zk_client.exists(f"{chroot}/consumers/blocked/offsets/payments/0") is None


def test_import_of_a_file_too_large_for_one_zookeeper_request_is_refused(
        zookeeper: LocalZooKeeper, zk_client: Any, chroot: str, tmp_path: Path) -> None:
    # 10,000 partitions of 50-character lines: over ZooKeeper's default jute.maxbuffer (0xfffff bytes)
    # in one transaction (ZooKeeper would drop the connection); refused before anything is sent.
    file = tmp_path / "big.txt"
    file.write_text("".join(f"/consumers/huge/offsets/payments/{p}:286894308\n" for p in range(10000))
                    + "/consumers/billing/offsets/payments/0:1\n")
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file))
    assert done.returncode == 1
    assert f"{file}: 10001 offsets of 2 groups make a ZooKeeper transaction of " in done.stderr
    assert ("(ZooKeeper's jute.maxbuffer); nothing written; --transaction-per-group writes it group by group"
            in done.stderr)
    assert zk_client.exists(f"{chroot}/consumers/huge") is None
    assert zk_client.get(f"{chroot}/consumers/billing/offsets/payments/0")[0] == b"286894308"


def _group_lines(group: str, offset: int = 5) -> str:
    return "".join(f"/consumers/{group}/offsets/payments/{p}:{offset}\n" for p in range(10))


# A group named with 30,000 characters: its 13 creates make ~390 KB, so three of them are over ZooKeeper's
# ~1 MB request limit together but each fits alone (and one of 90,000 characters does not fit).
BIG = "b" * 30000


def test_transaction_per_group_imports_a_file_too_large_for_one_transaction(
        zookeeper: LocalZooKeeper, zk_client: Any, chroot: str, tmp_path: Path) -> None:
    file = tmp_path / "estate.txt"
    file.write_text(_group_lines(BIG + "1") + _group_lines(BIG + "2") + _group_lines(BIG + "3"))
    whole = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file))
    assert whole.returncode == 1
    assert "30 offsets of 3 groups make a ZooKeeper transaction of" in whole.stderr
    assert "--transaction-per-group writes it group by group" in whole.stderr
    assert zk_client.exists(f"{chroot}/consumers/{BIG}1") is None

    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file),
                      "--transaction-per-group")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"groupcoord zk-offsets: wrote group {BIG}{n} (10 offsets)" for n in (1, 2, 3)]
    assert done.stdout == f"Imported 30 offsets of 3 groups from {file}\n"
    for n in (1, 2, 3):
        assert sorted(zk_client.get_children(f"{chroot}/consumers/{BIG}{n}/offsets/payments"), key=int) == \
            [str(p) for p in range(10)]


def test_transaction_per_group_failure_names_the_group_and_what_is_written(
        zookeeper: LocalZooKeeper, zk_client: Any, chroot: str, tmp_path: Path) -> None:
    zk_client.create(f"{chroot}/consumers/blocked/offsets/payments", b"", ephemeral=True, makepath=True)
    file = tmp_path / "offsets.txt"
    file.write_text(_group_lines("first") + _group_lines("blocked") + _group_lines("last"))
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file),
                      "--transaction-per-group")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "groupcoord zk-offsets: wrote group first (10 offsets)"
    assert lines[1].startswith(f"groupcoord zk-offsets: ZooKeeper at {zookeeper.connect}{chroot}: writing group "
                               "blocked failed: ZooKeeper transaction writing offsets of group blocked failed, "
                               "nothing written: ")
    assert lines[1].endswith("; the 1 group(s) before it are written (listed above); "
                             "the 1 group(s) after it are not written")
    assert len(zk_client.get_children(f"{chroot}/consumers/first/offsets/payments")) == 10
    assert zk_client.get_children(f"{chroot}/consumers/blocked/offsets/payments") == []
    assert zk_client.exists(f"{chroot}/consumers/last") is None


def test_transaction_per_group_refuses_a_group_too_large_before_writing_any(
        zookeeper: LocalZooKeeper, zk_client: Any, chroot: str, tmp_path: Path) -> None:
    file = tmp_path / "offsets.txt"
    file.write_text(_group_lines("first") + _group_lines("x" * 90000) + _group_lines("last"))
    done = zk_offsets("--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file),
                      "--transaction-per-group")
    assert done.returncode == 1
    assert done.stderr.startswith(f"groupcoord zk-offsets: {file}: group {'x' * 90000}: 10 offsets of 1 groups "
                                  "make a ZooKeeper transaction of ")
    assert done.stderr.rstrip().endswith("(one group is one transaction); nothing imported")
    assert zk_client.exists(f"{chroot}/consumers/first") is None


@pytest.mark.parametrize("per_group", [False, True])
def test_a_lost_connection_says_so_and_what_may_be_written(
        zookeeper: LocalZooKeeper, zk_client: Any, chroot: str, tmp_path: Path, per_group: bool,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """kazoo's ConnectionLoss has no message; ZooKeeper closes the connection of a request over its
    jute.maxbuffer. With the size check bypassed, a real too-large transaction is sent."""
    from coordinator.cluster.zk_consumers import ZkConsumers
    from coordinator.zk_offsets_cli import run

    monkeypatch.setattr(ZkConsumers, "_refuse_if_too_large", lambda *args: None)
    file = tmp_path / "offsets.txt"
    file.write_text(_group_lines("first") + _group_lines("x" * 90000))
    status = run(["--zookeeper", zookeeper.connect + chroot, "import", "--input-file", str(file)]
                 + (["--transaction-per-group"] if per_group else []))
    err = capsys.readouterr().err
    assert status == 1
    lost = ("the connection to ZooKeeper was lost (ZooKeeper closes it on a request larger than its "
            "jute.maxbuffer, or it went away)")
    if per_group:
        assert err.splitlines()[0] == "groupcoord zk-offsets: wrote group first (10 offsets)"
        assert f"{lost} while writing group {'x' * 90000} (ConnectionLoss): either all 10 offsets of " in err
        assert "or none were written; the 1 group(s) before it are written (listed above); " \
            "the 0 group(s) after it are not written" in err
        assert len(zk_client.get_children(f"{chroot}/consumers/first/offsets/payments")) == 10
    else:
        assert f"{lost} while importing (ConnectionLoss): either every offset of the file or none was written" in err
        assert zk_client.exists(f"{chroot}/consumers/first") is None
    assert "failed ()" not in err
