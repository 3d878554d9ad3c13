"""Kafka's listener settings, resolved and checked together: which sockets to bind, with which
security protocol, what each advertises, and which one other nodes use.

Rules (Kafka's ``SocketServerConfigs`` and ``KafkaConfig`` checks; docs/security.html §7.2):

- ``listeners``: ``NAME://host:port,...``; names unique, ports unique (a bound port serves one
  listener). A bare ``host:port`` is one listener named PLAINTEXT (``--listen``).
- Every listener name needs a protocol: ``listener.security.protocol.map`` maps names to
  PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; its default maps each protocol name to itself.
- ``advertised.listeners``: the same form; defaults to ``listeners``; every advertised name must be
  a listener; ``0.0.0.0`` cannot be advertised (clients cannot connect to it). Listeners left out
  of it advertise their own address.
- ``inter.broker.listener.name`` names the listener other nodes use; empty, the listener whose
  protocol is ``security.inter.broker.protocol``. Setting both is an error, as in Kafka.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ..config import Config, ConfigError, parse_listener_list, parse_protocol_map

__all__ = ["Listener", "Listeners", "resolve_listeners", "SASL_PROTOCOLS", "TLS_PROTOCOLS"]

#: Protocols whose connections authenticate with SASL before anything else.
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
#: Protocols spoken over TLS.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Listener:
    """One endpoint: listener name (upper case), host, port, security protocol."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


@dataclass(frozen=True, slots=True)
class Listeners:
    """What to bind, what to advertise (same order, same names), and the inter-broker listener."""

    bound: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    inter_broker: str

    def advertised_for(self, name: str) -> Listener | None:
        for listener in self.advertised:
            if listener.name == name:
                return listener
        return None

    def protocol_map(self) -> dict[str, str]:
        return {listener.name: listener.protocol for listener in self.bound}


def _parse(config: Config, key: str, text: str) -> list[tuple[str, str, int]]:
    try:
        return parse_listener_list(text, key)
    except ValueError as exc:
        raise ConfigError(f"invalid {key} {text!r}: {exc}") from None


def resolve_listeners(config: Config) -> Listeners:
    """Check the listener settings against each other; :class:`ConfigError` naming the setting."""
    try:
        protocols = parse_protocol_map(str(config["listener.security.protocol.map"]))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    bound: list[Listener] = []
    for name, host, port in _parse(config, "listeners", str(config["listeners"])):
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(f"listeners: no security protocol for listener {name}: add {name}:<protocol> to "
                              "listener.security.protocol.map")
        if port != 0 and any(other.port == port and not _different_families(other.host, host) for other in bound):
            raise ConfigError(f"listeners: port {port} is used by two listeners; each listener needs its own port")
        bound.append(Listener(name, host, port, protocol))
    advertised_text = str(config["advertised.listeners"])
    by_name = {listener.name: listener for listener in bound}
    given: dict[str, Listener] = {}
    if advertised_text:
        for name, host, port in _parse(config, "advertised.listeners", advertised_text):
            if name not in by_name:
                raise ConfigError(f"advertised.listeners: listener {name} is not in listeners "
                                  f"({', '.join(by_name)})")
            if host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners: {name} advertises {host}, which clients cannot connect "
                                  "to; give a host name or address")
            given[name] = Listener(name, host, port, by_name[name].protocol)
    advertised = tuple(given.get(listener.name) or _own_address(listener) for listener in bound)
    inter_broker = _inter_broker(config, bound)
    return Listeners(tuple(bound), advertised, inter_broker)


def _different_families(a: str, b: str) -> bool:
    """An IPv4 and an IPv6 listener may share a port (SocketServerConfigs); nothing else may."""
    return bool(a) and bool(b) and ((":" in a) != (":" in b))


def _own_address(listener: Listener) -> Listener:
    """A listener advertises its own address when advertised.listeners leaves it out; a wildcard
    host becomes this machine's name (Kafka: the canonical host name)."""
    host = listener.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    return Listener(listener.name, host, listener.port, listener.protocol)


def _inter_broker(config: Config, bound: list[Listener]) -> str:
    name = str(config["inter.broker.listener.name"]).strip().upper()
    protocol = str(config["security.inter.broker.protocol"])
    if name:
        if "security.inter.broker.protocol" in config.explicit:
            raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol are both set; "
                              "set only inter.broker.listener.name")
        if all(listener.name != name for listener in bound):
            raise ConfigError(f"inter.broker.listener.name: {name} is not a listener in listeners "
                              f"({', '.join(listener.name for listener in bound)})")
        return name
    for listener in bound:
        if listener.protocol == protocol:
            return listener.name
    if "security.inter.broker.protocol" in config.explicit:
        raise ConfigError(f"security.inter.broker.protocol: no listener speaks {protocol}; set "
                          "inter.broker.listener.name or add such a listener")
    # Kafka requires a PLAINTEXT listener here; a single node never talks to others, so the first
    # listener stands in rather than refusing every all-TLS single-node configuration.
    return bound[0].name
