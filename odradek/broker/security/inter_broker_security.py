"""How a broker connects to the other brokers of its cluster (controller requests, follower
fetches, ControlledShutdown, transaction markers): as a client of their
``inter.broker.listener.name`` listener, with that listener's security, as Kafka does.

* TLS (SSL, SASL_SSL): the listener's trust store checks the other brokers' certificates
  (the system's CAs without one), its key store is this broker's client certificate (for
  ``ssl.client.auth``), and ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's
  default; empty turns it off) checks their host names.
* SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism.inter.broker.protocol`` (one the listener
  enables), with the ``username`` and ``password`` options of the listener's JAAS line for it
  (``listener.name.<l>.scram-sha-256.sasl.jaas.config=...ScramLoginModule required
  username="broker" password="...";``).

The brokers are then that user: it needs ClusterAction on the cluster (or ``super.users``)
when an authorizer is on. What cannot work is refused at start, naming the key.
"""

from __future__ import annotations

import ssl

from odradek.broker.security.listener_security import SUPPORTED_MECHANISMS, ListenerKeys
from odradek.broker.security.tls_context import load_keystore, load_truststore, set_protocols
from odradek.config_def import ConfigError
from odradek.net.connection_security import ConnectionSecurity


def inter_broker_security(config) -> ConnectionSecurity:
    name = config.inter_broker_listener_name
    endpoint = next((e for e in config.listeners if e.name == name), None)
    protocol = endpoint.security_protocol if endpoint is not None else "PLAINTEXT"
    keys = ListenerKeys.of(config, name)
    ctx = None
    check_hostname = True
    if protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.create_default_context()
        load_truststore(ctx, keys.get, keys.key_of)  # none: the system's CAs
        if keys.get("ssl.keystore.location") is not None or keys.get("ssl.keystore.key") is not None:
            load_keystore(ctx, keys.get, keys.key_of, name)
        set_protocols(ctx, keys.get, keys.key_of)
        check_hostname = str(keys.get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
        ctx.check_hostname = check_hostname
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ConnectionSecurity(protocol, ctx, check_hostname)
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = str(config.get(key) or "").strip().upper()
    enabled = keys.enabled_mechanisms()
    if mechanism not in SUPPORTED_MECHANISMS or mechanism not in enabled:
        default = " (Kafka's default)" if mechanism == "GSSAPI" else ""
        raise ConfigError(
            f"{key}: {mechanism}{default} is not a mechanism the inter-broker listener {name} enables; "
            f"set it to one of {', '.join(m for m in enabled if m in SUPPORTED_MECHANISMS) or 'PLAIN, SCRAM-SHA-256'}",
            key,
        )
    module = keys.jaas_module(mechanism)
    jaas_key = f"{keys.prefix}{mechanism.lower()}.sasl.jaas.config"
    if module is None or "username" not in module.options or "password" not in module.options:
        raise ConfigError(
            f"{jaas_key}: the brokers log in to each other with it, so it needs username=\"...\" "
            "password=\"...\" (the inter-broker user, who needs ClusterAction or super.users)",
            jaas_key,
        )
    return ConnectionSecurity(
        protocol, ctx, check_hostname, mechanism, module.options["username"], module.options["password"]
    )
