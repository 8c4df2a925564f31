"""The broker's HTTP side: its listener, its view of the broker, and the console's authorizer.

``BrokerHttp.for_broker(broker)`` binds ``http.listeners`` at once (None when the key is
empty); ``start()``, once the Kafka listener serves, waits for the first HTTP connection
to load aiohttp and serve; ``close()`` on shutdown.
"""

from __future__ import annotations

from odradek.broker.listeners import parse_http_listener
from odradek.http.authz import ConsoleAuthorizer, broker_acls
from odradek.http.http_server import HttpServer
from odradek.http.local_view import LocalView


class BrokerHttp:
    def __init__(self, broker, addresses: list[tuple[str, int]]):
        self.broker = broker
        self.view = LocalView(broker)
        self.authorizer = ConsoleAuthorizer(broker_acls(broker))
        self.server = HttpServer(
            addresses, self._make_app, max_connections=broker.config.get("http.max.connections")
        )

    @classmethod
    def for_broker(cls, broker) -> BrokerHttp | None:
        addresses = [parse_http_listener(url) for url in broker.config.get("http.listeners")]
        if not addresses:
            return None
        http = cls(broker, addresses)
        http.server.bind()
        return http

    @property
    def urls(self) -> list[str]:
        return self.server.urls

    def start(self) -> None:
        self.server.start(lazy=True)  # aiohttp loads on the first HTTP connection

    async def close(self) -> None:
        await self.server.close()

    def _make_app(self):
        from odradek.http.app import make_app
        from odradek.http.connect_proxy import ConnectLink

        connect = ConnectLink(lambda: self.broker.config.get("console.connect.urls"))
        return make_app(self.view, self.metrics, self.authorizer, self._schema_registry(), connect=connect)

    def _schema_registry(self):
        """The registry started beside this broker (it sets ``broker.schema_registry_url``);
        its certificate is checked with the broker's trust store, else not at all (loopback)."""
        import ssl

        from odradek.http.schemas_proxy import SchemaRegistryLink

        truststore = self.broker.config.get("ssl.truststore.location")
        context = ssl.create_default_context(cafile=truststore) if truststore else False
        return SchemaRegistryLink(lambda: getattr(self.broker, "schema_registry_url", None), context)

    async def metrics(self) -> bytes:
        from odradek.http.exporter import broker_families, exporter_families, render

        snapshot = await self.view.exporter_snapshot()
        return render(broker_families(self.broker, self.server) + exporter_families(snapshot))
