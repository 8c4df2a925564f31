"""A TCP proxy in front of one broker that reads the Kafka frames passing through and can hold them.

Clients connect to the proxy (the broker advertises the proxy's port, so coordinator
connections come through it too). Every frame is forwarded unchanged; on the way the
proxy decodes the group APIs' requests and responses and keeps them as events, so a test
can wait for "the JoinGroup with a member id has reached the broker". A gate holds one
direction of one connection from a matching frame on (that frame and everything after
it, so order is kept) until the test releases it: that is how a test stops a client at an
exact step of its join, where no timing would.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from odradek.protocol import messages

REQUEST, RESPONSE = "request", "response"
GROUP_APIS = frozenset({10, 11, 12, 13, 14, 15})  # FindCoordinator .. DescribeGroups
_SIZE = struct.Struct(">i")


class Event(NamedTuple):
    direction: str
    api_key: int
    body: object  # the decoded request or response


class Gate:
    def __init__(self, proxy: GateProxy, direction: str, api_key: int, when: Callable[[object], bool]):
        self.proxy = proxy
        self.direction = direction
        self.api_key = api_key
        self.when = when
        self.closed = threading.Event()  # set once a frame is held
        self.body = None  # the held frame, decoded
        self._flush: Callable[[], None] | None = None

    def wait_closed(self, timeout: float) -> object:
        if not self.closed.wait(timeout):
            raise AssertionError(f"timed out after {timeout}s waiting for a {self.direction} to hold")
        return self.body

    def release(self) -> None:
        """Let the held frames go (or disarm a gate that held nothing yet)."""
        with self.proxy._cond:
            if self in self.proxy._gates:
                self.proxy._gates.remove(self)
        if self._flush is not None:
            self._flush()


class _Direction:
    """One way of one connection: frames pass, or queue behind a gate."""

    def __init__(self, proxy: GateProxy, writer: asyncio.StreamWriter):
        self.proxy = proxy
        self.writer = writer
        self.held: list[bytes] | None = None

    def forward(self, frame: bytes) -> None:
        if self.held is not None:
            self.held.append(frame)
        else:
            self.writer.write(frame)

    def hold(self, gate: Gate, frame: bytes) -> None:
        self.held = [frame]
        gate._flush = lambda: self.proxy._loop.call_soon_threadsafe(self._open)
        gate.closed.set()

    def _open(self) -> None:
        held, self.held = self.held or [], None
        for frame in held:
            self.writer.write(frame)


class GateProxy:
    def __init__(self, port: int):
        self.port = port
        self.upstream: tuple[str, int] | None = None
        self.events: list[Event] = []
        self._gates: list[Gate] = []
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="gate-proxy")
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self, upstream_host: str, upstream_port: int) -> GateProxy:
        self.upstream = (upstream_host, upstream_port)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def stop():
            self._server.close()
            for w in list(self._writers):
                w.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def hold(self, direction: str, api_key: int, when: Callable[[object], bool] = lambda body: True) -> Gate:
        """Hold the first later frame of ``api_key`` going ``direction`` for which ``when(body)``."""
        gate = Gate(self, direction, api_key, when)
        with self._cond:
            self._gates.append(gate)
        return gate

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float, what: str) -> Event:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
                self._cond.wait(left)

    # -- the loop --------------------------------------------------------------------------

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, client_reader, client_writer) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        self._writers |= {client_writer, broker_writer}
        in_flight: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        up = _Direction(self, broker_writer)
        down = _Direction(self, client_writer)
        try:
            await asyncio.gather(
                self._pump(client_reader, up, REQUEST, in_flight),
                self._pump(broker_reader, down, RESPONSE, in_flight),
            )
        finally:
            for w in (client_writer, broker_writer):
                w.close()
                self._writers.discard(w)

    async def _pump(self, reader, direction: _Direction, kind: str, in_flight: dict) -> None:
        try:
            while True:
                size = await reader.readexactly(4)
                payload = await reader.readexactly(_SIZE.unpack(size)[0])
                frame = size + payload
                api_key, body = self._decode(kind, payload, in_flight)
                if body is not None:
                    self._note(Event(kind, api_key, body))
                gate = self._gate_for(kind, api_key, body) if direction.held is None else None
                if gate is not None:
                    gate.body = body
                    direction.hold(gate, frame)
                else:
                    direction.forward(frame)
                await direction.writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            direction.writer.close()

    @staticmethod
    def _decode(kind: str, payload: bytes, in_flight: dict) -> tuple[int, object]:
        if kind == REQUEST:
            header, pos = messages.parse_request_header(payload)
            in_flight[header.correlation_id] = (header.api_key, header.api_version)
            if header.api_key not in GROUP_APIS:
                return header.api_key, None
            return header.api_key, messages.decode_request_body(header, payload, pos)
        (correlation_id,) = _SIZE.unpack_from(payload, 0)
        api_key, version = in_flight.pop(correlation_id, (-1, -1))
        if api_key not in GROUP_APIS:
            return api_key, None
        return api_key, messages.decode_response(api_key, version, payload)[1]

    def _note(self, event: Event) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def _gate_for(self, kind: str, api_key: int, body) -> Gate | None:
        with self._cond:
            for gate in self._gates:
                if (
                    gate.direction == kind
                    and gate.api_key == api_key
                    and body is not None
                    and gate.when(body)
                ):
                    self._gates.remove(gate)
                    return gate
        return None
