"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> <flag> key=value ... ;``.

Kafka parses them with ``java.io.StreamTokenizer`` (``JaasConfig.java``,
https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/security/JaasConfig.java):
``//`` and ``/* */`` comments, values either a bare word or a string in ``"`` or ``'`` where a backslash
escapes the next character (``\\n``, ``\\t``, ``\\r``, ``\\b``, ``\\f`` keep their C meaning), and every
module ends with ``;``. Option names may be quoted too (an extension: a user name holding
``=`` or a quote cannot be written otherwise). The broker's PLAIN users are the ``user_<name>="<password>"`` options of
``PlainLoginModule`` (reference/security.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["JaasError", "LoginModule", "parse_jaas_config", "single_login_module", "plain_users"]

CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_PUNCTUATION = "=;\"'"


class JaasError(ValueError):
    """A malformed JAAS config string (Kafka: ``IllegalArgumentException`` at start-up)."""


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind is ``word``, ``string`` or the punctuation character itself."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError("unterminated comment in JAAS config")
            i = end + 2
        elif c in "\"'":
            quote, i, chars = c, i + 1, []
            while True:
                if i >= n:
                    raise JaasError("unterminated quoted value in JAAS config")
                c = text[i]
                if c == quote:
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    chars.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                    i += 2
                    continue
                chars.append(c)
                i += 1
            out.append(("string", "".join(chars)))
        elif c in "=;":
            out.append((c, c))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _PUNCTUATION \
                    and not text.startswith("//", i) and not text.startswith("/*", i):
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas_config(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0

    def take(kinds: tuple[str, ...], what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] not in kinds:
            found = tokens[i][1] if i < len(tokens) else "end of config"
            raise JaasError(f"expected {what} in JAAS config, found {found!r}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        name = take(("word",), "a login module class name")
        flag = take(("word",), "a login module control flag")
        if flag.lower() not in CONTROL_FLAGS:
            raise JaasError(f"Invalid control flag {flag!r} in JAAS config")
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            key = take(("word", "string"), "an option name")
            take(("=",), "'=' after option " + key)
            options[key] = take(("word", "string"), f"a value for option {key}")
        take((";",), "';' at the end of the login module")
        modules.append(LoginModule(name, flag.lower(), options))
    return modules


def single_login_module(text: str) -> LoginModule:
    """``sasl.jaas.config`` names exactly one login module (Kafka: ``JaasContext.loadServerContext``)."""
    modules = parse_jaas_config(text)
    if len(modules) != 1:
        raise JaasError(f"JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules[0]


def plain_users(text: str) -> dict[str, str]:
    """The ``user_<name>`` options of the PLAIN login module: name → password."""
    module = single_login_module(text)
    return {key[5:]: value for key, value in module.options.items() if key.startswith("user_")}
