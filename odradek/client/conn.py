"""One TCP connection to one broker: pipelined requests matched by correlation id.

``Connection`` is an asyncio ``BufferedProtocol``. Requests are written as soon as they
are sent; any number may be in flight (callers such as the sender enforce their own
limit with ``in_flight``). Responses are decoded in ``buffer_updated`` (frames are only
valid until the next receive) and resolve the future of the request with the same
correlation id. After connecting, ``ApiVersions`` picks per API the highest version both
sides support (see ``client_versions.negotiate``).

A request that gets no answer within its timeout closes the connection: every request
in flight fails with ``KafkaConnectionError`` (retriable), as Kafka's clients do.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

from odradek.protocol import api_keys, messages
from odradek.protocol.client_versions import client_versions, negotiate
from odradek.protocol.errors import error_for
from odradek.protocol.frames import FrameReader
from odradek.protocol.request_builder import build_request

from .errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError

log = logging.getLogger("odradek.client.conn")

CLIENT_SOFTWARE_NAME = "odradek-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_UNSUPPORTED_VERSION = 35
_MAX_FRAME = 512 * 1024 * 1024
_CID = struct.Struct(">i")


class Connection(asyncio.BufferedProtocol):
    def __init__(self, host: str, port: int, node_id: int, client_id: str, request_timeout_ms: int):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._reader = FrameReader(_MAX_FRAME)
        self._pending: dict[int, tuple] = {}
        self._next_cid = 1
        self._closed: BaseException | None = None
        self._write_ready: asyncio.Future | None = None
        self.on_close = None  # callable(conn, exc) set by the owner
        self.last_used = self._loop.time()

    def __repr__(self) -> str:
        return f"<Connection node={self.node_id} {self.host}:{self.port}>"

    # -- lifecycle -----------------------------------------------------------------------

    async def connect(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._loop.create_connection(lambda: self, self.host, self.port)
                await self._negotiate()
        except TimeoutError:
            self.close(KafkaConnectionError(f"connecting to {self.host}:{self.port} timed out"))
            raise KafkaConnectionError(
                f"connecting to broker {self.node_id} at {self.host}:{self.port} timed out after {timeout:.1f}s"
            ) from None
        except OSError as exc:
            self.close(exc)
            raise KafkaConnectionError(
                f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        except BaseException as exc:
            self.close(exc)
            raise

    async def _negotiate(self) -> None:
        version = client_versions(api_keys.API_VERSIONS).stop - 1
        values = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
        }
        while True:
            resp = await self.send(api_keys.API_VERSIONS, values, version=version)
            if resp.error_code == _UNSUPPORTED_VERSION and version > 0:
                # The broker answered in v0 with the versions it supports.
                top = next((k.max_version for k in resp.api_keys if k.api_key == api_keys.API_VERSIONS), 0)
                version = min(version - 1, top)
                continue
            if resp.error_code:
                raise error_for(resp.error_code)("ApiVersions failed")
            break
        self.broker_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }
        self.versions = negotiate(self.broker_versions)

    def connection_made(self, transport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc) -> None:
        self._fail_all(exc or KafkaConnectionError(f"connection to broker {self.node_id} closed"))

    def close(self, exc: BaseException | None = None) -> None:
        if self._transport is not None:
            self._transport.close()
        self._fail_all(exc or KafkaConnectionError(f"connection to broker {self.node_id} closed"))

    def _fail_all(self, exc: BaseException) -> None:
        if self._closed is not None:
            return
        if not isinstance(exc, KafkaConnectionError | KafkaTimeoutError):
            err = KafkaConnectionError(
                f"connection to broker {self.node_id} ({self.host}:{self.port}) lost: {exc}"
            )
            err.__cause__ = exc
            exc = err
        self._closed = exc
        pending, self._pending = self._pending, {}
        for _, _, fut, timer in pending.values():
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(exc)
        if self._write_ready is not None and not self._write_ready.done():
            self._write_ready.set_result(None)
        if self.on_close is not None:
            self.on_close(self, exc)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

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
        return api_key in self.versions

    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
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

        ``values`` is a dict for ``request_builder.build``, a callable ``f(version) -> dict``, or a
        ready kio entity. With ``expect_response=False`` (acks=0 produce) the future is
        resolved with None once written.
        """
        fut = self._loop.create_future()
        if self._closed is not None:
            fut.set_exception(self._closed)
            return fut
        if version is None:
            try:
                version = self.version(api_key)
            except UnsupportedVersionError as exc:
                fut.set_exception(exc)
                return fut
        if callable(values):
            values = values(version)
        entity = build_request(api_key, version, values) if isinstance(values, dict) else values
        cid = self._correlation_id()
        try:
            frame = messages.encode_request(api_key, version, cid, self.client_id, entity)
        except Exception as exc:
            fut.set_exception(exc)
            return fut
        self._sent(cid, api_key, version, fut, expect_response, timeout)
        self._transport.write(frame)
        return fut

    def send_parts(self, api_key: int, version: int, build, expect_response: bool = True, timeout=None):
        """Like ``send``, for a request packed by hand: ``build(correlation_id) -> [buffers]``.

        The buffers go to the transport with ``writelines`` (no join, no copy here).
        """
        fut = self._loop.create_future()
        if self._closed is not None:
            fut.set_exception(self._closed)
            return fut
        cid = self._correlation_id()
        try:
            parts = build(cid)
        except Exception as exc:
            fut.set_exception(exc)
            return fut
        self._sent(cid, api_key, version, fut, expect_response, timeout)
        self._transport.writelines(parts)
        return fut

    def _correlation_id(self) -> int:
        cid = self._next_cid
        self._next_cid = cid + 1 if cid < 0x7FFFFFFF else 1
        return cid

    def _sent(self, cid: int, api_key: int, version: int, fut, expect_response: bool, timeout) -> None:
        """Note a request as sent now: its response is awaited (up to ``timeout``, else the
        request timeout) under ``cid``, or, with none expected, ``fut`` is done."""
        self.last_used = self._loop.time()
        if expect_response:
            t = self.request_timeout if timeout is None else timeout
            timer = self._loop.call_later(t, self._on_timeout, cid, t)
            self._pending[cid] = (api_key, version, fut, timer)
        else:
            fut.set_result(None)

    def _on_timeout(self, cid: int, timeout: float) -> None:
        item = self._pending.get(cid)
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
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except ValueError as exc:
            self.close(KafkaConnectionError(f"bad frame from broker {self.node_id}: {exc}"))
            return
        for frame in frames:
            (cid,) = _CID.unpack_from(frame, 0)
            item = self._pending.pop(cid, None)
            if item is None:
                log.warning("response with unknown correlation id %d from broker %s", cid, self.node_id)
                continue
            api_key, version, fut, timer = item
            timer.cancel()
            if fut.done():
                continue
            try:
                try:
                    _, entity = messages.decode_response(api_key, version, frame)
                except Exception:
                    if api_key != api_keys.API_VERSIONS:
                        raise
                    # A broker that does not support our ApiVersions version answers in v0.
                    _, entity = messages.decode_response(api_key, 0, frame)
            except Exception as exc:
                fut.set_exception(
                    KafkaConnectionError(
                        f"cannot decode {messages.api_name(api_key)} v{version} response: {exc}"
                    )
                )
                continue
            fut.set_result(entity)
        self.last_used = self._loop.time()

    def eof_received(self):
        return False
