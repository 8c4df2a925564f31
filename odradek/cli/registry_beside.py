"""The schema registry `odradek server` runs beside its broker (``schema.registry.listeners``).

It is a client of the broker like any other, on the same event loop; the broker knows
nothing of it. It connects through the broker's first PLAINTEXT listener or, when there is
none, through the inter-broker listener with the brokers' own credentials and trust store.
On a broker with SASL listeners it asks HTTP basic credentials of the users the broker
knows (PLAIN users of the JAAS lines, SCRAM credentials of the metadata store); with an
authorizer, a write needs the ACLs of ``registry_security``. ``https://`` listeners serve
TLS with the broker's ``ssl.keystore.*`` keys. A listener it cannot bind stops the start
with a message; the schemas topic is read in the background, retried until it can be.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl

from odradek.broker.server import StartupError

log = logging.getLogger("odradek.schema_registry")


def _client_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def client_options(broker) -> dict:
    """How the registry reaches its broker: a PLAINTEXT listener, else the inter-broker one."""
    from odradek.broker.security.inter_broker_security import inter_broker_security
    from odradek.broker.security.listener_security import ListenerKeys

    config = broker.config
    listener = next((e for e in config.listeners if e.security_protocol == "PLAINTEXT"), None)
    if listener is None:
        listener = next(e for e in config.listeners if e.name == config.inter_broker_listener_name)
    host, port = broker.network.bound[listener.name]
    options: dict = {"bootstrap_servers": f"{_client_host(host)}:{port}"}
    if listener.security_protocol == "PLAINTEXT":
        return options
    security = inter_broker_security(config)
    keys = ListenerKeys.of(config, listener.name)
    options["security_protocol"] = security.protocol.lower()
    if security.sasl:
        options.update(sasl_mechanism=security.mechanism, sasl_username=security.username, sasl_password=security.password)
    if security.ssl_context is not None:
        options["ssl_ca_location"] = keys.get("ssl.truststore.location")
        options["ssl_endpoint_identification_algorithm"] = "https" if security.check_hostname else ""
        if keys.get("ssl.keystore.location"):
            options["ssl_keystore_location"] = keys.get("ssl.keystore.location")
            options["ssl_key_password"] = keys.get("ssl.key.password")
    return options


def broker_security(broker):
    """The registry's RegistrySecurity on this broker: HTTP basic authentication when a
    listener speaks SASL, checked against the broker's users; writes by its authorizer."""
    from odradek.http.authz import Caller
    from odradek.protocol.sasl_mechanisms import SCRAM_MECHANISMS
    from odradek.schema_registry.registry_security import RegistrySecurity, scram_password_matches

    securities = broker.listener_security.values()
    if not any(sec.sasl for sec in securities):
        return None
    plain = {user: pw for sec in securities for user, pw in sec.plain_users.items()}

    async def verify(user: str, password: str) -> bool:
        if user in plain:
            return hmac.compare_digest(plain[user].encode(), password.encode())
        for mechanism in SCRAM_MECHANISMS:
            credential = broker.scram_credential(user, mechanism)
            if credential is not None:  # a key derivation: off the event loop
                return await asyncio.to_thread(scram_password_matches, credential, password)
        return False

    async def authorize(principal: str, operation: str, resource_type: str, name: str) -> bool:
        authorizer = broker.authorizer
        return authorizer is None or authorizer.authorize(Caller(principal), operation, resource_type, name)

    return RegistrySecurity(verify, authorize)


async def start_beside(broker):
    """The RegistryServer started for ``broker``, or None when the key is empty."""
    urls = broker.config.get("schema.registry.listeners")
    if not urls:
        return None
    from odradek.config_def import ConfigError
    from odradek.schema_registry.registry_config import (
        RegistryConfig,
        RegistryConfigError,
        parse_listener,
        tls_context,
    )
    from odradek.schema_registry.registry_server import RegistryServer

    listeners = [parse_listener(u) for u in urls]
    try:
        options = client_options(broker)
    except ConfigError as exc:
        raise StartupError(
            f"schema.registry.listeners: the registry beside the broker connects through the inter-broker "
            f"listener when there is no PLAINTEXT one, and cannot: {exc}"
        ) from None
    config = RegistryConfig(
        listeners=listeners,
        bootstrap_servers=options.pop("bootstrap_servers"),
        client_options=options,
    )
    if any(listener.tls for listener in listeners):
        try:
            config.ssl_context = tls_context(broker.config.get)
            truststore = broker.config.get("ssl.truststore.location")
            config.forward_ssl = ssl.create_default_context(cafile=truststore) if truststore else None
        except RegistryConfigError as exc:
            raise StartupError(f"schema.registry.listeners: {exc}") from None
    if listeners[0].host not in ("", "0.0.0.0", "::"):
        config.host_name = listeners[0].host  # what other instances forward writes to
    server = RegistryServer(config, broker_security(broker))
    try:
        await server.start()
    except OSError as exc:
        await server.close()
        raise StartupError(
            f"schema.registry.listeners: cannot listen on {', '.join(urls)} ({exc.strerror or exc}); "
            "choose another port, or set schema.registry.listeners= (empty) to turn the registry off"
        ) from None
    broker.schema_registry_url = server.local_url  # what the console's Schemas page reads
    return server
