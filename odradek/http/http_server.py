"""The HTTP listener: bound at once, served by aiohttp once it is loaded, connections capped.

``bind()`` opens the listening sockets synchronously (cheap; an ephemeral port is known
at once). ``start()`` then returns immediately. aiohttp and the application are loaded by
a task that imports them in a worker thread and then accepts on those sockets; until then
connections wait in the listen backlog. With ``lazy=True`` (the broker) that task starts
only when the first connection arrives, so a broker nobody asks over HTTP pays neither the
imports (about 150 ms of CPU, which would compete with its first Kafka answers) nor their
memory (about 14 MiB).

A hostile or slow HTTP client costs only its own connection: each one is a transport on
the shared event loop with its own buffers, a connection that sends nothing is closed
after ``FIRST_REQUEST_TIMEOUT_S``, and beyond ``max_connections`` each new connection
closes the oldest one (which a flood of idle connections makes one of its own).
Requests are limited in size by aiohttp (8 KiB request lines and header fields) and by
the application (small bodies).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable

from odradek._tasks import cancel_and_wait

log = logging.getLogger(__name__)

FIRST_REQUEST_TIMEOUT_S = 10.0
KEEPALIVE_TIMEOUT_S = 15.0
_BACKLOG = 4096  # as the Kafka listeners' (the kernel caps it at net.core.somaxconn)


class HttpBindError(OSError):
    """An HTTP listener could not bind; the message names the address and the fix."""


class HttpServer:
    """Listens on ``addresses`` ((host, port); "" binds every interface, port 0 a free one).

    ``make_app`` builds the aiohttp Application; it runs on the loop after the imports.
    """

    def __init__(
        self,
        addresses: list[tuple[str, int]],
        make_app: Callable[[], object],
        *,
        max_connections: int = 1000,
        config_key: str = "http.listeners",
    ):
        self.addresses = addresses
        self.make_app = make_app
        self.max_connections = max_connections
        self.config_key = config_key
        self.sockets: list[socket.socket] = []
        self.connections: OrderedDict[_GatedConnection, None] = OrderedDict()
        self.evicted = 0
        self.serving = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._runner = None

    @property
    def bound(self) -> list[tuple[str, int]]:
        return [s.getsockname()[:2] for s in self.sockets]

    @property
    def urls(self) -> list[str]:
        out = []
        for host, port in self.bound:
            shown = f"[{host}]" if ":" in host else host
            out.append(f"http://{shown}:{port}")
        return out

    # -- lifecycle -----------------------------------------------------------------------

    def bind(self) -> None:
        for host, port in self.addresses:
            try:
                self.sockets.append(_listen(host, port))
            except OSError as exc:
                self.close_sockets()
                shown = f"http://{f'[{host}]' if ':' in host else host}:{port}"
                if exc.errno == errno.EADDRINUSE:
                    raise HttpBindError(
                        exc.errno,
                        f"{self.config_key}: {shown} is already in use (another broker or console?); "
                        f"give this one its own port (e.g. {self.config_key}=http://{host or '0.0.0.0'}:0 "
                        f"for a free one), or {self.config_key}= (empty) to turn HTTP off",
                    ) from None
                raise HttpBindError(
                    exc.errno, f"{self.config_key}: cannot listen on {shown}: {exc.strerror}"
                ) from None

    def start(self, *, lazy: bool = False) -> None:
        """Start serving in the background (bind first); ``lazy``: on the first connection."""
        log.info("HTTP console, metrics and health checks on %s", ", ".join(self.urls))
        if not lazy:
            self._load()
            return
        loop = asyncio.get_running_loop()
        for sock in self.sockets:
            loop.add_reader(sock.fileno(), self._load)

    def _load(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self.sockets:
            loop.remove_reader(sock.fileno())
        if self._task is None:
            self._task = loop.create_task(self._serve(), name="http-listener")
            self._task.add_done_callback(self._report_failure)

    async def _serve(self) -> None:
        started = time.perf_counter()
        await asyncio.to_thread(_import_aiohttp)
        from aiohttp import web

        app = self.make_app()
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=KEEPALIVE_TIMEOUT_S
        )
        await self._runner.setup()
        loop = asyncio.get_running_loop()
        factory = self._runner.server
        for sock in self.sockets:
            server = await loop.create_server(
                lambda: _GatedConnection(self, factory()), sock=sock, backlog=_BACKLOG
            )
            self._servers.append(server)
        self.serving.set()
        log.debug("HTTP serving, %.0f ms after its first connection", (time.perf_counter() - started) * 1000)

    def _report_failure(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "the HTTP listener failed to start; Kafka clients are served as usual, but /metrics, "
                "the health checks and the console are not (is aiohttp installed? pip install aiohttp)",
                exc_info=task.exception(),
            )

    async def wait_serving(self, timeout: float | None = None) -> None:
        """Wait until accepting, or raise what stopped the start (not for ``lazy`` starts)."""
        waiter = asyncio.ensure_future(self.serving.wait())
        try:
            done, _ = await asyncio.wait({waiter, self._task}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            waiter.cancel()
        if self._task in done and not self.serving.is_set():
            self._task.result()  # raises
        if not self.serving.is_set():
            raise TimeoutError("the HTTP listener did not start in time")

    async def close(self) -> None:
        """Stop accepting, close every connection, release the sockets. Safe to call twice."""
        if self._task is None:
            loop = asyncio.get_running_loop()
            for sock in self.sockets:
                if sock.fileno() >= 0:
                    loop.remove_reader(sock.fileno())
        await cancel_and_wait(self._task)
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.close_sockets()

    def close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()

    # -- the connection gate ---------------------------------------------------------------

    def admit(self, conn: _GatedConnection) -> None:
        while len(self.connections) >= self.max_connections:
            oldest, _ = self.connections.popitem(last=False)
            self.evicted += 1
            if self.evicted == 1 or self.evicted % 1000 == 0:
                log.warning(
                    "HTTP connections at http.max.connections (%d): closing the oldest (%d closed so far)",
                    self.max_connections,
                    self.evicted,
                )
            oldest.close()
        self.connections[conn] = None

    def release(self, conn: _GatedConnection) -> None:
        self.connections.pop(conn, None)


class _GatedConnection(asyncio.Protocol):
    """aiohttp's protocol for one connection, counted, and closed if it never speaks."""

    __slots__ = ("server", "inner", "transport", "_first_request_timer")

    def __init__(self, server: HttpServer, inner: asyncio.Protocol):
        self.server = server
        self.inner = inner
        self.transport = None
        self._first_request_timer = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server.admit(self)
        self._first_request_timer = asyncio.get_running_loop().call_later(FIRST_REQUEST_TIMEOUT_S, self.close)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._first_request_timer is not None:
            self._first_request_timer.cancel()
            self._first_request_timer = None
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received()

    def connection_lost(self, exc) -> None:
        if self._first_request_timer is not None:
            self._first_request_timer.cancel()
            self._first_request_timer = None
        self.server.release(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


def _listen(host: str, port: int) -> socket.socket:
    if host == "" and socket.has_dualstack_ipv6():
        sock = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=_BACKLOG)
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=_BACKLOG)
    sock.setblocking(False)
    return sock


def _import_aiohttp() -> None:
    """The imports the HTTP side needs, run in a worker thread."""
    import aiohttp.web  # noqa: F401
    import prometheus_client  # noqa: F401

    import odradek.http.app  # noqa: F401
