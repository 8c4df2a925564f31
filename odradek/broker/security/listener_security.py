"""What each listener demands of a connection: its TLS context, the principal mapping of
client certificates, its SASL mechanisms with their JAAS configuration, and the
re-authentication interval. Built once at start from ``BrokerConfig``.

A key is read per listener as Kafka does: ``listener.name.<listener>.<key>`` first, then the
broker-wide ``<key>``. SASL's JAAS line is per listener and mechanism only
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``). Supported mechanisms: PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; anything else (GSSAPI, OAUTHBEARER) is refused with a
``ConfigError`` naming the key, so a listener never serves with less than configured.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.listeners import LISTENER_PREFIX, Endpoint
from odradek.broker.security.tls_context import PrincipalMapper, server_context
from odradek.config_def import ConfigError, parse_value
from odradek.protocol.jaas_config import JaasError, parse_jaas_config
from odradek.protocol.sasl_mechanisms import SCRAM_MECHANISMS

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0
    max_receive_size: int = 524288
    failed_authentication_delay_ms: int = 100

    @property
    def sasl(self) -> bool:
        return bool(self.sasl_mechanisms)


def listener_securities(config, endpoints: list[Endpoint]) -> dict[str, ListenerSecurity]:
    return {e.name: listener_security(config, e) for e in endpoints}


@dataclass(frozen=True)
class ListenerKeys:
    """One listener's view of the config: ``listener.name.<l>.<key>`` first, then ``<key>``."""

    config: object
    prefix: str  # listener.name.<l>.
    overrides: dict[str, str]

    @classmethod
    def of(cls, config, listener_name: str) -> ListenerKeys:
        prefix = f"{LISTENER_PREFIX}{listener_name.lower()}."
        return cls(config, prefix, {k[len(prefix) :]: v for k, v in config.extra.items() if k.lower().startswith(prefix)})

    def key_of(self, key: str) -> str:
        """The key's name as set, for messages."""
        return self.prefix + key if key in self.overrides else key

    def get(self, key: str):
        if key in self.overrides:
            d = BROKER_CONFIGS.get(key)
            return parse_value(d, self.overrides[key]) if d is not None else self.overrides[key]
        return self.config.get(key)  # type: ignore[attr-defined]

    def enabled_mechanisms(self) -> list[str]:
        """``sasl.enabled.mechanisms`` of the listener, upper-case."""
        return [m.strip().upper() for m in self.get("sasl.enabled.mechanisms") or []]

    def jaas_module(self, mechanism: str):
        """The listener's login module for ``mechanism`` (its ``<mechanism>.sasl.jaas.config``
        line), checked; None when the line is missing."""
        jaas_key = f"{mechanism.lower()}.sasl.jaas.config"
        text = self.overrides.get(jaas_key)
        if text is None:
            return None
        try:
            modules = parse_jaas_config(text)
        except JaasError as exc:
            raise ConfigError(f"{self.prefix}{jaas_key}: {exc}", self.prefix + jaas_key) from None
        if len(modules) != 1:
            raise ConfigError(
                f"{self.prefix}{jaas_key}: expected exactly one login module, got {len(modules)}", self.prefix + jaas_key
            )
        module = modules[0]
        if module.class_name != LOGIN_MODULES[mechanism]:
            raise ConfigError(
                f"{self.prefix}{jaas_key}: {mechanism} needs {LOGIN_MODULES[mechanism]}, not {module.class_name}",
                self.prefix + jaas_key,
            )
        return module


def listener_security(config, endpoint: Endpoint) -> ListenerSecurity:
    name = endpoint.name
    keys = ListenerKeys.of(config, name)
    get, key_of = keys.get, keys.key_of
    sec = ListenerSecurity(name, endpoint.security_protocol)
    if endpoint.security_protocol in ("SSL", "SASL_SSL"):
        sec.ssl_context = server_context(get, key_of, str(endpoint))
        sec.principal_mapper = PrincipalMapper(get("ssl.principal.mapping.rules"), key_of("ssl.principal.mapping.rules"))
    if endpoint.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        _configure_sasl(sec, keys)
    return sec


def _configure_sasl(sec: ListenerSecurity, keys: ListenerKeys) -> None:
    get, key_of, prefix = keys.get, keys.key_of, keys.prefix
    mechanisms = keys.enabled_mechanisms()
    key = key_of("sasl.enabled.mechanisms")
    if not mechanisms:
        raise ConfigError(f"{key}: listener {sec.name} is {sec.protocol} but no SASL mechanism is enabled", key)
    for mech in mechanisms:
        if mech not in SUPPORTED_MECHANISMS:
            default = " (Kafka's default)" if mech == "GSSAPI" else ""
            raise ConfigError(
                f"{key}: {mech}{default} is not supported on listener {sec.name}; "
                f"enable some of {', '.join(SUPPORTED_MECHANISMS)}",
                key,
            )
        module = keys.jaas_module(mech)
        if module is None:
            jaas_key = f"{mech.lower()}.sasl.jaas.config"
            raise ConfigError(
                f"{prefix}{jaas_key}: listener {sec.name} enables {mech} but has no JAAS line for it, e.g. "
                f"{prefix}{jaas_key}={LOGIN_MODULES[mech]} required;",
                prefix + jaas_key,
            )
        if mech == "PLAIN":
            sec.plain_users = {k[5:]: v for k, v in module.options.items() if k.startswith("user_")}
    sec.sasl_mechanisms = tuple(mechanisms)
    sec.reauth_ms = int(get("connections.max.reauth.ms") or 0)
    sec.max_receive_size = int(get("sasl.server.max.receive.size"))
    sec.failed_authentication_delay_ms = int(get("connection.failed.authentication.delay.ms"))
