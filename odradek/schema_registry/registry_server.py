"""Running the registry: the store, the REST API on its listeners, and an orderly close.

``RegistryServer(config)`` is used by ``odradek schema-registry`` (its own process) and by
``odradek server`` (on the broker's event loop, as a client of that broker).
"""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from .registry import Registry
from .registry_config import RegistryConfig
from .rest_api import make_app
from .schemas_topic import SchemasTopic

log = logging.getLogger("odradek.schema_registry")

RETRY_S = 2.0


class RegistryServer:
    def __init__(self, config: RegistryConfig):
        self.config = config
        self.store = SchemasTopic(config.store_client_options, config.topic, config.timeout_s)
        self.registry = Registry(self.store, config.compatibility_level)
        self._runner: web.AppRunner | None = None
        self._loader: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.bound: list[tuple[str, int]] = []

    @property
    def url(self) -> str:
        host, port = self.bound[0]
        return f"http://{host or '127.0.0.1'}:{port}"

    async def start(self) -> None:
        """Bind the listeners (an OSError if one is taken), then read the schemas topic in the
        background; until it is read to its end, requests get 50001 (no answer comes from a
        partial view)."""
        await self.bind()
        self._loader = asyncio.get_running_loop().create_task(self._load(), name="schema-registry-load")

    async def wait_ready(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.ready.wait(), timeout)

    async def _load(self) -> None:
        while True:
            try:
                await self.store.start()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cannot read %s yet (%s); retrying in %.0f s", self.config.topic, exc, RETRY_S)
                await self.store.close()
                await asyncio.sleep(RETRY_S)
        self.ready.set()
        log.info("schema registry ready: %s read", self.config.topic)

    async def bind(self) -> None:
        self._runner = web.AppRunner(make_app(self.registry, ready=self.ready), access_log=None)
        await self._runner.setup()
        for host, port in self.config.listeners:
            site = web.TCPSite(self._runner, host or None, port)
            await site.start()
            for sock in getattr(site._server, "sockets", None) or ():  # the bound port when 0 was asked
                self.bound.append((host, sock.getsockname()[1]))
                break
        log.info("schema registry serving on %s", ", ".join(f"http://{h}:{p}" for h, p in self.bound))

    async def close(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
            try:
                await self._loader
            except (asyncio.CancelledError, Exception):
                pass
            self._loader = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.store.close()


def run(config: RegistryConfig) -> None:
    """Serve until SIGTERM or SIGINT."""

    async def main() -> None:
        server = RegistryServer(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await server.start()
            await stop.wait()
        finally:
            await server.close()

    asyncio.run(main())
