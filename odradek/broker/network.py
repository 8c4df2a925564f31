"""The transport: asyncio listeners and one protocol object per connection.

Theory of operation. Each connection receives into its ``FrameReader``'s buffers
(``BufferedProtocol``: no concatenation of chunks). Every complete frame is parsed and
handed to its API handler at once, on the event loop, so requests of one connection take
effect in arrival order. A handler answers synchronously or returns a coroutine (delayed
operations: a Fetch waiting for data); responses leave strictly in request order, each
waiting behind any earlier one still pending — Kafka's per-connection ordering rule.

Back-pressure: when the socket's send buffer fills (a slow reader) or too many responses
are queued, the connection stops reading until it drains, so one stalled client holds
only its own memory. Anything a connection sends that we cannot make sense of closes
that connection alone, with the reason logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque

from odradek._tasks import cancel_and_wait
from odradek.broker.handlers import RawResponse, Request
from odradek.broker.metrics import RequestMetrics
from odradek.protocol import messages
from odradek.protocol.errors import KafkaError
from odradek.protocol.frames import FrameReader, FrameTooLarge, InvalidFrameSize

log = logging.getLogger(__name__)

MAX_QUEUED_RESPONSES = 64

_now_ns = time.perf_counter_ns


class _Slot:
    __slots__ = ("data", "ready")

    def __init__(self):
        self.data = None
        self.ready = False


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: NetworkServer, listener: str):
        self.server = server
        self.broker = server.broker
        self.listener = listener
        self.reader = FrameReader(server.max_request_size)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.last_active = time.monotonic()
        self.closed = False
        self._slots: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task] = set()
        self._write_paused = False
        self._read_paused = False
        self._socket_fd: int | None = None
        self._observe = server.request_metrics.observe  # (api key, total time in ns)

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if not self.server.register(self):
            log.warning(
                "closing connection from %s: max.connections (%d) reached",
                self.peer,
                self.server.max_connections,
            )
            self.closed = True
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.server.zero_copy:
                self._socket_fd = sock.fileno()

    def connection_lost(self, exc):
        self.closed = True
        self.server.unregister(self)
        for task in self._tasks:
            task.cancel()
        self._slots.clear()

    def get_buffer(self, sizehint):
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes):
        try:
            frames = self.reader.buffer_updated(nbytes)
        except (FrameTooLarge, InvalidFrameSize) as exc:
            self.close(f"{exc} (socket.request.max.bytes)")
            return
        self.last_active = time.monotonic()
        lanes = self.server.fast_lanes
        for payload in frames:
            if self.closed:
                return
            # A fast lane answers at once, so only when no earlier response is pending.
            if not self._slots and len(payload) > 1 and payload[0] == 0 and payload[1] in lanes:
                started = _now_ns()
                if self._try_fast_lane(lanes[payload[1]], payload):
                    self._observe(payload[1], _now_ns() - started)
                    continue
            self._handle_frame(payload)

    def pause_writing(self):
        self._write_paused = True
        self._update_reading()

    def resume_writing(self):
        self._write_paused = False
        self._update_reading()

    # -- request handling --------------------------------------------------------------

    def _try_fast_lane(self, lane, payload) -> bool:
        try:
            response = lane(self.broker, payload)
        except KafkaError as exc:
            self.close(f"{messages.api_name(payload[1])} rejected: {exc}")
            return True
        except Exception:
            log.exception(
                "%s from %s failed; closing the connection", messages.api_name(payload[1]), self.peer
            )
            self.close("internal error")
            return True
        if response is None:
            return False
        if response:
            self.transport.write(response)
        return True

    def _handle_frame(self, payload):
        started = _now_ns()
        try:
            header, pos = messages.parse_request_header(payload)
        except messages.MalformedRequest as exc:
            self.close(f"malformed request header: {exc}")
            return
        spec = self.server.registry.get(header.api_key)
        if spec is None:
            self.close(f"unknown API key {header.api_key} ({messages.api_name(header.api_key)})")
            return
        if not spec.min_version <= header.api_version <= spec.max_version:
            fallback = self.broker.unsupported_version_response(header)
            if fallback is None:
                self.close(
                    f"unsupported {spec.name} version {header.api_version} "
                    f"(supported {spec.min_version}-{spec.max_version})"
                )
                return
            self._push_ready(fallback)
            return
        try:
            body = messages.decode_request_body(header, payload, pos)
        except messages.MalformedRequest as exc:
            self.close(str(exc))
            return
        request = Request(
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            body,
            peer=self.peer,
            listener=self.listener,
            received_ns=started,
        )
        try:
            result = spec.handler(self.broker, request)
        except KafkaError as exc:
            self.close(f"{spec.name} v{header.api_version} rejected: {exc}")
            return
        except Exception:
            log.exception(
                "%s v%d from %s failed; closing the connection", spec.name, header.api_version, self.peer
            )
            self.close("internal error")
            return
        if result is None:
            self._observe(header.api_key, _now_ns() - started)
            return
        # RawResponse (Produce, Fetch) first: asyncio.iscoroutine is an ABC check.
        if type(result) is not RawResponse and asyncio.iscoroutine(result):
            slot = _Slot()
            self._slots.append(slot)
            task = asyncio.get_running_loop().create_task(result)
            self._tasks.add(task)
            task.add_done_callback(lambda t, s=slot, r=request: self._on_done(t, s, r))
            self._update_reading()
        else:
            self._push_ready(self._encode(request, result))
            self._observe(header.api_key, _now_ns() - started)

    def _on_done(self, task: asyncio.Task, slot: _Slot, request: Request):
        self._tasks.discard(task)
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, KafkaError):
                self.close(f"{messages.api_name(request.api_key)} rejected: {exc}")
            else:
                log.error(
                    "%s from %s failed; closing the connection",
                    messages.api_name(request.api_key),
                    self.peer,
                    exc_info=exc,
                )
                self.close("internal error")
            return
        result = task.result()
        slot.data = None if result is None else self._encode(request, result)
        self._observe(request.api_key, _now_ns() - request.received_ns)
        slot.ready = True
        self._flush()

    def _encode(self, request: Request, result):
        """The response as one bytes object, or a list of buffers when it carries record
        data: small parts are joined so that a response costs one send, while record
        bytes and file slices pass through uncopied."""
        if isinstance(result, RawResponse):
            parts = result.parts
            size = 0
            for part in parts:
                size += len(part)
            head = messages.response_prefix(
                request.api_key, request.api_version, request.correlation_id, size
            )
            if size < _JOIN_BELOW and not result.has_files:
                return b"".join([head, *parts])
            return _coalesce([head, *parts])
        if isinstance(result, bytes):
            return result
        return messages.encode_response(request.api_key, request.api_version, request.correlation_id, result)

    def _push_ready(self, data):
        if not self._slots:
            self._write(data)
            return
        slot = _Slot()
        slot.data, slot.ready = data, True
        self._slots.append(slot)

    def _flush(self):
        slots = self._slots
        while slots and slots[0].ready:
            data = slots.popleft().data
            if data is not None:
                self._write(data)
        self._update_reading()

    def _write(self, data):
        if self.closed:
            return
        if isinstance(data, bytes):
            self.transport.write(data)
        elif any(hasattr(p, "send_to") for p in data):
            self._write_with_files(data)
        else:
            self.transport.writelines(data)

    def _write_with_files(self, parts):
        """Write parts that include file slices: zero-copy with sendfile when the socket is
        idle, else (or for whatever the socket did not take) through the transport."""
        transport = self.transport
        fd = self._socket_fd
        if fd is None or transport.get_write_buffer_size():
            transport.writelines([p.read() if hasattr(p, "send_to") else p for p in parts])
            return
        pending: list = []
        for i, part in enumerate(parts):
            if not hasattr(part, "send_to"):
                pending.append(part)
                continue
            if pending:
                left = _send_direct(fd, pending)
                if left:
                    transport.writelines(left + [p.read() if hasattr(p, "send_to") else p for p in parts[i:]])
                    return
                pending = []
            sent = 0
            try:
                while sent < part.size:
                    n = part.send_to(fd, sent)
                    if n == 0:
                        break
                    sent += n
            except BlockingIOError:
                pass
            if sent < part.size:
                rest = part.read(sent)
                transport.writelines(
                    [rest] + [p.read() if hasattr(p, "send_to") else p for p in parts[i + 1 :]]
                )
                return
        if pending:
            left = _send_direct(fd, pending)
            if left:
                transport.writelines(left)

    def _update_reading(self):
        if self.closed or self.transport is None:
            return
        should_pause = self._write_paused or len(self._slots) >= MAX_QUEUED_RESPONSES
        if should_pause and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def close(self, reason: str):
        if self.closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        if self.transport is not None:
            self.transport.close()


_JOIN_BELOW = 64 * 1024


def _coalesce(parts: list) -> list:
    """Join runs of small buffers; keep large ones (record data) and file slices apart."""
    out: list = []
    run: list = []
    for part in parts:
        if hasattr(part, "send_to") or len(part) >= _JOIN_BELOW:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(part)
        else:
            run.append(part)
    if run:
        out.append(b"".join(run))
    return out


def _send_direct(fd: int, parts: list) -> list:
    """writev ``parts`` to a non-blocking socket; return what it did not take."""
    try:
        n = os.writev(fd, parts)
    except BlockingIOError:
        return parts
    for i, part in enumerate(parts):
        if n < len(part):
            return [memoryview(part)[n:]] + parts[i + 1 :]
        n -= len(part)
    return []


class NetworkServer:
    """Listeners, the set of live connections, and the idle-connection sweeper."""

    def __init__(
        self,
        broker,
        *,
        max_request_size: int,
        max_connections: int,
        idle_timeout_s: float,
        registry,
        fast_lanes=None,
        zero_copy: bool = True,
    ):
        self.broker = broker
        self.zero_copy = zero_copy
        self.max_request_size = max_request_size
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.registry = registry
        self.fast_lanes = fast_lanes or {}
        self.request_metrics = RequestMetrics()
        self.connections: set[Connection] = set()
        self.bound: dict[str, tuple[str, int]] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._sweeper: asyncio.Task | None = None

    def register(self, conn: Connection) -> bool:
        if len(self.connections) >= self.max_connections:
            return False
        self.connections.add(conn)
        return True

    def unregister(self, conn: Connection) -> None:
        self.connections.discard(conn)

    async def bind(self, listeners) -> None:
        """Bind every listener (so ephemeral ports are known) without accepting yet."""
        loop = asyncio.get_running_loop()
        for listener in listeners:
            server = await loop.create_server(
                lambda name=listener.name: Connection(self, name),
                listener.host or None,
                listener.port,
                reuse_address=True,
                backlog=4096,
                start_serving=False,
            )
            self._servers.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            self.bound[listener.name] = (host, port)

    async def start_serving(self) -> None:
        for server in self._servers:
            await server.start_serving()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())

    async def _sweep_idle(self) -> None:
        interval = min(max(self.idle_timeout_s / 10, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - self.idle_timeout_s
            for conn in [c for c in self.connections if c.last_active < deadline and not c._slots]:
                conn.close(f"idle for more than {self.idle_timeout_s:.0f}s (connections.max.idle.ms)")

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        await cancel_and_wait(self._sweeper)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
