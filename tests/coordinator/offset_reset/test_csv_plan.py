"""Kafka's reset-plan CSV: export, import, malformed lines, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.offset_reset.csv_plan import CsvPlanError, export_csv, parse_csv


def test_single_group_has_three_columns() -> None:
    text = export_csv({"g": {("t", 1): 7, ("t", 0): 5}}, single_group=True)
    assert text == "t,0,5\nt,1,7\n"
    assert parse_csv(text, group="g") == {"g": {("t", 0): 5, ("t", 1): 7}}


def test_several_groups_have_four_columns() -> None:
    text = export_csv({"g2": {("t", 0): 1}, "g1": {("u", 3): 9}}, single_group=False)
    assert text == "g1,u,3,9\ng2,t,0,1\n"
    assert parse_csv(text) == {"g1": {("u", 3): 9}, "g2": {("t", 0): 1}}


def test_kafkas_export_with_its_trailing_newline_reads_back() -> None:
    # The tool prints the CSV with println, so a saved export ends in a blank line.
    assert parse_csv("t,0,5\n\n", group="g") == {"g": {("t", 0): 5}}


def test_one_group_reads_a_four_column_file() -> None:
    assert parse_csv("g,t,0,5\nh,t,0,6\n", group="g") == {"g": {("t", 0): 5}, "h": {("t", 0): 6}}


def test_group_ids_with_commas_are_quoted() -> None:
    text = export_csv({'a,"b"': {("t", 0): 1}}, single_group=False)
    assert text == '"a,""b""",t,0,1\n'
    assert parse_csv(text) == {'a,"b"': {("t", 0): 1}}


@pytest.mark.parametrize(
    ("text", "group", "message"),
    [
        ("t,0,5\nt,zero,6\n", "g", "Malformed reset plan line 2: 't,zero,6'; expected topic,partition,offset"),
        ("t,0,5\n", None, "Malformed reset plan line 1: 't,0,5'; expected group,topic,partition,offset"),
        ("g,t,0,5\n\ng,t,1,5\n", None, "Malformed reset plan line 2: ''; expected group,topic,partition,offset"),
        ("", "g", "Malformed reset plan line 1: ''; expected group,topic,partition,offset"),
        ("t,0,5\nt,0,5,9\n", "g", "Malformed reset plan line 2: 't,0,5,9'; expected topic,partition,offset"),
        ("t,0,99999999999999999999\n", "g",
         "Malformed reset plan line 1: 't,0,99999999999999999999'; expected group,topic,partition,offset"),
        ('g,"t,0,5\n', None, "Malformed reset plan line 1: 'g,\"t,0,5'; expected group,topic,partition,offset"),
    ],
)
def test_malformed_lines_are_named(text: str, group: str | None, message: str) -> None:
    with pytest.raises(CsvPlanError) as caught:
        parse_csv(text, group=group)
    assert str(caught.value) == message


names = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x00"), min_size=1, max_size=12)
topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
partitions = st.dictionaries(st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1),
                             min_size=1, max_size=8)


@given(st.dictionaries(names, partitions, min_size=1, max_size=4))
def test_round_trip_several_groups(plan: dict) -> None:  # type: ignore[type-arg]
    assert parse_csv(export_csv(plan, single_group=False)) == plan
    assert parse_csv(export_csv(plan, single_group=False) + "\n") == plan


@given(names, partitions)
def test_round_trip_one_group(group: str, offsets: dict) -> None:  # type: ignore[type-arg]
    assert parse_csv(export_csv({group: offsets}, single_group=True), group=group) == {group: offsets}
