"""Standalone mode (``connect-standalone.sh``): one worker, offsets in a file, connectors from files.

``StandaloneRuntime`` binds the REST listeners first (their address is the worker id), then
starts each connector file's connector; a connector that fails shows FAILED, the others run.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import ssl
import sys

from aiohttp import web

from odradek.connect.connect_metrics import ConnectMetrics
from odradek.connect.herder import HerderError, StandaloneHerder
from odradek.connect.offset_store import FileOffsetStore
from odradek.connect.plugins import PluginRegistry
from odradek.connect.rest_server import ConnectRestApi
from odradek.connect.worker import Worker
from odradek.connect.worker_config import WorkerConfig

log = logging.getLogger("odradek.connect")

SWITCH_INTERVAL_S = 0.0005
# A task makes a handful of short-lived objects per record; at the default 700 allocations per
# young collection the collector walked each batch many times over (a fifth of the FileStream
# pipeline's CPU: benchmarks/connect_bench.py). Young collections every 50,000 allocations.
GC_THRESHOLDS = (50_000, 20, 20)


class StandaloneRuntime:
    mode = "standalone"

    def __init__(self, config: WorkerConfig, connector_configs: list[dict[str, str]]):
        self.config = config
        self.connector_configs = connector_configs
        self.runner: web.AppRunner | None = None
        self.bound: list[tuple[str, str, int]] = []
        self.herder: StandaloneHerder | None = None

    def make_herder(self) -> StandaloneHerder:
        plugins = PluginRegistry(self.config["plugin.path"])
        store = FileOffsetStore(self.config["offset.storage.file.filename"])
        return StandaloneHerder(Worker(self.config, plugins, store, ""))

    def web_app(self, api: ConnectRestApi) -> web.Application:
        return api.app()

    async def start(self) -> None:
        self.herder = self.make_herder()
        worker = self.herder.worker
        users = dict(u.split(":", 1) for u in self.config["rest.basic.auth.users"] if ":" in u)
        api = ConnectRestApi(self.herder, await self._cluster_id(worker), ConnectMetrics(worker, self.herder.rebalance_metrics), users)
        self.runner = web.AppRunner(self.web_app(api), access_log=None)
        await self.runner.setup()
        for scheme, host, port in self.config.rest_listeners:
            context = self._tls() if scheme == "https" else None
            site = web.TCPSite(self.runner, host, port, ssl_context=context)
            await site.start()
            sock = site._server.sockets[0]  # type: ignore[union-attr]  # the bound port when 0 was asked
            self.bound.append((scheme, host, sock.getsockname()[1]))
        scheme, host, port = self.bound[0]
        advertised = self.config["rest.advertised.host.name"] or (host if host != "0.0.0.0" else "127.0.0.1")
        worker.worker_id = f"{advertised}:{self.config['rest.advertised.port'] or port}"
        log.info("Kafka Connect %s worker %s: REST API on %s", self.mode, worker.worker_id,
                 ", ".join(f"{s}://{h}:{p}" for s, h, p in self.bound))
        await self.started()

    async def started(self) -> None:
        """After the REST listeners are bound: create the connectors of the command line."""
        assert self.herder is not None
        for props in self.connector_configs:
            name = props.get("name", "")
            try:
                await self.herder.put_config(name, props, allow_replace=False)
                log.info("connector %s created", name)
            except HerderError as exc:
                log.error("connector %s not created: %s", name or "<no name>", exc.message)

    def _tls(self) -> ssl.SSLContext:
        cert = self.config["listeners.https.ssl.keystore.location"]
        if not cert:
            raise HerderError(500, "an https listener needs listeners.https.ssl.keystore.location (a PEM file)")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, self.config["listeners.https.ssl.key.location"])
        return context

    async def _cluster_id(self, worker: Worker) -> str | None:
        from odradek.client.admin import Admin

        try:
            async with Admin(**worker.client_options("admin"), default_api_timeout_ms=10000) as admin:
                return (await admin.describe_cluster()).cluster_id
        except Exception as exc:
            log.warning("cannot read the Kafka cluster id: %s", exc)
            return None

    @property
    def url(self) -> str:
        scheme, host, port = self.bound[0]
        return f"{scheme}://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.herder is not None:
            await self.herder.close()


def run(config: WorkerConfig, connector_configs: list[dict[str, str]],
        runtime_class: type[StandaloneRuntime] = StandaloneRuntime) -> None:
    """Serve until SIGTERM or SIGINT, then stop every task (committing its offsets)."""
    # Task threads are CPU-bound while the loop does I/O: every syscall of the loop gives up the
    # GIL and waits a whole switch interval (5 ms by default) to get it back. 0.5 ms halves the
    # FileStream pipeline's time (benchmarks/connect_bench.py).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.set_threshold(*GC_THRESHOLDS)

    async def main() -> None:
        runtime = runtime_class(config, connector_configs)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await runtime.start()
            gc.freeze()  # what start-up made (modules, plugins, clients) lives on: never scanned again
            await stop.wait()
        finally:
            await runtime.close()

    asyncio.run(main())
