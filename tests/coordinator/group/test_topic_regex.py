"""SubscribedTopicRegex as Kafka reads it: RE2 syntax, a full match of the topic name, Kafka's
INVALID_REGULAR_EXPRESSION message, linear time, and a resolver for many patterns at once."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.topic_regex import (
    InvalidTopicRegex,
    TopicRegex,
    compile_topic_regex,
    resolve,
    resolve_all,
)

TOPICS = ["topic", "topic-1", "topic-2", "my-topic", "orders.eu", "orders_us", "__consumer_offsets"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # Full match: a prefix alone names only the topic of that exact name (librdkafka's KIP-848 note).
        ("^topic", {"topic"}),
        ("topic", {"topic"}),
        ("^topic*", {"topic"}),
        ("topic.*", {"topic", "topic-1", "topic-2"}),
        ("^topic.*$", {"topic", "topic-1", "topic-2"}),
        ("topic-\\d", {"topic-1", "topic-2"}),
        (".*topic.*", {"topic", "topic-1", "topic-2", "my-topic"}),
        ("orders[._](eu|us)", {"orders.eu", "orders_us"}),
        ("orders\\.eu", {"orders.eu"}),
        ("(?i)ORDERS.*", {"orders.eu", "orders_us"}),
        # Internal topics are not excluded: Kafka matches every name of the metadata image.
        ("__.*", {"__consumer_offsets"}),
        ("nothing", set()),
    ],
)
def test_a_pattern_matches_whole_names(pattern: str, expected: set[str]) -> None:
    assert resolve(pattern, TOPICS) == frozenset(expected)
    regex = compile_topic_regex(pattern)
    assert {t for t in TOPICS if regex.matches(t)} == expected


def test_the_empty_pattern_matches_only_the_empty_name() -> None:
    assert resolve("", TOPICS) == frozenset()
    assert compile_topic_regex("").matches("")


@pytest.mark.parametrize(
    ("pattern", "description"),
    [
        # RE2/J's descriptions (re2j Parser.java), which Kafka puts in the message.
        ("(abc", "missing closing )"),
        ("[a", "missing closing ]"),
        ("a**", "invalid nested repetition operator"),
        ("*a", "missing argument to repetition operator"),
        ("x{1001}", "invalid repeat count"),
        ("a\\", "trailing backslash at end of expression"),
        ("\\8", "invalid escape sequence"),
        ("(?=a)", "invalid or unsupported Perl syntax"),  # no lookaround in RE2
        ("(a)\\1", "invalid escape sequence"),  # no backreferences either
        ("[z-a]", "invalid character class range"),
        ("\\p{NoSuchClass}", "invalid character class range"),
        ("(?P<>a)", "invalid named capture"),
        ("a)", "regexp/syntax: internal error"),  # RE2/J's parser underflows on a lone )
        # Accepted by RE2, refused by RE2/J: refused here too.
        ("\\C", "invalid escape sequence"),
        ("topic-\\C+", "invalid escape sequence"),
        ("(?P<n>a)(?P<n>b)", "duplicate capture group name"),
        ("(?<n>a)|(?P<n>b)", "duplicate capture group name"),
    ],
)
def test_an_invalid_pattern_is_refused_with_kafkas_message(pattern: str, description: str) -> None:
    with pytest.raises(InvalidTopicRegex) as raised:
        compile_topic_regex(pattern)
    assert raised.value.description == description
    assert raised.value.pattern == pattern
    assert str(raised.value) == f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    with pytest.raises(InvalidTopicRegex):
        resolve(pattern, TOPICS)


@pytest.mark.parametrize(
    "pattern",
    [
        "\\\\C",  # a backslash, then C
        "\\QC\\C\\E",  # quoted: literal text
        "[\\\\C]",
        "(?P<a>x)(?P<b>y)",
        "[(?P<n>](?P<n>x)",  # the first "(?P<n>" is inside a character class
        "[]a](?P<n>x)",
        "[[:alpha:]]+(?<n>x)",
        "\\Q(?P<n>\\E(?P<n>x)",
    ],
)
def test_what_only_looks_like_an_re2j_refusal_compiles(pattern: str) -> None:
    assert isinstance(compile_topic_regex(pattern), TopicRegex)


def test_quoted_text_and_a_literal_backslash_match_as_text() -> None:
    assert compile_topic_regex("\\QC\\C\\E").matches("C\\C")
    assert compile_topic_regex("a\\\\Cb").matches("a\\Cb")


def test_a_catastrophic_backtracking_pattern_completes_on_a_long_name() -> None:
    # With a backtracking engine each of these takes exponential time in the length of the name;
    # RE2 reads the name once. Here the name is 100,000 characters (a topic name is at most 249).
    name = "a" * 100_000 + "!"
    for pattern in ["(a+)+$", "(a|a)*b", "(a*)*b", "(a|aa)+c", "(.*a){20}"]:
        assert not compile_topic_regex(pattern).matches(name)
    assert compile_topic_regex("(a+)+!").matches(name)


def test_a_huge_pattern_is_refused_cleanly() -> None:
    huge = "(" + "|".join(f"topic-{i:05d}" for i in range(6000)) + "){1000}"
    with pytest.raises(InvalidTopicRegex) as raised:
        compile_topic_regex(huge)
    assert raised.value.description == "pattern too large - compile failed"
    assert str(raised.value).startswith("SubscribedTopicRegex `(topic-00000|")
    # A pattern as long as a Kafka string allows, but small once compiled, is fine.
    long_literal = "x" * 32_767
    assert compile_topic_regex(long_literal).matches(long_literal)


def test_nested_repetition_beyond_re2s_limit_is_refused() -> None:
    for pattern in ("((a{100}){100})", "((((a{100}){100}){100}){100})"):
        with pytest.raises(InvalidTopicRegex, match="invalid repeat count"):
            compile_topic_regex(pattern)
    assert compile_topic_regex("(a{30}){30}").matches("a" * 900)


def test_unicode_names_and_patterns() -> None:
    names = ["commandes-été", "заказы", "注文-1", "topic-😀", "plain"]
    assert resolve("commandes-.*", names) == {"commandes-été"}
    assert resolve("\\p{Cyrillic}+", names) == {"заказы"}
    assert resolve("注文-\\d", names) == {"注文-1"}
    # `.` is one character (a code point), not one byte.
    assert resolve("topic-.", names) == {"topic-😀"}
    assert resolve("commandes-ét.", names) == {"commandes-été"}
    assert resolve("\\pL+", names) == {"заказы", "plain"}
    # A name with no UTF-8 spelling (a lone surrogate) matches nothing rather than raising.
    assert resolve(".*", ["ok", "bad\udcff"]) == {"ok"}
    with pytest.raises(InvalidTopicRegex, match="invalid UTF-8"):
        compile_topic_regex("bad\udcff")


def test_compiled_regexes_compare_by_pattern() -> None:
    assert compile_topic_regex("a.*") == compile_topic_regex("a.*")
    assert compile_topic_regex("a.*") != compile_topic_regex("b.*")
    assert len({compile_topic_regex("a.*"), compile_topic_regex("a.*")}) == 1
    assert repr(compile_topic_regex("a.*")) == "TopicRegex('a.*')"


def test_resolve_all_gives_every_pattern_its_names() -> None:
    patterns = ["topic.*", "orders.*", "topic.*", "(unclosed", "none", ".*"]
    resolved = resolve_all(patterns, TOPICS)
    assert resolved == {
        "topic.*": frozenset({"topic", "topic-1", "topic-2"}),
        "orders.*": frozenset({"orders.eu", "orders_us"}),
        "(unclosed": frozenset(),  # logged and ignored, as Kafka's refresh does
        "none": frozenset(),
        ".*": frozenset(TOPICS),
    }
    assert resolve_all([], TOPICS) == {}
    assert resolve_all(["a.*"], []) == {"a.*": frozenset()}


def test_resolve_all_with_many_patterns_and_thousands_of_topics_agrees_with_resolve() -> None:
    rng = random.Random(848)
    words = ["orders", "payments", "users", "clicks", "events", "logs", "metrics", "audit", "billing"]
    names = [f"{rng.choice(words)}_{rng.choice(words)}-{i}" for i in range(5000)] + ["__consumer_offsets"]
    patterns = [f".*{w}.*" for w in words] + [f"{w}_.*-1.*" for w in words]
    patterns += [f"[a-z]+_{w}-[0-9]{{2,3}}" for w in words]
    patterns += [f".*{rng.choice(words)}.*{i}" for i in range(200)] + ["__.*", "(?i)ORDERS_.*"]
    resolved = resolve_all(patterns, names)
    assert resolved == {pattern: resolve(pattern, names) for pattern in patterns}
    assert sum(map(len, resolved.values())) > 5000


@settings(max_examples=200, deadline=None)
@given(
    patterns=st.lists(st.sampled_from(["a.*", ".*b", "[ab]+", "a|b", "(ab)*", "b{2}", "\\w+", "x?", "(", ""]),
                      max_size=6),
    names=st.lists(st.text(alphabet="abx-", max_size=6), max_size=20),
)
def test_resolve_all_is_resolve_for_each_pattern(patterns: list[str], names: list[str]) -> None:
    expected = {}
    for pattern in patterns:
        try:
            expected[pattern] = resolve(pattern, names)
        except InvalidTopicRegex:
            expected[pattern] = frozenset()
    assert resolve_all(patterns, names) == expected
