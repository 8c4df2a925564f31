"""``odradek console``: the broker's console, API and lag metrics for a cluster running elsewhere.

``run_console`` reads the cluster through the Kafka protocol (``RemoteView``) and serves
the same pages and JSON API a broker serves on its HTTP listener, with kafka-exporter's
lag and offset families on ``/metrics`` (the broker-internal families need a broker).
It runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from odradek.http.authz import ConsoleAuthorizer
from odradek.http.http_server import HttpServer
from odradek.http.remote_view import RemoteView


async def serve_console(
    view: RemoteView,
    addresses: list[tuple[str, int]],
    *,
    stop: asyncio.Event,
    on_ready: Callable[[list[str]], None] = lambda urls: None,
    authorizer: ConsoleAuthorizer | None = None,
    max_connections: int = 1000,
    schemas=None,
    connect=None,
) -> None:
    """Serve ``view`` on ``addresses`` until ``stop`` is set."""
    authorizer = authorizer or ConsoleAuthorizer()
    server: HttpServer

    def make_app():
        from odradek.http.app import make_app

        return make_app(view, metrics, authorizer, schemas, connect=connect)

    async def metrics() -> bytes:
        from odradek.http.exporter import exporter_families, http_families, render

        return render(exporter_families(await view.exporter_snapshot()) + http_families(server))

    server = HttpServer(addresses, make_app, max_connections=max_connections, config_key="--listen")
    server.bind()
    await view.start()
    try:
        server.start()
        await server.wait_serving(60)
        on_ready(server.urls)
        await stop.wait()
    finally:
        await server.close()
        await view.close()


def run_console(view: RemoteView, addresses, on_ready, schemas=None, *, connect=None) -> None:
    """Run ``serve_console`` in this process until SIGINT or SIGTERM."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve_console(view, addresses, stop=stop, on_ready=on_ready, schemas=schemas, connect=connect)

    asyncio.run(main())
