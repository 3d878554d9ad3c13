"""The principal of a TLS client: its certificate's subject DN through ``ssl.principal.mapping.rules``.

Kafka (KIP-371, ``SslPrincipalMapper``; docs/security.html §7.3 "Customizing SSL User Name"):

- The DN is the subject in RFC 2253 order (most specific RDN first, as ``X500Principal.getName()``
  prints it): ``CN=alice,OU=eng,O=Example``.
- Rules, comma-separated, tried in order: ``RULE:pattern/replacement/`` with an optional ``L`` or
  ``U`` to lower- or upper-case the result, or ``DEFAULT`` (the DN unchanged). A rule applies when
  its pattern matches the whole DN; ``$1`` in the replacement is the first group. No rule applies:
  the client is refused.
- The principal is ``User:<result>``; a TLS client without a verified certificate is
  ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from ..config import ConfigError

__all__ = ["MappingRule", "NoMatchingRule", "parse_rules", "PrincipalMapper", "subject_dn"]

ANONYMOUS = "User:ANONYMOUS"

# One rule and its separator: DEFAULT, or RULE:pattern/replacement/[LU]; "\/" escapes a slash
# (Kafka's SslPrincipalMapper.RULE_PARSER).
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule matches the DN: the client is refused."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """Parse ``ssl.principal.mapping.rules``; :class:`ConfigError` naming the setting if malformed."""
    rules: list[MappingRule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None or match.end() == pos:
            raise ConfigError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}: expected DEFAULT or "
                              "RULE:pattern/replacement/[L|U]")
        pos = match.end()
        if match.group(1):
            rules.append(MappingRule(None))
            continue
        pattern = match.group(2).replace("\\/", "/")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {exc}") from None
        replacement = _java_replacement(match.group(3).replace("\\/", "/"))
        rules.append(MappingRule(compiled, replacement, match.group(4)))
    return tuple(rules) or (MappingRule(None),)


def _java_replacement(text: str) -> str:
    """Java's ``Matcher`` replacement (``$1`` a group, ``\\x`` a literal x) as a Python ``expand`` template."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append("\\\\" if text[i + 1] == "\\" else text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """DN → ``User:<name>`` by the rules."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")

    def principal(self, peer_der: bytes | None) -> str:
        """The principal for a peer certificate (DER), or ANONYMOUS without one."""
        if not peer_der:
            return ANONYMOUS
        return "User:" + self.name(subject_dn(peer_der))


def subject_dn(der: bytes) -> str:
    """The certificate's subject in RFC 4514 (= RFC 2253) order: last RDN of the sequence first."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
