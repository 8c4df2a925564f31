"""One TCP connection to one broker over asyncio: pipelined requests matched by correlation id.

``Connection`` is an asyncio ``BufferedProtocol`` around the sans-IO
``ClientConnection`` (``odradek.protocol.client_connection``), which frames requests,
numbers them, tracks what is in flight, decodes answers and negotiates versions. This
module adds what needs the event loop: the socket, one future per request, timers, and
flow control. Requests are written as soon as they are sent; any number may be in flight
(callers such as the client's sender enforce their own limit with ``in_flight``).
Responses are decoded in ``buffer_updated`` (frames are only valid until the next
receive) and resolve the future of their request. After connecting, ``ApiVersions``
picks per API the highest version both sides support.

A request that gets no answer within its timeout closes the connection: every request
in flight fails with ``KafkaConnectionError`` (retriable), as Kafka's clients do.

A security mismatch is told at once, not retried (``SecurityMismatchError``): when the broker
closes a connection before answering ApiVersions and its listener completes a TLS handshake
(the client does not use TLS), or closes it at the first request after ApiVersions and its
listener answers a SaslHandshake (the client does not use SASL) — ``listener_probe``.

Re-authentication (KIP-368). When SaslAuthenticate gives a session lifetime, the connection
authenticates again on the same socket before the session ends, between requests as Kafka's
Java client does: the first request sent after 85-95 % of the lifetime (a random point, so
that connections do not all renew at once) waits, with every later one, while the requests
in flight are answered and a new SaslHandshake/SaslAuthenticate exchange runs; then they go
out in order. A failed re-authentication closes the connection, failing them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
from collections.abc import Mapping

from odradek.protocol import messages
from odradek.protocol.api_keys import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from odradek.protocol.client_connection import ClientConnection, FrameError
from odradek.protocol.errors import ErrorCode, error_for
from odradek.protocol.sasl_mechanisms import SaslFailure

from . import listener_probe
from .connection_errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    SecurityMismatchError,
    UnsupportedVersionError,
)
from .connection_security import ConnectionSecurity
from .socket_buffers import OS_DEFAULT, set_buffer_sizes

log = logging.getLogger("odradek.net")



class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        host: str,
        port: int,
        node_id: int,
        client_id: str,
        request_timeout_ms: int,
        *,
        version_caps: Mapping[int, int] | None = None,
        security: ConnectionSecurity | None = None,
        receive_buffer_bytes: int = OS_DEFAULT,
    ):
        self.security = security
        self.receive_buffer_bytes = receive_buffer_bytes  # SO_RCVBUF, set before connecting
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self._core = ClientConnection(client_id, version_caps=version_caps)
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._closed: BaseException | None = None
        self._write_ready: asyncio.Future | None = None
        self.on_close = None  # callable(conn, exc) set by the owner
        self.last_used = self._loop.time()
        self._reauth_at: float | None = None  # loop time after which to re-authenticate
        self._held: list | None = None  # sends waiting for a re-authentication, in order
        self._reauth_task: asyncio.Task | None = None
        self._idle: asyncio.Event | None = None  # set when nothing is in flight (re-auth waits)
        self.reauthentications = 0
        self._negotiated = False  # ApiVersions answered
        self._answered_since = False  # some answer came after ApiVersions
        self._closed_by_peer = False
        self._lost = False  # the broker closed it; in-flight requests wait for the diagnosis
        self._diagnosis: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"<Connection node={self.node_id} {self.host}:{self.port}>"

    @property
    def versions(self) -> dict[int, int]:
        """The version to use per API key, negotiated on connecting."""
        return self._core.versions

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        return self._core.broker_versions

    # -- lifecycle -----------------------------------------------------------------------

    async def connect(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                ctx = self.security.ssl_context if self.security is not None else None
                hostname = self.host if ctx else None
                if self.receive_buffer_bytes == OS_DEFAULT:
                    await self._loop.create_connection(lambda: self, self.host, self.port, ssl=ctx, server_hostname=hostname)
                else:
                    sock = await self._connected_socket()
                    await self._loop.create_connection(lambda: self, sock=sock, ssl=ctx, server_hostname=hostname)
                await self._negotiate_or_explain(ctx)
                if self.security is not None and self.security.sasl:
                    await self._authenticate()
        except TimeoutError:
            self.close(KafkaConnectionError(f"connecting to {self.host}:{self.port} timed out"))
            raise KafkaConnectionError(
                f"connecting to broker {self.node_id} at {self.host}:{self.port} timed out after {timeout:.1f}s"
            ) from None
        except ssl.SSLError as exc:
            self.close(exc)
            raise KafkaConnectionError(
                f"TLS with broker {self.node_id} at {self.host}:{self.port} failed: {exc.reason or exc} "
                "(check ssl.ca.location and the broker's certificate)"
            ) from exc
        except OSError as exc:
            self.close(exc)
            raise KafkaConnectionError(
                f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        except BaseException as exc:
            self.close(exc)
            raise

    async def _connected_socket(self) -> socket.socket:
        """A socket connected to the broker, its receive buffer set before the handshake (so
        that the TCP window scale allows for it); each address of the host in turn."""
        failure: OSError | None = None
        for family, kind, proto, _, address in await self._loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                set_buffer_sizes(sock, receive_bytes=self.receive_buffer_bytes)
                await self._loop.sock_connect(sock, address)
                return sock
            except OSError as exc:
                sock.close()
                failure = exc
            except BaseException:
                sock.close()
                raise
        raise failure or OSError(f"no address for {self.host}")

    async def _negotiate(self) -> None:
        while True:
            version, values = self._core.api_versions_request()
            response = await self.send(API_VERSIONS, values, version=version)
            if self._core.api_versions_answered(response):
                self._negotiated = True
                return

    async def _negotiate_or_explain(self, ctx) -> None:
        """ApiVersions; a close before its answer, on a connection without TLS to a listener
        that speaks TLS, is a SecurityMismatchError."""
        try:
            await self._negotiate()
        except KafkaConnectionError:
            if self._closed_by_peer and ctx is None and await listener_probe.speaks_tls(self.host, self.port):
                protocol = self.security.protocol if self.security is not None else "PLAINTEXT"
                raise SecurityMismatchError(
                    f"broker {self.node_id} at {self.host}:{self.port} closed the connection before answering "
                    f"ApiVersions, and its listener speaks TLS: this client's security.protocol is {protocol}. "
                    "Set security.protocol=SSL (or SASL_SSL) and ssl.ca.location to the CA that signed "
                    "the broker's certificate"
                ) from None
            raise

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate (KIP-152); a
        session lifetime in the answer (v1+) schedules the re-authentication."""
        sec = self.security
        if not self.supports(SASL_HANDSHAKE) or not self.supports(SASL_AUTHENTICATE):
            raise KafkaConnectionError(f"broker {self.node_id} at {self.host}:{self.port} does not speak SASL")
        shake = await self._send_now(SASL_HANDSHAKE, {"mechanism": sec.mechanism}, 1)
        if shake.error_code == ErrorCode.illegal_sasl_state and not shake.mechanisms:
            raise error_for(shake.error_code)(
                f"broker {self.node_id} at {self.host}:{self.port} does not use SASL on this listener, "
                f"but this client's security.protocol is {sec.protocol}: set security.protocol="
                f"{'SSL' if sec.protocol == 'SASL_SSL' else 'PLAINTEXT'} and drop the sasl.* settings"
            )
        if shake.error_code:
            raise error_for(shake.error_code)(
                f"broker {self.node_id} does not enable SASL mechanism {sec.mechanism} "
                f"(it enables {', '.join(shake.mechanisms) or 'none'})"
            )
        client = sec.sasl_client()
        token = client.first()
        lifetime_ms = 0
        while token is not None:
            resp = await self._send_now(SASL_AUTHENTICATE, {"auth_bytes": token}, self.version(SASL_AUTHENTICATE))
            if resp.error_code:
                raise error_for(resp.error_code)(resp.error_message or "SASL authentication failed")
            lifetime = getattr(resp, "session_lifetime", None)  # v1+
            lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime is not None else 0
            try:
                token = client.step(resp.auth_bytes)
            except SaslFailure as exc:
                raise error_for(ErrorCode.sasl_authentication_failed)(str(exc)) from None
        self._reauth_at = None
        if lifetime_ms > 0:
            self._reauth_at = self._loop.time() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)

    def _reauth_due(self) -> bool:
        return self._reauth_at is not None and self._loop.time() >= self._reauth_at

    async def _reauthenticate(self) -> None:
        """Wait for the requests in flight, authenticate again, then send the held ones."""
        try:
            while self._core.in_flight:
                self._idle = asyncio.Event()
                await self._idle.wait()
            await self._authenticate()
        except Exception as exc:
            self._reauth_task = None
            log.warning("re-authenticating with broker %s failed: %s", self.node_id, exc)
            if not isinstance(exc, KafkaConnectionError):
                exc = KafkaConnectionError(f"re-authentication with broker {self.node_id} failed: {exc}")
            self.close(exc)
            return
        finally:
            self._idle = None
        self._reauth_task = None
        self.reauthentications += 1
        log.debug("re-authenticated with broker %s", self.node_id)
        held, self._held = self._held or [], None
        for write in held:
            write()

    def _hold(self, write) -> bool:
        """Whether ``write`` must wait for a re-authentication (started here when due)."""
        if self._held is None:
            if not self._reauth_due():
                return False
            self._held = []
            self._reauth_task = self._loop.create_task(self._reauthenticate())
        self._held.append(write)
        return True

    def connection_made(self, transport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc) -> None:
        if self._closed is None:
            self._closed_by_peer = True
        lost = exc or KafkaConnectionError(f"connection to broker {self.node_id} closed")
        if self._closed is None and self._sasl_suspected():
            # Closed at the first request after ApiVersions, without SASL on our side: ask the
            # listener whether it wants SASL before failing the requests.
            self._lost = True
            self._diagnosis = self._loop.create_task(self._explain_close(lost))
            return
        self._fail_all(lost)

    def _sasl_suspected(self) -> bool:
        return (
            self._negotiated
            and not self._answered_since
            and self._core.in_flight > 0
            and not (self.security is not None and self.security.sasl)
        )

    async def _explain_close(self, lost: BaseException) -> None:
        ctx = self.security.ssl_context if self.security is not None else None
        try:
            mechanisms = await listener_probe.sasl_mechanisms(self.host, self.port, ctx)
        except Exception as exc:  # a probe that fails tells nothing; the requests fail as they were
            log.debug("probing %s:%s for SASL failed: %s", self.host, self.port, exc)
            mechanisms = None
        if mechanisms:
            protocol = self.security.protocol if self.security is not None else "PLAINTEXT"
            lost = SecurityMismatchError(
                f"broker {self.node_id} at {self.host}:{self.port} closed the connection at the first "
                f"request after ApiVersions: its listener requires SASL authentication (it enables "
                f"{', '.join(mechanisms)}), and this client's security.protocol is {protocol}. Set "
                f"security.protocol={'SASL_SSL' if ctx is not None else 'SASL_PLAINTEXT'}, sasl.mechanism, "
                "sasl.username and sasl.password"
            )
        self._diagnosis = None
        self._fail_all(lost)

    def close(self, exc: BaseException | None = None) -> None:
        if self._transport is not None:
            self._transport.close()
        if self._diagnosis is not None:
            self._diagnosis.cancel()
            self._diagnosis = None
        self._fail_all(exc or KafkaConnectionError(f"connection to broker {self.node_id} closed"))

    def _fail_all(self, exc: BaseException) -> None:
        if self._closed is not None:
            return
        if not isinstance(exc, KafkaConnectionError | KafkaTimeoutError | SecurityMismatchError):
            err = KafkaConnectionError(
                f"connection to broker {self.node_id} ({self.host}:{self.port}) lost: {exc}"
            )
            err.__cause__ = exc
            exc = err
        self._closed = exc
        for fut, timer in self._core.fail_all():
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(exc)
        held, self._held = self._held or [], None
        for write in held:
            write()  # fails its future: the connection is closed
        if self._reauth_task is not None:
            self._reauth_task.cancel()
        if self._write_ready is not None and not self._write_ready.done():
            self._write_ready.set_result(None)
        if self.on_close is not None:
            self.on_close(self, exc)

    @property
    def closed(self) -> bool:
        return self._closed is not None or self._lost

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered, and those held for a re-authentication."""
        return self._core.in_flight + len(self._held or ())

    # -- writing -------------------------------------------------------------------------

    def pause_writing(self) -> None:
        if self._write_ready is None or self._write_ready.done():
            self._write_ready = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._write_ready is not None and not self._write_ready.done():
            self._write_ready.set_result(None)

    @property
    def writable(self) -> bool:
        return self._closed is None and (self._write_ready is None or self._write_ready.done())

    async def drain(self) -> None:
        if self._write_ready is not None and not self._write_ready.done():
            await self._write_ready

    def supports(self, api_key: int) -> bool:
        return self._core.supports(api_key)

    def version(self, api_key: int) -> int:
        try:
            return self._core.versions[api_key]
        except KeyError:
            name = messages.api_name(api_key)
            raise UnsupportedVersionError(
                f"broker {self.node_id} at {self.host}:{self.port} does not support {name} "
                f"in a version this client speaks (broker: {self.broker_versions.get(api_key)})"
            ) from None

    def send(
        self, api_key: int, values, version: int | None = None, expect_response: bool = True, timeout=None
    ):
        """Write one request; return a future of the decoded response entity.

        ``values`` is a dict for ``request_builder.build``, a callable ``f(version) -> dict``,
        or a ready kio entity. With ``expect_response=False`` (acks=0 produce) the future is
        resolved with None once written (or held until a re-authentication is over).
        """
        fut = self._loop.create_future()
        write = lambda: self._write_request(fut, api_key, values, version, expect_response, timeout)  # noqa: E731
        if self._closed is None and self._hold(write):
            return fut
        write()
        return fut

    def _send_now(self, api_key: int, values, version: int):
        """A request of the SASL exchange itself: never held."""
        fut = self._loop.create_future()
        self._write_request(fut, api_key, values, version, True, None)
        return fut

    def _write_request(self, fut, api_key: int, values, version, expect_response: bool, timeout) -> None:
        if fut.done():
            return
        if self._closed is not None or self._lost:
            fut.set_exception(self._closed or KafkaConnectionError(f"connection to broker {self.node_id} closed"))
            return
        if version is None:
            try:
                version = self.version(api_key)
            except UnsupportedVersionError as exc:
                fut.set_exception(exc)
                return
        token = [fut, None] if expect_response else None  # the timer is set once sent
        try:
            correlation_id, frame = self._core.request(
                api_key, version, values, token=token, expect_response=expect_response
            )
        except Exception as exc:
            fut.set_exception(exc)
            return
        self._sent(correlation_id, fut, token, timeout)
        self._transport.write(frame)

    def send_parts(self, api_key: int, version: int, build, expect_response: bool = True, timeout=None):
        """Like ``send``, for a request packed by hand: ``build(correlation_id) -> [buffers]``.

        The buffers go to the transport with ``writelines`` (no join, no copy here).
        """
        fut = self._loop.create_future()
        write = lambda: self._write_parts(fut, api_key, version, build, expect_response, timeout)  # noqa: E731
        if self._closed is None and self._hold(write):
            return fut
        write()
        return fut

    def _write_parts(self, fut, api_key: int, version: int, build, expect_response: bool, timeout) -> None:
        if fut.done():
            return
        if self._closed is not None or self._lost:
            fut.set_exception(self._closed or KafkaConnectionError(f"connection to broker {self.node_id} closed"))
            return
        token = [fut, None] if expect_response else None
        try:
            correlation_id, parts = self._core.request_parts(
                api_key, version, build, token=token, expect_response=expect_response
            )
        except Exception as exc:
            fut.set_exception(exc)
            return
        self._sent(correlation_id, fut, token, timeout)
        self._transport.writelines(parts)

    def _sent(self, correlation_id: int, fut, token: list | None, timeout) -> None:
        """A request went out now: its answer is awaited up to ``timeout`` (else the request
        timeout) and the token, ``[future, timer]``, gets its timer; with no answer expected
        (no token), ``fut`` is done."""
        self.last_used = self._loop.time()
        if token is None:
            fut.set_result(None)
            return
        t = self.request_timeout if timeout is None else timeout
        token[1] = self._loop.call_later(t, self._on_timeout, correlation_id, t)

    def _on_timeout(self, correlation_id: int, timeout: float) -> None:
        item = self._core.in_flight_request(correlation_id)
        if item is None:
            return
        name = messages.api_name(item[0])
        log.warning(
            "%s request to broker %s timed out after %.1fs; closing the connection",
            name,
            self.node_id,
            timeout,
        )
        self.close(
            KafkaConnectionError(f"{name} request to broker {self.node_id} timed out after {timeout:.1f}s")
        )

    # -- reading -------------------------------------------------------------------------

    def get_buffer(self, sizehint: int):
        return self._core.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            responses = self._core.received(nbytes)
        except FrameError as exc:
            self.close(KafkaConnectionError(f"bad frame from broker {self.node_id}: {exc}"))
            return
        for correlation_id, api_key, version, token, entity, error in responses:
            if token is None:
                log.warning(
                    "response with unknown correlation id %d from broker %s", correlation_id, self.node_id
                )
                continue
            fut, timer = token
            timer.cancel()
            if self._negotiated:
                self._answered_since = True
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(
                    KafkaConnectionError(
                        f"cannot decode {messages.api_name(api_key)} v{version} response: {error}"
                    )
                )
                continue
            fut.set_result(entity)
        self.last_used = self._loop.time()
        if self._idle is not None and not self._core.in_flight:
            self._idle.set()

    def eof_received(self):
        return False
