"""Listeners: where the broker accepts connections and what it tells clients to connect to.

Kafka's keys, parsed and checked together: ``listeners`` (NAME://host:port, an empty host
binds every interface, port 0 an ephemeral port), ``advertised.listeners`` (default: the
listeners; an empty host means this machine's name; 0.0.0.0 and :: are refused, as in Kafka),
``listener.security.protocol.map`` (NAME:PROTOCOL,...; default maps each protocol's name to
itself), ``inter.broker.listener.name`` or ``security.inter.broker.protocol`` (the listener
brokers use between them), the KRaft ``controller.listener.names`` (neither bound nor
advertised), and the per-listener keys ``listener.name.<listener>.<key>`` (kept as strings by
``BrokerConfig``; here each must name a listener). Two listeners need distinct ports unless one
is IPv4 and the other IPv6. A problem is a ``ConfigError`` naming the key. The HTTP side's
``http.listeners`` (``http://host:port``, Odradek's own key; served by ``odradek/http/``) are
checked here too (``HttpListeners``, ``parse_http_listener``).

The security work extends this module: SSL and SASL listeners and the typed per-listener
overrides of ``ssl.*`` / ``sasl.*`` keys belong here.

Pure functions over the typed values of ``BrokerConfig``; immutable results.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.config_def import ConfigError, InvalidValue, Validator

__all__ = [
    "LISTENER_PREFIX",
    "SECURITY_PROTOCOLS",
    "Endpoint",
    "HttpListeners",
    "Listeners",
    "listener_of",
    "parse_http_listener",
    "resolve_listeners",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Per-listener keys: listener.name.<listener>.<key>, e.g. listener.name.internal.ssl.keystore.location.
LISTENER_PREFIX = "listener.name."

_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener: name (upper case), host ("" binds every interface), port (0: ephemeral), protocol."""

    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _parse_security_map(raw: str | None) -> dict[str, str]:
    if raw is None:
        return {p: p for p in SECURITY_PROTOCOLS}
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL pairs with a protocol among "
                f"{', '.join(SECURITY_PROTOCOLS)}, got {item!r}",
                "listener.security.protocol.map",
            )
        if name in mapping:
            raise ConfigError(
                f"listener.security.protocol.map: listener {name} appears twice",
                "listener.security.protocol.map",
            )
        mapping[name] = protocol
    return mapping


def _parse_endpoints(key: str, items: list[str], protocols: dict[str, str]) -> list[Endpoint]:
    endpoints = []
    for item in items:
        match = _LISTENER_RE.match(item)
        if not match:
            raise ConfigError(f"{key}: expected NAME://host:port, got {item!r}", key)
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port must be between 0 and 65535, got {item!r}", key)
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"{key}: no security protocol for listener {name} in {item!r}; "
                f"map it in listener.security.protocol.map (e.g. {name}:PLAINTEXT)",
                key,
            )
        endpoints.append(Endpoint(name, host, port, protocol))
    names = [e.name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{key}: listener name {duplicates[0]} is used more than once", key)
    return endpoints


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host.split("%")[0]).version
    except ValueError:
        return None


def _check_listener_ports(endpoints: list[Endpoint]) -> None:
    # Kafka: listeners need distinct ports, unless exactly two share one, an IPv4 and an IPv6 address.
    by_port: dict[int, list[Endpoint]] = {}
    for e in endpoints:
        if e.port:
            by_port.setdefault(e.port, []).append(e)
    for port, group in by_port.items():
        if len(group) == 1:
            continue
        versions = sorted(_ip_version(e.host) or 0 for e in group)
        if versions != [4, 6]:
            raise ConfigError(
                f"listeners: port {port} is used by {', '.join(e.name for e in group)}; each listener "
                "needs its own port unless one is an IPv4 and the other an IPv6 address",
                "listeners",
            )


@dataclass(frozen=True, slots=True)
class Listeners:
    """The resolved listeners of a broker configuration."""

    protocols: dict[str, str]  # listener name -> security protocol
    bound: list[Endpoint]  # to bind (controller listeners left out)
    advertised: list[Endpoint]  # given to clients; port 0: the port bound
    inter_broker: str  # the listener name brokers use between them

    def advertised_endpoints(self, bound_ports: Mapping[str, int]) -> list[Endpoint]:
        """Advertised endpoints with ephemeral ports (0) replaced by the bound ones, by listener name."""
        return [
            Endpoint(e.name, e.host, e.port or bound_ports.get(e.name, 0), e.security_protocol)
            for e in self.advertised
        ]


def listener_of(key: str) -> str | None:
    """The listener a ``listener.name.<listener>.<key>`` key is for (upper case), else None."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    return key[len(LISTENER_PREFIX) :].split(".", 1)[0].upper()


def resolve_listeners(
    values: Mapping[str, Any], explicit: Collection[str], prefixed_keys: Iterable[str] = ()
) -> Listeners:
    """The listeners of typed broker ``values``; ``explicit`` holds the keys given (not
    defaulted), ``prefixed_keys`` the ``listener.name.*`` keys given."""
    v = values
    protocols = _parse_security_map(v["listener.security.protocol.map"])
    controller_names = [n.upper() for n in (v["controller.listener.names"] or [])]
    for name in controller_names:
        protocols.setdefault(name, "PLAINTEXT")  # Kafka's KRaft default
    all_listeners = _parse_endpoints("listeners", v["listeners"], protocols)
    listeners = [e for e in all_listeners if e.name not in controller_names]
    if not listeners:
        raise ConfigError(
            "listeners: no broker listener left once controller.listener.names are removed", "listeners"
        )
    _check_listener_ports(listeners)
    names = {e.name for e in listeners}

    for key in prefixed_keys:
        listener = listener_of(key)
        if listener is not None and listener not in names and listener not in controller_names:
            raise ConfigError(f"{key}: there is no listener named {listener} in listeners", key)

    advertised = _advertised(v, protocols, listeners, controller_names)
    inter = _inter_broker_listener(v, explicit, advertised)
    return Listeners(protocols, listeners, advertised, inter)


def _advertised(
    v: Mapping[str, Any], protocols: dict[str, str], listeners: list[Endpoint], controller_names: list[str]
) -> list[Endpoint]:
    names = {e.name for e in listeners}
    if v["advertised.listeners"] is not None:
        key = "advertised.listeners"
        advertised = [
            e
            for e in _parse_endpoints(key, v["advertised.listeners"], protocols)
            if e.name not in controller_names
        ]
        for e in advertised:
            if e.name not in names:
                raise ConfigError(f"{key}: listener {e.name} is advertised but not in listeners", key)
    else:
        key = "listeners"
        advertised = listeners
    if not advertised:
        raise ConfigError("advertised.listeners: no broker listener to advertise", "advertised.listeners")
    resolved = []
    for e in advertised:
        if e.host in ("0.0.0.0", "::"):
            hint = (
                ""
                if key == "advertised.listeners"
                else "; set advertised.listeners to an address clients can reach"
            )
            raise ConfigError(
                f"advertised.listeners: cannot advertise the non-routable address {e.host} ({e}){hint}",
                "advertised.listeners",
            )
        if not e.host:
            e = Endpoint(e.name, socket.gethostname(), e.port, e.security_protocol)
        resolved.append(e)
    return resolved


def _inter_broker_listener(v: Mapping[str, Any], explicit: Collection[str], advertised: list[Endpoint]) -> str:
    if "inter.broker.listener.name" in explicit and "security.inter.broker.protocol" in explicit:
        raise ConfigError(
            "inter.broker.listener.name: set either it or security.inter.broker.protocol, not both",
            "inter.broker.listener.name",
        )
    names = {e.name for e in advertised}
    if v["inter.broker.listener.name"]:
        inter = v["inter.broker.listener.name"].upper()
        if inter not in names:
            raise ConfigError(
                f"inter.broker.listener.name: {inter} is not among the advertised listeners",
                "inter.broker.listener.name",
            )
        return inter
    # Kafka uses the listener named after the protocol; a single node without one
    # (listeners=CLIENT://...) falls back to its first advertised listener.
    inter = v["security.inter.broker.protocol"]
    if inter not in names:
        if "security.inter.broker.protocol" in explicit:
            raise ConfigError(
                f"security.inter.broker.protocol: no advertised listener named {inter}",
                "security.inter.broker.protocol",
            )
        inter = advertised[0].name
    return inter


# -- HTTP listeners (http.listeners) ---------------------------------------------------------

_HTTP_LISTENER_RE = re.compile(r"^http://(\[[0-9a-fA-F:.%\w]+\]|[\w.\-]*):([0-9]{1,5})/?$")


def parse_http_listener(text: str) -> tuple[str, int] | None:
    """``http://host:port`` as (host, port): brackets dropped, "" for every interface; None if malformed."""
    match = _HTTP_LISTENER_RE.match(text.strip())
    if not match or int(match.group(2)) > 65535:
        return None
    return match.group(1).strip("[]"), int(match.group(2))


class HttpListeners(Validator):
    description = "a comma-separated list of http://host:port (port 0: a free one; empty: no HTTP listener)"
    whole = True

    def __init__(self, https: bool = False):
        self.https = https  # whether https://host:port is served too (with the broker's ssl.* keys)
        if https:
            self.description = "a comma-separated list of http:// or https://host:port (port 0: a free one; empty: none)"

    def __call__(self, value):
        for item in value or ():
            secure = item.lower().startswith("https://")
            if secure and not self.https:
                raise InvalidValue("http://host:port (HTTPS is not served; put a TLS proxy in front)")
            if parse_http_listener("http" + item.strip()[len("https"):] if secure else item) is None:
                raise InvalidValue(self.description)
        return value
