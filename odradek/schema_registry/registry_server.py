"""Running the registry: the store, the REST API on its listeners, and an orderly close.

``RegistryServer(config)`` is used by ``odradek schema-registry`` (its own process) and by
``odradek server`` (on the broker's event loop, as a client of that broker).
"""

from __future__ import annotations

import asyncio
import logging
import signal

import aiohttp
from aiohttp import web

from odradek._tasks import cancel_and_wait

from . import registry_errors as err
from .registry import Registry
from .registry_config import RegistryConfig
from .registry_election import LeaderElector
from .registry_metrics import RegistryMetrics
from .registry_security import BrokerAcls, RegistrySecurity, sasl_verifier
from .rest_api import CONTENT_TYPE, make_app
from .schemas_topic import SchemasTopic

log = logging.getLogger("odradek.schema_registry")

RETRY_S = 2.0


class RegistryServer:
    def __init__(self, config: RegistryConfig, security: RegistrySecurity | None = None):
        """``security`` decides who may do what (beside a broker: its users and ACLs); by
        default ``authentication.method=BASIC`` checks passwords with the brokers."""
        self.config = config
        if security is None and config.basic_auth:
            acls = BrokerAcls(config.store_client_options, config.super_users, config.allow_if_no_acl)
            security = RegistrySecurity(
                sasl_verifier(config.store_client_options, config.timeout_s), acls.authorize if config.acls else None
            )
        self.security = security
        self.store = SchemasTopic(
            config.store_client_options, config.topic, config.timeout_s, config.topic_replication_factor
        )
        self.registry = Registry(self.store, config.compatibility_level)
        self._runner: web.AppRunner | None = None
        self._loader: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.elector: LeaderElector | None = None
        self._leader_known = asyncio.Event()
        self._needs_catch_up = False
        self._session: aiohttp.ClientSession | None = None
        self.bound: list[tuple[str, int]] = []

    @property
    def url(self) -> str:
        return self.config.listeners[0].url(self.bound[0][1])

    @property
    def local_url(self) -> str:
        """The first listener as this machine reaches it (an address for every interface is loopback)."""
        listener = self.config.listeners[0]
        if listener.host in ("", "0.0.0.0", "::"):
            listener = listener._replace(host="127.0.0.1")
        return listener.url(self.bound[0][1])

    async def start(self) -> None:
        """Bind the listeners (an OSError if one is taken), then read the schemas topic in the
        background; until it is read to its end, requests get 50001 (no answer comes from a
        partial view)."""
        await self.bind()
        self._loader = asyncio.get_running_loop().create_task(self._load(), name="schema-registry-load")
        self.elector = LeaderElector(
            self.config.store_client_options, self.config.group_id, self.identity, self._leader_changed
        )
        self.elector.start()

    @property
    def identity(self) -> dict:
        return {
            "host": self.config.host_name,
            "port": self.bound[0][1],
            "scheme": "https" if self.config.listeners[0].tls else "http",
            "leader_eligibility": self.config.leader_eligibility,
            "version": 1,
        }

    async def _leader_changed(self, leader: dict | None, mine: bool) -> None:
        self._needs_catch_up = mine  # a new leader reads what the old one wrote before writing
        if leader is None:
            self._leader_known.clear()
        else:
            self._leader_known.set()

    async def _forward(self, request: web.Request, body: bytes) -> web.Response | None:
        """None when this instance leads (the request is answered here), else the leader's answer."""
        if not self._leader_known.is_set():  # (wait_for costs a task: not on every write)
            try:
                await asyncio.wait_for(self._leader_known.wait(), self.config.timeout_s)
            except TimeoutError:
                raise err.unknown_leader("no leader-eligible registry instance has been elected") from None
        assert self.elector is not None
        if self.elector.is_leader:
            if self._needs_catch_up:
                await self.store.catch_up()
                self._needs_catch_up = False
            return None
        leader = self.elector.leader_identity or {}
        url = f"{leader.get('scheme', 'http')}://{leader.get('host')}:{leader.get('port')}{request.path_qs}"
        assert self._session is not None
        try:
            async with self._session.request(
                request.method,
                url,
                data=body,
                headers=self._forwarded_headers(request),
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
            ) as resp:
                text = await resp.text()
                return web.Response(status=resp.status, text=text, content_type=CONTENT_TYPE)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise err.forwarding_error(f"{request.method} {url}: {exc}") from None

    @staticmethod
    def _forwarded_headers(request: web.Request) -> dict[str, str]:
        """The leader checks the caller's credentials again: they travel with the request."""
        headers = {"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE)}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        return headers

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
        connector = aiohttp.TCPConnector(ssl=self.config.forward_ssl) if self.config.forward_ssl else None
        self._session = aiohttp.ClientSession(connector=connector)
        self.metrics = RegistryMetrics(lambda: self.store.state, lambda: bool(self.elector and self.elector.is_leader))
        app = make_app(self.registry, self._forward, ready=self.ready, metrics=self.metrics, security=self.security)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        for listener in self.config.listeners:
            tls = self.config.ssl_context if listener.tls else None
            site = web.TCPSite(self._runner, listener.host or None, listener.port, ssl_context=tls)
            await site.start()
            for sock in getattr(site._server, "sockets", None) or ():  # the bound port when 0 was asked
                self.bound.append((listener.host, sock.getsockname()[1]))
                break
        urls = [listener.url(port) for listener, (_, port) in zip(self.config.listeners, self.bound, strict=False)]
        auth = ", HTTP basic authentication" if self.security is not None and self.security.verify else ""
        log.info("schema registry serving on %s%s", ", ".join(urls), auth)

    async def close(self) -> None:
        await cancel_and_wait(self._loader)
        self._loader = None
        if self.elector is not None:
            await self.elector.close()
            self.elector = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
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
