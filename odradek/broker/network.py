"""The transport: asyncio listeners and one protocol object per connection.

Theory of operation. Each connection receives into its ``FrameReader``'s buffers
(``BufferedProtocol``: no concatenation of chunks) and takes the complete frames one at a
time. Each is parsed and handed to its API handler at once, on the event loop, so the
requests of one connection take effect in arrival order. A handler answers synchronously
or returns a coroutine (a delayed operation: a Fetch waiting for data, a JoinGroup
waiting for the rebalance); like Kafka, which reads nothing more from a connection while
one of its requests is in progress, the connection then handles its next request only
once that answer is out, so responses leave strictly in request order.

Back-pressure and memory. A connection stops taking requests, and stops reading, while
an answer is pending, while a Fetch answer is being streamed from the log
(``ResponseStream``, broker/response_writes.py: a chunk at a time as the socket drains),
while its unsent responses exceed the transport's high-water mark (a peer that does not
read), or while it waits for ``queued.max.request.bytes``; the requests it has not handled
stay in its receive buffer or in the socket, so a stalled peer holds at most the high-water
mark plus one chunk. Receive buffers grow with the bytes that arrive, never with the size a
frame announces, and are given back when a connection goes idle. ``queued.max.request.bytes``
(by default 1/256 of the memory, broker/queued_request_bytes.py) counts the announced size of
every request that outgrows its connection's small buffer while it is being received (Kafka's
memory pool); once the count reaches the limit, a connection starting such a request waits,
without reading, until enough of the others are done, while requests that fit the small
buffer (Metadata, a small Produce) from every connection still flow. A peer that resets
its connection mid-answer is an ordinary disconnect, logged at DEBUG. ``max.connections`` and
``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``) close connections
over the limit as they are accepted; beyond ``max.connection.creation.rate`` new
connections per second, a new connection is not read until its turn comes; one that takes
its IP address over its ``connection_creation_rate`` quota (KIP-612) is never read and is
closed after its throttle time. Request frames of ``BIG_REQUEST_BYTES`` or more are
decoded out of the garbage collector's way (``_decode_big``): a request of a million items
then costs the loop a tenth of a second instead of half a second of collections. Anything
a connection sends that we cannot make sense of closes that connection alone, with the
reason logged.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import socket
import time

from odradek._tasks import cancel_and_wait
from odradek.broker import request_time_quota
from odradek.broker.broker_metrics import RequestMetrics
from odradek.broker.handlers import RawResponse, Request
from odradek.broker.queued_request_bytes import QueuedRequestBytes
from odradek.broker.response_writes import JOIN_BELOW, ResponseStream, coalesce
from odradek.broker.security.sasl_authenticator import PASS, Close, SaslAuthenticator
from odradek.broker.security.tls_context import certificate_dn
from odradek.net.socket_buffers import OS_DEFAULT, set_buffer_sizes
from odradek.protocol import messages
from odradek.protocol.errors import KafkaError
from odradek.protocol.frames import FrameReader, FrameTooLarge, InvalidFrameSize

log = logging.getLogger(__name__)

BIG_REQUEST_BYTES = 1 << 20
WRITE_HIGH_WATER = 64 * 1024  # unsent bytes at which a connection pauses (asyncio's default)
RELEASE_BUFFERS_AFTER_IDLE_S = 1.0
_LOG_EVERY_S = 10.0

_now_ns = time.perf_counter_ns
ANONYMOUS = "User:ANONYMOUS"


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: NetworkServer, listener: str):
        self.server = server
        self.broker = server.broker
        self.listener = listener
        self.security = server.security.get(listener)
        self.principal = ANONYMOUS
        # A SASL connection serves nothing but the exchange until it completes (and no
        # fast lane may bypass it); see broker/security/sasl_authenticator.py.
        self.auth = server.new_authenticator(self.security)
        self.lanes = server.fast_lanes if self.auth is None else {}
        # With an authorizer the fast lanes ask this connection whether its principal may Write
        # a topic; the answers are cached until the ACLs change (Authorizer.generation).
        self.write_check = self._may_write if server.gates is not None else None
        self._writable: dict[str, bool] = {}
        self._acl_generation = -1
        self.reader = FrameReader(server.max_request_size)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = ""
        self.last_active = time.monotonic()
        self.closed = False
        self.pending: asyncio.Task | None = None  # the request being answered later
        self.streaming: ResponseStream | None = None  # the answer being written as the socket drains
        self._write_paused = False
        self._read_paused = False
        self._in_pump = False
        self._held = False  # max.connection.creation.rate or a quota holds this connection back
        self._hold_timer: asyncio.TimerHandle | None = None
        self._reserved = 0  # queued.max.request.bytes held by the frame being received
        self._socket_fd: int | None = None
        self._observe = server.request_metrics.observe  # (api key, total time in ns)

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip = _plain_ip(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
        if not self.server.register(self):
            self.closed = True
            transport.abort()
            return
        quotas = self.broker.client_quotas
        close_in_ms = quotas.record_connection(self.ip) if quotas.ip_active else 0
        if close_in_ms:  # KIP-612: over its IP's connection_creation_rate; closed unread, later
            self._held = True
            self._update_reading()
            why = f"{self.ip} is over its connection_creation_rate quota ({quotas.ip_quota(self.ip):g}/s)"
            asyncio.get_running_loop().call_later(close_in_ms / 1000, self._close_throttled, why)
            return
        delay = self.server.creation_delay()
        if delay > 0:  # max.connection.creation.rate: this one waits its turn before being read
            self._held = True
            asyncio.get_running_loop().call_later(delay, self._end_hold)
            self._update_reading()
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and not self._take_certificate_principal(ssl_object):
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            try:
                set_buffer_sizes(sock, send_bytes=self.server.send_buffer_bytes)
            except OSError as exc:
                log.warning("cannot set socket.send.buffer.bytes on %s: %s", self.peer, exc)
            if self.server.zero_copy and ssl_object is None:  # sendfile would bypass TLS
                self._socket_fd = sock.fileno()
                # A stream may sendfile again only once the transport holds nothing.
                transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=0)

    def connection_lost(self, exc):
        self.closed = True
        self._drop_work()
        self.server.unregister(self)

    def get_buffer(self, sizehint):
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes):
        self.reader.received(nbytes)
        self.last_active = time.monotonic()
        self._pump()

    def pause_writing(self):
        self._write_paused = True
        self._update_reading()

    def resume_writing(self):
        self._write_paused = False
        if self.streaming is not None:
            self._stream()
        self._pump()

    def _is_write_paused(self) -> bool:
        return self._write_paused

    # -- taking requests ---------------------------------------------------------------

    def _pump(self):
        """Handle the requests waiting in the receive buffer, one at a time, until one
        holds the connection back; then read more only if nothing does."""
        if self._in_pump:
            return
        self._in_pump = True
        try:
            reader = self.reader
            lanes = self.lanes
            while (
                not self.closed
                and self.pending is None
                and self.streaming is None
                and not self._write_paused
                and not self._held
            ):
                try:
                    payload = reader.next_frame()
                except (FrameTooLarge, InvalidFrameSize) as exc:
                    self.close(f"{exc} (socket.request.max.bytes)")
                    return
                if payload is None:
                    break
                if len(payload) > 1 and payload[0] == 0 and payload[1] in lanes:
                    started = _now_ns()
                    if self._try_fast_lane(lanes[payload[1]], payload):
                        self._observe(payload[1], _now_ns() - started)
                    else:
                        self._handle_frame(payload)
                else:
                    self._handle_frame(payload)
                if self._reserved:  # that was the frame the reservation was for
                    self.server.queued.release(self._reserved)
                    self._reserved = 0
        finally:
            self._in_pump = False
        self._update_reading()

    def _update_reading(self):
        if self.closed or self.transport is None:
            return
        hold = (
            self.pending is not None
            or self.streaming is not None
            or self._write_paused
            or self._held
            or not self._may_grow()
        )
        if hold and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not hold and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def _may_grow(self) -> bool:
        """Whether the frame being received may grow past the small buffer: always, unless
        queued.max.request.bytes is set and reached (the pool then calls back)."""
        queued = self.server.queued
        if queued is None or self._reserved:
            return True
        size = self.reader.outgrowing_frame()
        if not size:
            return True
        if queued.reserve(self, size):
            self._reserved = size
            return True
        return False

    def _mute(self, throttle_ms: int) -> None:
        """A quota was exceeded: read nothing more from this connection for the throttle
        time (KIP-219; the response, already sent, carries it)."""
        if throttle_ms <= 0 or self.closed:
            return
        if self._hold_timer is not None:
            self._hold_timer.cancel()
        self._held = True
        self._hold_timer = asyncio.get_running_loop().call_later(throttle_ms / 1000, self._end_hold)
        self._update_reading()

    def _end_hold(self) -> None:
        self._held = False
        self._hold_timer = None
        self._update_reading()
        self._pump()

    def memory_available(self) -> None:
        """Called by the pool when bytes were released while this connection waited."""
        self._update_reading()

    # -- authentication ----------------------------------------------------------------

    def _take_certificate_principal(self, ssl_object) -> bool:
        """SSL listeners: the principal is the client certificate's subject, mapped by
        ssl.principal.mapping.rules (ANONYMOUS without a certificate). SASL_SSL
        connections take theirs from SASL instead."""
        der = ssl_object.getpeercert(binary_form=True)
        if der is None or self.auth is not None:
            return True
        dn = certificate_dn(der)
        name = self.security.principal_mapper.name(dn)
        if name is None:
            self.close(f"no ssl.principal.mapping.rules rule matches the client certificate {dn!r}")
            return False
        self.principal = "User:" + name
        return True

    def _authenticate(self, header, payload, pos) -> bool:
        """Run a frame through the SASL exchange; False lets the request through."""
        outcome = self.auth.receive(header, payload, pos)
        if outcome is PASS:
            return False
        self._take_outcome(outcome)
        return True

    def _take_outcome(self, outcome) -> None:
        """Send the exchange's answer; close after it, or take the principal once complete."""
        if outcome.frame is not None:
            self._write(outcome.frame)
        if type(outcome) is Close:
            self.close(outcome.reason, flush=True, delay_s=outcome.delay_s)
        elif self.auth.complete:
            self.principal = self.auth.principal
            self._writable.clear()
            self.lanes = self.server.fast_lanes

    # -- request handling --------------------------------------------------------------

    def _may_write(self, topic: str) -> bool:
        authorizer = self.server.gates.authorizer
        if authorizer.generation != self._acl_generation:
            self._writable.clear()
            self._acl_generation = authorizer.generation
        allowed = self._writable.get(topic)
        if allowed is None:
            allowed = self._writable[topic] = authorizer.authorize(self, "Write", "Topic", topic)
        return allowed

    def _try_fast_lane(self, lane, payload) -> bool:
        check = self.write_check
        try:
            response = lane(self.broker, payload) if check is None else lane(self.broker, payload, check)
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
        if self.auth is not None and self.auth.state == "raw":  # tokens after SaslHandshake v0
            self._take_outcome(self.auth.receive_raw(payload))
            return
        try:
            header, pos = messages.parse_request_header(payload)
        except messages.MalformedRequest as exc:
            self.close(f"malformed request header: {exc}")
            return
        if self.auth is not None and self.auth.intercepts(header.api_key):
            if self._authenticate(header, payload, pos):
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
            self._write(fallback)
            return
        decode = _decode_big if len(payload) >= BIG_REQUEST_BYTES else messages.decode_request_body
        try:
            body = decode(header, payload, pos)
        except messages.MalformedRequest as exc:
            self.close(str(exc))
            return
        self._handle_request(spec, self._request(header, body, started))

    def _handle_request(self, spec, request: Request):
        gates = self.server.gates
        if gates is not None:
            verdict = gates.check(request)
            if verdict is not None:
                if isinstance(verdict, str):
                    self.close(verdict)
                else:
                    self._write(self._encode(request, verdict))
                return
        try:
            result = spec.handler(self.broker, request)
        except KafkaError as exc:
            self.close(f"{spec.name} v{request.api_version} rejected: {exc}")
            return
        except Exception:
            log.exception(
                "%s v%d from %s failed; closing the connection", spec.name, request.api_version, self.peer
            )
            self.close("internal error")
            return
        timed = self.broker.client_quotas.request_time and not request_time_quota.exempt(request)
        if result is None:
            if timed:
                self._charge_handling(request, None, _now_ns() - request.received_ns)
            self._observe(request.api_key, _now_ns() - request.received_ns)
            if request.extra:
                self._mute(request.extra.get("throttle_ms", 0))
            return
        # RawResponse (Produce, Fetch) first: asyncio.iscoroutine is an ABC check.
        if type(result) is not RawResponse and asyncio.iscoroutine(result):
            busy_ns = _now_ns() - request.received_ns if timed else None
            self._answer_later(self._encode_when_done(request, result, busy_ns), spec.name)
        else:
            if timed:
                result = self._charge_handling(request, result, _now_ns() - request.received_ns)
            encoding = _now_ns()
            self._write(self._encode(request, result))
            done = _now_ns()
            if timed:
                self._charge_encoding(request, done - encoding)
            self._observe(request.api_key, done - request.received_ns)
        if request.extra:
            self._mute(request.extra.get("throttle_ms", 0))

    def _charge_handling(self, request: Request, result, busy_ns: int):
        """request_percentage: charge the loop time spent parsing and handling the request; a
        response over the quota carries the throttle time (the larger one when a byte-rate
        quota throttles too), and the connection is muted that long."""
        throttle_ms = self.broker.client_quotas.record_request_time(request.principal, request.client_id, busy_ns)
        if throttle_ms > request.extra.get("throttle_ms", 0):
            request.extra["throttle_ms"] = throttle_ms
            if result is not None:
                result = request_time_quota.with_throttle(result, throttle_ms)
        return result

    def _charge_encoding(self, request: Request, busy_ns: int) -> None:
        """The time spent encoding the response counts, without throttling (Kafka's network
        thread time)."""
        self.broker.client_quotas.record_request_time(request.principal, request.client_id, busy_ns)

    def _request(self, header, body, received_ns: int) -> Request:
        return Request(
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            body,
            peer=self.peer,
            listener=self.listener,
            principal=self.principal,
            received_ns=received_ns,
        )

    async def _encode_when_done(self, request: Request, result, busy_ns: int | None = None):
        result = await result
        if busy_ns is not None:  # charged: the handler's time before it waited
            result = self._charge_handling(request, result, busy_ns)
        encoding = _now_ns()
        data = None if result is None else self._encode(request, result)
        if busy_ns is not None:
            self._charge_encoding(request, _now_ns() - encoding)
        self._observe(request.api_key, _now_ns() - request.received_ns)
        if request.extra:
            self._mute(request.extra.get("throttle_ms", 0))
        return data

    def _answer_later(self, coro, api: str):
        task = asyncio.get_running_loop().create_task(coro)
        self.pending = task
        task.add_done_callback(functools.partial(self._on_done, api=api))

    def _on_done(self, task: asyncio.Task, api: str):
        if self.pending is task:
            self.pending = None
        if task.cancelled():
            return
        exc = task.exception()
        if self.closed:
            return
        if exc is not None:
            if isinstance(exc, KafkaError):
                self.close(f"{api} rejected: {exc}")
            else:
                log.error("%s from %s failed; closing the connection", api, self.peer, exc_info=exc)
                self.close("internal error")
            return
        data = task.result()
        if data is not None:
            self._write(data)
        self._pump()

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
            if result.has_files:
                return ResponseStream(coalesce([head, *parts]), result.sendfile)
            if size < JOIN_BELOW:
                return b"".join([head, *parts])
            return coalesce([head, *parts])
        if isinstance(result, bytes):
            return result
        return messages.encode_response(request.api_key, request.api_version, request.correlation_id, result)

    def _write(self, data):
        if self.closed:
            return
        if isinstance(data, bytes):
            self.transport.write(data)
        elif type(data) is ResponseStream:
            self.streaming = data
            self._stream()
        else:
            self.transport.writelines(data)

    def _stream(self) -> None:
        """Write more of the answer being streamed (see broker/response_writes.py); the
        connection takes its next request once it is all out."""
        try:
            done = self.streaming.write(self.transport, self._socket_fd, self._is_write_paused)
        except ConnectionError as exc:  # the peer went away mid-answer: an ordinary disconnect
            log.debug("connection from %s closed by the peer during an answer: %s", self.peer, exc)
            self._abort()
            return
        except (OSError, KafkaError) as exc:
            log.warning("closing connection from %s: cannot read the log for its answer: %s", self.peer, exc)
            self._abort()
            return
        self.last_active = time.monotonic()
        if done:
            self.streaming = None

    # -- closing -----------------------------------------------------------------------

    def close(self, reason: str, flush: bool = False, delay_s: float = 0.0):
        """Close this connection, logging why; ``flush`` sends what is buffered first (a last
        error response), else unsent responses are dropped; ``delay_s``: reading stops now."""
        if self.closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self._drop_work()
        transport = self.transport
        if transport is not None:
            # Unsent responses would keep the connection, and their memory, for as long as
            # the peer does not read them; drop them, as Kafka does when it closes a channel.
            if transport.get_write_buffer_size() and not flush:
                transport.abort()
            elif delay_s > 0:
                transport.pause_reading()
                asyncio.get_running_loop().call_later(delay_s, transport.close)
            else:
                transport.close()

    def _abort(self) -> None:
        """Close at once, dropping whatever is unsent."""
        self.closed = True
        self._drop_work()
        if self.transport is not None:
            self.transport.abort()

    def _close_throttled(self, why: str) -> None:
        """Close a connection refused by a quota; logged like refused connections (one line
        per interval under a flood)."""
        if self.closed:
            return
        self.server.note_refusal(self, why)
        self.closed = True
        self._drop_work()
        if self.transport is not None:
            self.transport.close()

    def _drop_work(self):
        """Forget what this connection was doing: its pending answer (a delayed fetch
        leaves the purgatory), its receive buffers and its share of the request pool."""
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None
        self.streaming = None
        if self._reserved:
            self.server.queued.release(self._reserved)
            self._reserved = 0
        self.reader = _CLOSED_READER


def _decode_big(header, payload, pos):
    """Decode a big request out of the cyclic garbage collector's way. A request of a
    million items makes a million objects; the collector would walk them over and over
    while they are made (four fifths of the decode time, all of it holding up the loop),
    and each young collection after that would walk them again. So the collector is paused
    for the decode, and the new objects then go straight to the oldest generation
    (``gc.freeze`` then ``gc.unfreeze``, both O(1)), where only the rare full collection
    looks. They hold no reference cycles; reference counting frees them as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return messages.decode_request_body(header, payload, pos)
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


class _ClosedReader(FrameReader):
    """What a closed connection reads into: nothing is kept."""

    def __init__(self):
        super().__init__(0, min_buffer=4096, busy_buffer=4096)

    def received(self, nbytes: int) -> None:
        pass

    def next_frame(self):
        return None


_CLOSED_READER = _ClosedReader()


def _plain_ip(host: str) -> str:
    """The address without an IPv4-mapped IPv6 prefix or a scope id."""
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    return host.split("%", 1)[0]


class NetworkServer:
    """Listeners, the set of live connections and their limits, and the sweeper that
    closes idle connections and gives back the buffers of quiet ones."""

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
        max_connections_per_ip: int = (1 << 31) - 1,
        max_connections_per_ip_overrides: dict[str, int] | None = None,
        queued_max_request_bytes: int = -1,
        max_connection_creation_rate: int = (1 << 31) - 1,
        security=None,
        scram_lookup=None,
        send_buffer_bytes: int = OS_DEFAULT,
        receive_buffer_bytes: int = OS_DEFAULT,
    ):
        self.broker = broker
        self.send_buffer_bytes = send_buffer_bytes  # socket.send.buffer.bytes, on accepted sockets
        self.receive_buffer_bytes = receive_buffer_bytes  # socket.receive.buffer.bytes, on the listening ones
        self.security = security or {}  # listener name -> ListenerSecurity
        self.gates = None  # RequestGates when an authorizer is configured
        self.creation_rate = max_connection_creation_rate
        self._creation_tokens = float(max_connection_creation_rate)
        self._creation_refilled = time.monotonic()
        self._scram_lookup = scram_lookup
        self.zero_copy = zero_copy
        self.max_request_size = max_request_size
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.ip_limits = _resolve_overrides(max_connections_per_ip_overrides or {})
        self.queued = QueuedRequestBytes(queued_max_request_bytes) if queued_max_request_bytes > 0 else None
        self.idle_timeout_s = idle_timeout_s
        self.registry = registry
        self.fast_lanes = dict(fast_lanes or {})  # emptied while quotas need every request
        self.request_metrics = RequestMetrics()
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.bound: dict[str, tuple[str, int]] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._sweeper: asyncio.Task | None = None
        self._refused = 0
        self._last_refusal_log = -_LOG_EVERY_S

    def creation_delay(self) -> float:
        """``max.connection.creation.rate``: a token bucket of that many connections a second
        (bursts up to one second's worth); seconds the new connection must wait before it
        is read (Kafka holds its acceptor back instead)."""
        rate = self.creation_rate
        if rate >= (1 << 31) - 1:
            return 0.0
        now = time.monotonic()
        self._creation_tokens = min(float(rate), self._creation_tokens + (now - self._creation_refilled) * rate)
        self._creation_refilled = now
        self._creation_tokens -= 1
        return 0.0 if self._creation_tokens >= 0 else -self._creation_tokens / max(rate, 1e-9)

    def new_authenticator(self, security) -> SaslAuthenticator | None:
        if security is None or not security.sasl:
            return None
        return SaslAuthenticator(security, self._scram_lookup)

    def register(self, conn: Connection) -> bool:
        if len(self.connections) >= self.max_connections:
            self.note_refusal(conn, f"max.connections ({self.max_connections}) reached")
            return False
        count = self.per_ip.get(conn.ip, 0)
        limit = self.ip_limits.get(conn.ip, self.max_connections_per_ip)
        if count >= limit:
            key = (
                "max.connections.per.ip.overrides" if conn.ip in self.ip_limits else "max.connections.per.ip"
            )
            self.note_refusal(conn, f"{conn.ip} already has {count} connections ({key}: {limit})")
            return False
        self.per_ip[conn.ip] = count + 1
        self.connections.add(conn)
        return True

    def note_refusal(self, conn: Connection, why: str) -> None:
        """Log a refused connection; under a flood, one line per interval with a count."""
        self._refused += 1
        now = time.monotonic()
        if now - self._last_refusal_log >= _LOG_EVERY_S:
            more = f" ({self._refused - 1} more refused since the last report)" if self._refused > 1 else ""
            log.warning("closing connection from %s: %s%s", conn.peer, why, more)
            self._last_refusal_log = now
            self._refused = 0

    def unregister(self, conn: Connection) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        left = self.per_ip[conn.ip] - 1
        if left:
            self.per_ip[conn.ip] = left
        else:
            del self.per_ip[conn.ip]
        if self.queued is not None:
            self.queued.forget(conn)

    async def bind(self, listeners, backlog: int) -> None:
        """Bind every listener (so ephemeral ports are known) without accepting yet."""
        loop = asyncio.get_running_loop()
        for listener in listeners:
            security = self.security.get(listener.name)
            server = await loop.create_server(
                lambda name=listener.name: Connection(self, name),
                listener.host or None,
                listener.port,
                ssl=security.ssl_context if security is not None else None,
                reuse_address=True,
                backlog=backlog,  # socket.listen.backlog.size
                start_serving=False,
            )
            for sock in server.sockets:  # not listening yet: accepted sockets inherit it
                set_buffer_sizes(sock, receive_bytes=self.receive_buffer_bytes)
            self._servers.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            self.bound[listener.name] = (host, port)

    async def start_serving(self) -> None:
        for server in self._servers:
            await server.start_serving()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        interval = min(max(self.idle_timeout_s / 10, 0.05), RELEASE_BUFFERS_AFTER_IDLE_S)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            idle_since = now - self.idle_timeout_s
            quiet_since = now - RELEASE_BUFFERS_AFTER_IDLE_S
            for conn in list(self.connections):
                if conn.pending is not None or conn.last_active >= quiet_since:
                    continue
                if conn.last_active < idle_since:
                    conn.close(f"idle for more than {self.idle_timeout_s:.0f}s (connections.max.idle.ms)")
                else:
                    conn.reader.release()

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        await cancel_and_wait(self._sweeper)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()


def _resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: host names are resolved once, at start."""
    out: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            addresses = {_plain_ip(info[4][0]) for info in socket.getaddrinfo(host, None)}
        except OSError as exc:
            log.warning(
                "max.connections.per.ip.overrides: cannot resolve %s (%s); its limit is ignored", host, exc
            )
            continue
        for address in addresses:
            out[address] = limit
    return out
