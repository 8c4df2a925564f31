"""The registry's settings: Confluent's ``schema-registry.properties`` keys.

Keys read: ``listeners`` (default ``http://0.0.0.0:8081``; ``https://`` listeners serve TLS
with the ``ssl.keystore.*``/``ssl.truststore.*`` keys, PEM as the brokers read them, and
``ssl.client.authentication``), ``authentication.method`` (``BASIC``: HTTP basic credentials,
checked by a SASL exchange with the brokers), ``authorizer.class.name`` (set: writes need
the brokers' ACLs, with ``super.users`` and ``allow.everyone.if.no.acl.found`` as a broker
reads them), ``kafkastore.bootstrap.servers``
(required), ``kafkastore.topic`` (``_schemas``), ``schema.compatibility.level`` (``backward``;
the older ``avro.compatibility.level`` too), ``host.name``, ``leader.eligibility`` (``true``),
``schema.registry.group.id`` (``schema-registry``), ``kafkastore.timeout.ms``,
``kafkastore.topic.replication.factor`` (3, at most the live brokers), and every
``kafkastore.<client option>`` (``kafkastore.security.protocol``, ``kafkastore.sasl.*``,
``kafkastore.ssl.*``), handed to Odradek's client with the prefix dropped. Other keys of
Confluent's registry are accepted with a warning naming them: they have no effect here.
"""

from __future__ import annotations

import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.client.client_config import parse_bootstrap, resolve
from odradek.client.client_errors import ConfigError

from .compatibility import parse_level

log = logging.getLogger("odradek.schema_registry")

CLIENT_PREFIX = "kafkastore."
OWN_KAFKASTORE_KEYS = {
    "kafkastore.bootstrap.servers", "kafkastore.topic", "kafkastore.timeout.ms", "kafkastore.topic.replication.factor",
}  # fmt: skip
READ_KEYS = {
    "listeners",
    "host.name",
    "schema.compatibility.level",
    "avro.compatibility.level",
    "leader.eligibility",
    "master.eligibility",
    "schema.registry.group.id",
    "authentication.method",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
} | OWN_KAFKASTORE_KEYS
TLS_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
)  # fmt: skip
CLIENT_AUTH_KEYS = {"ssl.client.auth", "ssl.client.authentication"}  # read by _tls_key


class Listener(NamedTuple):
    host: str
    port: int
    tls: bool = False

    def url(self, port: int | None = None) -> str:
        host = self.host or "127.0.0.1"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port if port is None else port}"


class RegistryConfigError(ValueError):
    pass


@dataclass
class RegistryConfig:
    listeners: list[Listener]
    bootstrap_servers: str
    topic: str = "_schemas"
    topic_replication_factor: int = 3  # at most the live brokers, as Confluent's registry creates it
    compatibility_level: str = "BACKWARD"
    host_name: str = field(default_factory=socket.gethostname)
    leader_eligibility: bool = True
    group_id: str = "schema-registry"
    timeout_s: float = 30.0
    client_options: dict = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None  # for the https:// listeners
    forward_ssl: ssl.SSLContext | None = None  # checks the leader's certificate when it is https
    basic_auth: bool = False  # authentication.method=BASIC
    acls: bool = False  # authorizer.class.name set: writes need the brokers' ACLs
    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False

    @property
    def store_client_options(self) -> dict:
        return {"bootstrap_servers": self.bootstrap_servers, **self.client_options}


def parse_listener(url: str) -> Listener:
    text = url.strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise RegistryConfigError(f"listeners: {url!r} must be http://host:port or https://host:port")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise RegistryConfigError(f"listeners: {url!r} must be http://host:port or https://host:port")
    return Listener(host.strip("[]"), int(port), scheme.lower() == "https")


def tls_context(get, key_of=lambda key: key) -> ssl.SSLContext:
    """The server context of the https listeners from Kafka's ``ssl.*`` keys (``get(key)``: the
    key's typed value); the brokers' own TLS code does the work."""
    from odradek.broker.security.tls_context import server_context
    from odradek.config_def import ConfigError

    try:
        return server_context(get, key_of, "https")
    except ConfigError as exc:
        raise RegistryConfigError(str(exc)) from None


def _typed(read):
    """``get`` over raw texts: each key parsed as the brokers parse it."""
    from odradek.broker.broker_keys import BROKER_CONFIGS
    from odradek.config_def import parse_value

    def get(key: str):
        d = BROKER_CONFIGS.get(key)
        raw = read(key)
        return parse_value(d, raw) if d is not None else raw

    return get


def _tls_key(props: dict[str, str], key: str) -> str | None:
    """A TLS key of Confluent's registry file, ``ssl.client.authentication`` (NONE, REQUESTED,
    REQUIRED) or the older boolean ``ssl.client.auth`` read as the brokers' ``ssl.client.auth``."""
    if key == "ssl.client.auth":
        if "ssl.client.authentication" in props:
            return props["ssl.client.authentication"].strip().lower()
        old = props.get("ssl.client.auth", "").strip().lower()
        return {"true": "required", "false": "none"}.get(old, old or None)
    return props.get(key)


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
    try:
        replication_factor = int(props.get("kafkastore.topic.replication.factor", "3"))
    except ValueError:
        replication_factor = 0
    if replication_factor < 1:
        raise RegistryConfigError(
            "kafkastore.topic.replication.factor must be a positive integer (the schemas topic's replicas; default 3)"
        )
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
    ssl_context = forward_ssl = None
    if any(listener.tls for listener in listeners):
        ssl_context = tls_context(_typed(lambda key: _tls_key(props, key)))
        forward_ssl = ssl.create_default_context(cafile=props.get("ssl.truststore.location"))
    method = props.get("authentication.method", "NONE").strip().upper()
    if method not in ("NONE", "BASIC"):
        raise RegistryConfigError(f"authentication.method must be NONE or BASIC, got {method!r}")
    if method == "BASIC" and not str(client_options.get("security_protocol", "")).upper().startswith("SASL"):
        raise RegistryConfigError(
            "authentication.method=BASIC checks each user's password with a SASL exchange with the brokers: "
            "set kafkastore.security.protocol=SASL_PLAINTEXT or SASL_SSL and kafkastore.sasl.mechanism"
        )
    acls = bool(props.get("authorizer.class.name", "").strip())
    if acls and method != "BASIC":
        raise RegistryConfigError(
            "authorizer.class.name needs authentication.method=BASIC: the ACLs are decided per user"
        )
    from odradek.broker.security.authorizer import parse_super_users
    from odradek.config_def import ConfigError as BrokerConfigError

    try:
        super_users = parse_super_users(props.get("super.users"))
    except BrokerConfigError as exc:
        raise RegistryConfigError(str(exc)) from None
    known = READ_KEYS | set(TLS_KEYS) | CLIENT_AUTH_KEYS
    ignored = sorted(k for k in props if k not in known and not k.startswith(CLIENT_PREFIX))
    if ignored:
        log.warning("these keys of Confluent's registry have no effect in Odradek's: %s", ", ".join(ignored))
    return RegistryConfig(
        listeners=listeners,
        bootstrap_servers=bootstrap,
        topic=props.get("kafkastore.topic", "_schemas").strip() or "_schemas",
        topic_replication_factor=replication_factor,
        compatibility_level=level,
        host_name=props.get("host.name", "").strip() or socket.gethostname(),
        leader_eligibility=_bool(
            "leader.eligibility", props.get("leader.eligibility", props.get("master.eligibility", "true"))
        ),
        group_id=props.get("schema.registry.group.id", "schema-registry"),
        timeout_s=max(timeout_ms, 1) / 1000,
        client_options=client_options,
        ssl_context=ssl_context,
        forward_ssl=forward_ssl,
        basic_auth=method == "BASIC",
        acls=acls,
        super_users=super_users,
        allow_if_no_acl=_bool("allow.everyone.if.no.acl.found", props.get("allow.everyone.if.no.acl.found", "false")),
    )
