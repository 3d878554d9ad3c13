"""``groupcoord groups`` against a real server with real groups (tests/coordinator/tools/live_groups.py):
--list with its headers, each --describe view with Kafka 4.x's exact columns and widths, the notices
for Empty and rebalancing groups, unknown groups, --delete, --delete-offsets, --output json, --watch."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from coordinator.groups_cli import run
from coordinator.tools.group_admin import GroupAdmin, MemberDescription
from tests.coordinator.tools.live_groups import (
    CLASSIC,
    EMPTY,
    KIP848,
    ORDERS,
    PAYMENTS,
    REBALANCING,
    LiveGroups,
    live_groups,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGroups]:
    with live_groups(tmp_path_factory.mktemp("groups-tool") / "data") as groups:
        yield groups


def groups(live: LiveGroups, *argv: str, **kw: int) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(["--bootstrap-server", live.bootstrap, *argv], out, err, **kw)
    assert status == 0, (out.getvalue(), err.getvalue())
    return out.getvalue(), err.getvalue()


def member(live: LiveGroups, group: str) -> MemberDescription:
    with GroupAdmin(live.bootstrap) as admin:
        (m,) = admin.describe_groups([group])[group].members
    return m


def row(*cells: tuple[object, int]) -> str:
    """Java's ``%-Ns`` for each (value, N), one space apart; N = 0 for the unpadded last column."""
    return " ".join(str(v).ljust(w) for v, w in cells)


def test_list(live: LiveGroups) -> None:
    out, _ = groups(live, "--list")
    assert sorted(out.splitlines()) == sorted([CLASSIC, EMPTY, KIP848, REBALANCING])

    # GROUP is max(15, longest id) + 10 wide ("shop-rebalancing": 16), TYPE and STATE 20.
    out, _ = groups(live, "--list", "--state")
    lines = out.splitlines()
    assert lines[0] == "GROUP".ljust(26) + " " + "STATE".ljust(20)
    assert sorted(lines[1:]) == sorted([CLASSIC.ljust(26) + " " + "Stable".ljust(20),
                                        EMPTY.ljust(26) + " " + "Empty".ljust(20),
                                        KIP848.ljust(26) + " " + "Stable".ljust(20),
                                        REBALANCING.ljust(26) + " " + "PreparingRebalance".ljust(20)])

    out, _ = groups(live, "--list", "--type", "--state", "stable")
    lines = out.splitlines()
    assert lines[0] == "GROUP".ljust(25) + " " + "TYPE".ljust(20) + " " + "STATE".ljust(20)
    assert sorted(lines[1:]) == sorted([CLASSIC.ljust(25) + " " + "Classic".ljust(20) + " " + "Stable".ljust(20),
                                        KIP848.ljust(25) + " " + "Consumer".ljust(20) + " " + "Stable".ljust(20)])

    out, _ = groups(live, "--list", "--type", "CONSUMER")
    assert out.splitlines() == ["GROUP".ljust(25) + " " + "TYPE".ljust(20), KIP848.ljust(25) + " " + "Consumer".ljust(20)]


def test_offsets_view(live: LiveGroups) -> None:
    m = member(live, CLASSIC)
    cw, hw = max(15, len(m.member_id)), max(15, len(m.host))

    def line(t: str, p: object, cur: object, end: object, lag: object, cid: str, host: str, client: str) -> str:
        return row((CLASSIC, 15), (t, 15), (p, 10), (cur, 15), (end, 15), (lag, 15), (cid, cw), (host, hw), (client, 0))

    out, err = groups(live, "--describe", "--group", CLASSIC)
    assert err == ""
    expected = [
        line("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"),
        line(ORDERS, 0, 10, 10, 0, m.member_id, m.host, "classic-client"),
        line(ORDERS, 1, 4, 10, 6, m.member_id, m.host, "classic-client"),
        line(ORDERS, 2, "-", 10, "-", m.member_id, m.host, "classic-client"),
        line(PAYMENTS, 0, 5, 5, 0, m.member_id, m.host, "classic-client"),
        line(PAYMENTS, 1, "-", 5, "-", m.member_id, m.host, "classic-client"),
    ]
    expected[0] = expected[0].replace(CLASSIC, "GROUP".ljust(len(CLASSIC)), 1)
    assert out == "".join("\n" + x for x in expected) + "\n"
    assert groups(live, "--describe", "--group", CLASSIC, "--offsets")[0] == out

    # --verbose adds LEADER-EPOCH (kafka-python commits none: "-").
    out, _ = groups(live, "--describe", "--group", CLASSIC, "--verbose")
    header, first = out.splitlines()[1:3]
    assert header == row(("GROUP", 15), ("TOPIC", 15), ("PARTITION", 10), ("LEADER-EPOCH", 15),
                         ("CURRENT-OFFSET", 15), ("LOG-END-OFFSET", 15), ("LAG", 15), ("CONSUMER-ID", cw),
                         ("HOST", hw), ("CLIENT-ID", 0))
    assert first == row((CLASSIC, 15), (ORDERS, 15), (0, 10), ("-", 15), (10, 15), (10, 15), (0, 15),
                        (m.member_id, cw), (m.host, hw), ("classic-client", 0))


def test_empty_group_notice_and_unowned_rows(live: LiveGroups) -> None:
    out, err = groups(live, "--describe", "--group", EMPTY)
    assert err == f"\nConsumer group '{EMPTY}' has no active members.\n"
    assert out == ("\n" + row(("GROUP", 15), ("TOPIC", 15), ("PARTITION", 10), ("CURRENT-OFFSET", 15),
                              ("LOG-END-OFFSET", 15), ("LAG", 15), ("CONSUMER-ID", 15), ("HOST", 15), ("CLIENT-ID", 0))
                   + "\n" + row((EMPTY, 15), (ORDERS, 15), (0, 10), (3, 15), (10, 15), (7, 15), ("-", 15), ("-", 15),
                                ("-", 0)) + "\n")


def test_rebalancing_group_warning(live: LiveGroups) -> None:
    # The group has no rows (its members own nothing yet): only the warning, as Kafka.
    out, err = groups(live, "--describe", "--group", REBALANCING)
    assert (out, err) == ("", f"\nWarning: Consumer group '{REBALANCING}' is rebalancing.\n")
    out, err = groups(live, "--describe", "--group", REBALANCING, "--state")
    assert err == f"\nWarning: Consumer group '{REBALANCING}' is rebalancing.\n"
    assert "PreparingRebalance" in out


def test_unknown_group(live: LiveGroups) -> None:
    error = "\nError: Consumer group 'nope' does not exist.\n"
    assert groups(live, "--describe", "--group", "nope") == (error, "")
    assert groups(live, "--describe", "--group", "nope", "--state") == (error, "")
    # The members view prints its header even then (Kafka's printMembers).
    out, _ = groups(live, "--describe", "--group", "nope", "--members")
    assert out == error + "\n" + row(("GROUP", 15), ("CONSUMER-ID", 15), ("HOST", 15), ("CLIENT-ID", 15),
                                     ("#PARTITIONS", 15)) + " \n"


def test_members_view(live: LiveGroups) -> None:
    classic, kip848 = member(live, CLASSIC), member(live, KIP848)
    out, err = groups(live, "--describe", "--group", CLASSIC, "--group", KIP848, "--members")
    assert err == ""
    cw1, cw2 = max(15, len(classic.member_id)), max(15, len(kip848.member_id))
    assert out == (
        "\n" + row(("GROUP", 15), ("CONSUMER-ID", cw2), ("HOST", 15), ("CLIENT-ID", 15), ("#PARTITIONS", 15)) + " \n"
        + row((KIP848, 15), (kip848.member_id, cw2), (kip848.host, 15), ("pay-848", 15), (2, 15)) + " \n"
        + "\n" + row(("GROUP", 15), ("CONSUMER-ID", cw1), ("HOST", 15), ("CLIENT-ID", 15), ("#PARTITIONS", 15)) + " \n"
        + row((CLASSIC, 15), (classic.member_id, cw1), (classic.host, 15), ("classic-client", 15), (5, 15)) + " \n")

    out, _ = groups(live, "--describe", "--group", KIP848, "--members", "--verbose")
    with GroupAdmin(live.bootstrap) as admin:
        target_epoch = admin.describe_groups([KIP848])[KIP848].target_assignment_epoch
    lines = out.split("\n")
    assert lines[1] == row(("GROUP", 15), ("CONSUMER-ID", cw2), ("HOST", 15), ("CLIENT-ID", 15), ("#PARTITIONS", 15)) \
        + " " + row(("CURRENT-EPOCH", 15), ("CURRENT-ASSIGNMENT", 20), ("TARGET-EPOCH", 15), ("TARGET-ASSIGNMENT", 20))
    assert lines[2] == row((KIP848, 15), (kip848.member_id, cw2), (kip848.host, 15), ("pay-848", 15), (2, 15)) \
        + " " + row((kip848.member_epoch, 15), ("payments:0,1", 20), (target_epoch, 15), ("payments:0,1", 20))

    out, _ = groups(live, "--describe", "--group", CLASSIC, "--members", "--verbose")
    assert out.split("\n")[2].endswith(" " + row(("-", 15), ("orders:0,1,2;payments:0,1", 25), ("-", 15), ("-", 20)))


def test_state_view(live: LiveGroups) -> None:
    with GroupAdmin(live.bootstrap) as admin:
        d = admin.describe_groups([KIP848])[KIP848]
    assert d.coordinator is not None
    coordinator = f"{d.coordinator.host}:{d.coordinator.port}  ({d.coordinator.id})"
    cw = max(25, len(coordinator))
    out, err = groups(live, "--describe", "--group", KIP848, "--state")
    assert err == ""
    assert out == ("\n" + row(("GROUP", 15), ("COORDINATOR (ID)", cw), ("ASSIGNMENT-STRATEGY", 20), ("STATE", 20),
                              ("#MEMBERS", 0))
                   + "\n" + row((KIP848, 15), (coordinator, cw), ("uniform", 20), ("Stable", 20), (1, 0)) + "\n")
    out, _ = groups(live, "--describe", "--group", KIP848, "--state", "--verbose")
    assert out.split("\n")[2] == row((KIP848, 15), (coordinator, cw), ("uniform", 20), ("Stable", 20),
                                     (d.group_epoch, 15), (d.target_assignment_epoch, 25), (1, 0))
    # An Empty classic group: no assignor ("-"), the notice on stderr, the row still printed.
    out, err = groups(live, "--describe", "--group", EMPTY, "--state")
    assert err == f"\nConsumer group '{EMPTY}' has no active members.\n"
    # One node: every group has the same coordinator.
    assert out.split("\n")[2] == row((EMPTY, 15), (coordinator, cw), ("-", 20), ("Empty", 20), (0, 0))


def test_all_groups_in_sorted_order(live: LiveGroups) -> None:
    out, _ = groups(live, "--describe", "--all-groups", "--state")
    named = [line.split(" ")[0] for line in out.split("\n") if line.startswith("shop-")]
    assert named == sorted([CLASSIC, EMPTY, KIP848, REBALANCING])


def test_json_output(live: LiveGroups) -> None:
    out, _ = groups(live, "--describe", "--group", CLASSIC, "--group", "nope", "--output", "json")
    data = json.loads(out)
    assert [g["group"] for g in data] == ["nope", CLASSIC]  # sorted, as the tables
    assert data[0] == {"group": "nope", "state": "Dead", "error": "Consumer group 'nope' does not exist."}
    rows = {(r["topic"], r["partition"]): (r["current_offset"], r["log_end_offset"], r["lag"]) for r in data[1]["partitions"]}
    assert rows == {(ORDERS, 0): (10, 10, 0), (ORDERS, 1): (4, 10, 6), (ORDERS, 2): (None, 10, None),
                    (PAYMENTS, 0): (5, 5, 0), (PAYMENTS, 1): (None, 5, None)}
    members = json.loads(groups(live, "--describe", "--group", KIP848, "--members", "--output", "json")[0])
    assert members[0]["members"][0]["assignment"] == [{"topic": PAYMENTS, "partition": 0},
                                                      {"topic": PAYMENTS, "partition": 1}]
    states = json.loads(groups(live, "--describe", "--group", KIP848, "--state", "--output", "json")[0])
    assert (states[0]["state"], states[0]["assignment_strategy"], states[0]["members"]) == ("Stable", "uniform", 1)
    listed = json.loads(groups(live, "--list", "--output", "json")[0])
    assert {g["group"]: g["type"] for g in listed}[KIP848] == "Consumer"


def test_watch_refreshes(live: LiveGroups) -> None:
    out, _ = groups(live, "--describe", "--group", CLASSIC, "--watch", "0.05", watch_refreshes=2)
    assert "total lag 6" in out and "Stable" in out
    assert CLASSIC in out and "classic-client" in out and "orders" in out and "payments" in out


def test_delete_and_delete_offsets(live: LiveGroups) -> None:
    # A group made by an admin commit (no member): Empty, deletable.
    with GroupAdmin(live.bootstrap) as admin:
        assert admin.alter_offsets("shop-doomed", {(ORDERS, 0): 1, (ORDERS, 1): 2}) == {(ORDERS, 0): 0, (ORDERS, 1): 0}

    out, _ = groups(live, "--delete", "--group", CLASSIC)
    assert out == ("\nError: Deletion of some consumer groups failed:\n"
                   f"* Group '{CLASSIC}' could not be deleted due to: "
                   "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n")

    out, _ = groups(live, "--delete-offsets", "--group", "shop-doomed", "--topic", f"{ORDERS}:1")
    assert out == ("Request succeeded for deleting offsets from group shop-doomed.\n"
                   "\n" + row(("TOPIC", 15), ("PARTITION", 10), ("STATUS", 15))
                   + "\n" + row((ORDERS, 15), (1, 10), ("Successful", 15)) + "\n")

    out, _ = groups(live, "--delete-offsets", "--group", CLASSIC, "--topic", PAYMENTS)
    status = "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: " \
             "The consumer group is actively subscribed to the topic"
    assert out == ("\nError: Encountered some partition-level error, see the follow-up details.\n"
                   "\n" + row(("TOPIC", 15), ("PARTITION", 10), ("STATUS", 15))
                   + "\n" + row((PAYMENTS, 15), (0, 10), (status, 15))
                   + "\n" + row((PAYMENTS, 15), (1, 10), (status, 15)) + "\n")

    out, _ = groups(live, "--delete", "--group", "shop-doomed", "--group", "never-was")
    assert out == ("\nError: Deletion of some consumer groups failed:\n"
                   "* Group 'never-was' could not be deleted due to: "
                   "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.\n"
                   "\nThese consumer groups were deleted successfully: 'shop-doomed'\n")
    wait_until(lambda: "shop-doomed" not in groups(live, "--list")[0], 10, "the deleted group to go")


def test_watch_redraws_until_told_to_stop() -> None:
    from rich.console import Console

    from coordinator.tools.describe_views import GroupOffsets, OffsetRow
    from coordinator.tools.watch import watch

    lags = iter([5, 3])
    naps: list[float] = []

    def collect() -> list[GroupOffsets]:
        lag = next(lags)
        return [GroupOffsets("g", "Stable", None, [OffsetRow("g", "t", 0, None, 10 - lag, 10, lag, "m", "/h", "c")])]

    out = io.StringIO()
    assert watch(collect, 1.5, Console(file=out, width=200), refreshes=2, sleep=naps.append) == 2
    assert naps == [1.5]
    assert "total lag 3" in out.getvalue()


def test_reset_offsets_reaches_run_reset_through_the_command_line(live: LiveGroups) -> None:
    # A dry run only (the reset's own tests execute plans): the plan table of the Empty group.
    out, err = groups(live, "--reset-offsets", "--group", EMPTY, "--topic", f"{ORDERS}:0", "--to-earliest", "--dry-run")
    assert err == ""
    assert out == ("\n" + row(("GROUP", 30), ("TOPIC", 30), ("PARTITION", 10), ("NEW-OFFSET", 15))
                   + "\n" + row((EMPTY, 30), (ORDERS, 30), (0, 10), (0, 15)) + "\n")
    with GroupAdmin(live.bootstrap) as admin:
        assert admin.committed_offsets([EMPTY])[EMPTY][(ORDERS, 0)].offset == 3
    # A usage error found while planning (--shift-by without a committed offset: orders-1) gets the help, status 1.
    out_, err_ = io.StringIO(), io.StringIO()
    status = run(["--bootstrap-server", live.bootstrap, "--reset-offsets", "--group", EMPTY, "--topic", f"{ORDERS}:1",
                  "--shift-by", "1", "--dry-run"], out_, err_)
    assert status == 1
    assert err_.getvalue().startswith("Cannot shift offset for partition orders-1 since there is no current committed "
                                      "offset\nOption "), err_.getvalue()
