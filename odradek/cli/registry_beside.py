"""The schema registry `odradek server` runs beside its broker (``schema.registry.listeners``).

It is a client of the broker like any other (through its first PLAINTEXT listener), on the
same event loop; the broker knows nothing of it. A listener it cannot bind stops the start
with a message; the schemas topic is read in the background, retried until it can be.
"""

from __future__ import annotations

import logging

from odradek.broker.server import StartupError

log = logging.getLogger("odradek.schema_registry")


def _client_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


async def start_beside(broker):
    """The RegistryServer started for ``broker``, or None when the key is empty or no
    listener speaks PLAINTEXT (a secured broker: run `odradek schema-registry`)."""
    urls = broker.config.get("schema.registry.listeners")
    if not urls:
        return None
    from odradek.schema_registry.registry_config import RegistryConfig, parse_listener
    from odradek.schema_registry.registry_server import RegistryServer

    plaintext = next((e for e in broker.config.listeners if e.security_protocol == "PLAINTEXT"), None)
    if plaintext is None:
        log.warning(
            "schema.registry.listeners is set but the broker has no PLAINTEXT listener: no registry beside it; "
            "run `odradek schema-registry` with kafkastore.security.protocol and its sasl/ssl keys"
        )
        return None
    host, port = broker.network.bound[plaintext.name]
    listeners = [parse_listener(u) for u in urls]
    config = RegistryConfig(listeners=listeners, bootstrap_servers=f"{_client_host(host)}:{port}")
    if listeners[0][0] not in ("", "0.0.0.0", "::"):
        config.host_name = listeners[0][0]  # what other instances forward writes to
    server = RegistryServer(config)
    try:
        await server.start()
    except OSError as exc:
        await server.close()
        raise StartupError(
            f"schema.registry.listeners: cannot listen on {', '.join(urls)} ({exc.strerror or exc}); "
            "choose another port, or set schema.registry.listeners= (empty) to turn the registry off"
        ) from None
    return server
