"""The regular expressions a KIP-848 consumer subscribes with (``SubscribedTopicRegex``).

Kafka evaluates the pattern on the broker with RE2/J (``com.google.re2j.Pattern``), never with
``java.util.regex``: ``Pattern.compile(regex)`` validates it when a member brings a regex the group
does not yet hold, and a topic is in the subscription when ``pattern.matcher(topic).matches()``,
a *full* match of the name. So ``orders-.*`` names ``orders-eu`` and ``orders-us``, and ``^topic``
names no topic ``topic-1`` (``^topic.*`` does): librdkafka's KIP-848 notes,
https://github.com/confluentinc/librdkafka/blob/master/INTRODUCTION.md#regex-subscription-changes, and
KIP-848:
https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol
Python's ``re`` would be wrong twice: its syntax differs (lookaround and backreferences accepted,
``\\pN`` refused) and it backtracks, so a member could stall the coordinator with a pattern such as
``(a+)+$``. RE2 (the ``google-re2`` binding of Google's C++ library) has RE2/J's syntax and runs in
time linear in the name.

Facts from Kafka's group coordinator (``GroupMetadataManager`` and ``Utils``, group-coordinator/ in
https://github.com/apache/kafka) that this module carries or that its callers rely on:

* A pattern RE2/J refuses is ``INVALID_REGULAR_EXPRESSION`` (error 128) with the message
  ``SubscribedTopicRegex `<pattern>` is not a valid regular expression: <description>.``, the
  description being RE2/J's (``PatternSyntaxException.getDescription()``). :class:`InvalidTopicRegex`
  carries that message, with RE2's diagnosis translated to RE2/J's wording (:data:`_RE2J_WORDING`).
* Internal topics are *not* excluded: the refresh matches every topic name of the metadata image
  (``__consumer_offsets`` included); only an authorizer's DESCRIBE check filters the result.
* Refresh: a group re-resolves all its regexes in one batch, off the request path, when a member
  brings a regex the group does not hold yet or the topics image has new topics (batches at least
  10 s apart), and in any case every ``group.consumer.regex.refresh.interval.ms`` (10 minutes,
  ``GroupConfig.consumer_regex_refresh_interval_ms``); each result is persisted as a
  ConsumerGroupRegularExpression record (type 16). A stored pattern that no longer compiles is
  logged and resolves to no topic rather than failing the refresh (:func:`resolve_all` does so too).

Where RE2 (this module) and RE2/J (Kafka) differ, as of google-re2 1.1 and RE2/J 1.8:

* ``\\C`` (any byte): RE2 accepts it, RE2/J refuses it (``invalid escape sequence``). Two capture
  groups of one name (``(?P<n>a)(?P<n>b)``): RE2 accepts them, RE2/J refuses them (``duplicate
  capture group name``). Both are refused here after RE2 has parsed the pattern, so the two agree.
* Size: RE2 refuses a pattern whose compiled program exceeds its memory budget (8 MiB, RE2's
  default ``max_mem``), with ``pattern too large - compile failed``; RE2/J has no such limit and
  would compile it. Likewise RE2 refuses nested counted repetitions that multiply past 1,000
  (``((a{100}){100})``: ``invalid repeat count``), which RE2/J, checking each count alone,
  accepts. Only huge patterns are affected; a SubscribedTopicRegex is a Kafka string, at most
  32,767 bytes.
* ``a)`` (an unmatched ``)``): both refuse; RE2/J reports it as ``regexp/syntax: internal error``
  (its parser's stack underflows), and so do we, to give Kafka's message.
* Unicode classes (``\\p{Greek}``) follow each library's Unicode tables, which may differ for
  scripts added in recent Unicode versions. Kafka topic names are ASCII (``[a-zA-Z0-9._-]``), so
  matches against real topics cannot differ; both read a name as code points (RE2 on its UTF-8
  bytes, RE2/J on the UTF-16 string), so ``.`` is one character either way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

__all__ = ["InvalidTopicRegex", "TopicRegex", "compile_topic_regex", "resolve", "resolve_all"]

_log = logging.getLogger(__name__)

#: RE2's diagnoses (its ``RE2::ErrorCode`` strings, the text before ``": "``) in RE2/J's words
#: (the ``ERR_*`` strings of re2j's Parser.java, https://github.com/google/re2j), so the message
#: is the one Kafka sends. A diagnosis not listed is passed on as RE2 wrote it.
_RE2J_WORDING = {
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class range",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "regexp/syntax: internal error",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 logs every refused pattern to stderr; the caller reports it
    return options


_OPTIONS = _options()


class InvalidTopicRegex(ValueError):
    """A SubscribedTopicRegex RE2/J would refuse; ``str()`` is the message Kafka answers with
    INVALID_REGULAR_EXPRESSION, ``description`` the diagnosis alone."""

    def __init__(self, pattern: str, description: str) -> None:
        super().__init__(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.")
        self.pattern = pattern
        self.description = description


@dataclass(frozen=True, slots=True, eq=False)
class TopicRegex:
    """A compiled SubscribedTopicRegex. Build it with :func:`compile_topic_regex`."""

    pattern: str
    _compiled: Any

    def matches(self, topic: str) -> bool:
        """Whether the whole of ``topic`` matches (RE2/J's ``Matcher.matches()``)."""
        try:
            return self._compiled.fullmatch(topic) is not None
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 spelling, not a name Kafka could hold
            return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopicRegex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"TopicRegex({self.pattern!r})"


def _refused_by_re2j_only(pattern: str) -> str | None:
    """RE2/J's description for what it refuses in ``pattern``, an expression RE2 accepted: a
    ``\\C`` escape, or two capture groups of one name (RE2 keeps the first, RE2/J refuses)."""
    names: set[str] = set()
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("Q", i + 1):  # \Q...\E quotes everything up to \E
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            if pattern.startswith("C", i + 1):
                return "invalid escape sequence"
            i += 2
        elif c == "[":
            i = _end_of_class(pattern, i)
        elif c == "(" and pattern.startswith(("(?P<", "(?<"), i):
            start = pattern.index("<", i) + 1
            close = pattern.index(">", start)
            if pattern[start:close] in names:
                return "duplicate capture group name"
            names.add(pattern[start:close])
            i = close + 1
        else:
            i += 1
    return None


def _end_of_class(pattern: str, i: int) -> int:
    """The index after the character class opening at ``pattern[i]`` (a valid one: RE2 parsed it)."""
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # a ] first in the class is a literal
        i += 1
    while pattern[i] != "]":
        if pattern[i] == "\\":
            i += 2
        elif pattern.startswith("[:", i):  # [:alpha:]
            i = pattern.index(":]", i + 2) + 2
        else:
            i += 1
    return i + 1


def compile_topic_regex(pattern: str) -> TopicRegex:
    """Compile ``pattern`` as RE2/J would, or raise :class:`InvalidTopicRegex` with Kafka's message."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except UnicodeEncodeError:
        raise InvalidTopicRegex(pattern, "invalid UTF-8") from None
    except re2.error as exc:
        raise InvalidTopicRegex(pattern, _description(exc)) from None
    refusal = _refused_by_re2j_only(pattern)
    if refusal is not None:
        raise InvalidTopicRegex(pattern, refusal)
    return TopicRegex(pattern, compiled)


def _description(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    # RE2 writes "<diagnosis>: <the offending part of the pattern>"; the diagnosis may itself
    # hold ": " only in "pattern too large - compile failed", which has no offending part.
    for diagnosis in sorted(_RE2J_WORDING, key=len, reverse=True):
        if text == diagnosis or text.startswith(diagnosis + ": "):
            return _RE2J_WORDING[diagnosis]
    return text or "invalid regular expression"


def resolve(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The names in ``topic_names`` that ``pattern`` fully matches; raises :class:`InvalidTopicRegex`."""
    regex = compile_topic_regex(pattern)
    return frozenset(name for name in topic_names if regex.matches(name))


#: Memory for the combined automaton of :func:`resolve_all`: RE2::Set builds one DFA for all the
#: patterns, and with RE2's default 8 MiB a few hundred ``.*word.*`` patterns would not fit.
_SET_MAX_MEM = 64 << 20


def resolve_all(patterns: Iterable[str], topic_names: Iterable[str]) -> dict[str, frozenset[str]]:
    """Every pattern of ``patterns`` with the names it fully matches, in one pass over the names.

    The patterns go into one RE2::Set, so each name is read once whatever the number of patterns
    (Kafka's refresh tries every pattern on every name). A pattern that does not compile is logged
    and matches nothing, as in Kafka's refresh; one that the Set cannot take with the others is
    matched on its own.
    """
    names = list(topic_names)
    result: dict[str, set[str]] = {}
    valid: list[TopicRegex] = []
    for pattern in dict.fromkeys(patterns):
        result[pattern] = set()
        try:
            valid.append(compile_topic_regex(pattern))
        except InvalidTopicRegex as exc:
            _log.error("Ignoring a topic regex that does not compile: %s", exc)
    if valid:
        matched = _match_with_set(valid, names)
        if matched is None:
            for regex in valid:
                result[regex.pattern].update(name for name in names if regex.matches(name))
        else:
            for regex, found in zip(valid, matched, strict=True):
                result[regex.pattern].update(found)
    return {pattern: frozenset(found) for pattern, found in result.items()}


def _match_with_set(regexes: list[TopicRegex], names: list[str]) -> list[list[str]] | None:
    """The names each regex matches, through one RE2::Set; None when the Set cannot be built."""
    options = _options()
    options.max_mem = _SET_MAX_MEM
    matcher = re2.Set.FullMatchSet(options)
    try:
        for regex in regexes:
            matcher.Add(regex.pattern)
        matcher.Compile()
    except re2.error:
        return None
    found: list[list[str]] = [[] for _ in regexes]
    for name in names:
        try:
            hits = matcher.Match(name)
        except UnicodeEncodeError:
            continue
        for index in hits or ():
            found[index].append(name)
    return found
