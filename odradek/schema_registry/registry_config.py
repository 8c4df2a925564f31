"""The registry's settings: Confluent's ``schema-registry.properties`` keys.

Keys read: ``listeners`` (default ``http://0.0.0.0:8081``), ``kafkastore.bootstrap.servers``
(required), ``kafkastore.topic`` (``_schemas``), ``schema.compatibility.level`` (``backward``;
the older ``avro.compatibility.level`` too), ``host.name``, ``leader.eligibility`` (``true``),
``schema.registry.group.id`` (``schema-registry``), ``kafkastore.timeout.ms``, and every
``kafkastore.<client option>`` (``kafkastore.security.protocol``, ``kafkastore.sasl.*``,
``kafkastore.ssl.*``), handed to Odradek's client with the prefix dropped. Other keys of
Confluent's registry are accepted with a warning naming them: they have no effect here.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field

from odradek.client.client_config import parse_bootstrap, resolve
from odradek.client.client_errors import ConfigError

from .compatibility import parse_level

log = logging.getLogger("odradek.schema_registry")

CLIENT_PREFIX = "kafkastore."
OWN_KAFKASTORE_KEYS = {"kafkastore.bootstrap.servers", "kafkastore.topic", "kafkastore.timeout.ms"}
READ_KEYS = {
    "listeners",
    "host.name",
    "schema.compatibility.level",
    "avro.compatibility.level",
    "leader.eligibility",
    "master.eligibility",
    "schema.registry.group.id",
} | OWN_KAFKASTORE_KEYS


class RegistryConfigError(ValueError):
    pass


@dataclass
class RegistryConfig:
    listeners: list[tuple[str, int]]
    bootstrap_servers: str
    topic: str = "_schemas"
    compatibility_level: str = "BACKWARD"
    host_name: str = field(default_factory=socket.gethostname)
    leader_eligibility: bool = True
    group_id: str = "schema-registry"
    timeout_s: float = 30.0
    client_options: dict = field(default_factory=dict)

    @property
    def store_client_options(self) -> dict:
        return {"bootstrap_servers": self.bootstrap_servers, **self.client_options}


def parse_listener(url: str) -> tuple[str, int]:
    text = url.strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() != "http":
        raise RegistryConfigError(f"listeners: {url!r} must be http://host:port (HTTPS: put a TLS proxy in front)")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise RegistryConfigError(f"listeners: {url!r} must be http://host:port")
    return host.strip("[]"), int(port)


def _bool(key: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise RegistryConfigError(f"{key} must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def from_properties(props: dict[str, str]) -> RegistryConfig:
    """The config of a properties dict; RegistryConfigError naming the key that is wrong."""
    bootstrap = props.get("kafkastore.bootstrap.servers", "").strip()
    if not bootstrap:
        raise RegistryConfigError(
            "kafkastore.bootstrap.servers is required: the brokers holding the schemas topic, e.g. "
            "PLAINTEXT://127.0.0.1:9092"
        )
    try:
        parse_bootstrap(bootstrap, "kafkastore.bootstrap.servers")
    except ConfigError as exc:
        raise RegistryConfigError(str(exc)) from None
    listeners = [parse_listener(u) for u in props.get("listeners", "http://0.0.0.0:8081").split(",") if u.strip()]
    if not listeners:
        raise RegistryConfigError("listeners is empty: give at least one http://host:port")
    raw_level = props.get("schema.compatibility.level", props.get("avro.compatibility.level", "backward"))
    level = parse_level(raw_level)
    if level is None:
        raise RegistryConfigError(
            f"schema.compatibility.level: {raw_level!r} is not one of none, backward, backward_transitive, "
            "forward, forward_transitive, full, full_transitive"
        )
    try:
        timeout_ms = int(props.get("kafkastore.timeout.ms", "30000"))
    except ValueError:
        raise RegistryConfigError("kafkastore.timeout.ms must be an integer (milliseconds)") from None
    client_options = {
        key[len(CLIENT_PREFIX):].replace(".", "_"): value
        for key, value in props.items()
        if key.startswith(CLIENT_PREFIX) and key not in OWN_KAFKASTORE_KEYS
    }
    for name, value in client_options.items():  # one at a time, to name the key that is wrong
        try:
            resolve("admin", None, {"bootstrap_servers": bootstrap, name: value})
        except ConfigError as exc:
            raise RegistryConfigError(f"{CLIENT_PREFIX}{name.replace('_', '.')}: {exc}") from None
    ignored = sorted(k for k in props if k not in READ_KEYS and not k.startswith(CLIENT_PREFIX))
    if ignored:
        log.warning("these keys of Confluent's registry have no effect in Odradek's: %s", ", ".join(ignored))
    return RegistryConfig(
        listeners=listeners,
        bootstrap_servers=bootstrap,
        topic=props.get("kafkastore.topic", "_schemas").strip() or "_schemas",
        compatibility_level=level,
        host_name=props.get("host.name", "").strip() or socket.gethostname(),
        leader_eligibility=_bool(
            "leader.eligibility", props.get("leader.eligibility", props.get("master.eligibility", "true"))
        ),
        group_id=props.get("schema.registry.group.id", "schema-registry"),
        timeout_s=max(timeout_ms, 1) / 1000,
        client_options=client_options,
    )
