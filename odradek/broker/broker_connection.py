"""One connection from this broker to another, for replica fetchers (Kafka's BlockingSend).

A stand-in with the shape of the shared wire connection (``odradek.net.connection``, from
the client split): ``connect(timeout)``, ``send(api_key, entity, version=...)`` returning
the decoded response, ``close()``. It speaks the protocol through ``protocol.messages``
(sans-IO) and keeps one request in flight, which is all a fetcher needs. When the shared
connection lands on main, the fetcher switches to it and this module goes.
"""

from __future__ import annotations

import asyncio
import itertools
import struct

from odradek.protocol import messages

_SIZE = struct.Struct(">i")


class BrokerConnectionError(Exception):
    """The connection failed or timed out; the fetcher backs off and reconnects."""


class BrokerConnection:
    def __init__(self, host: str, port: int, node_id: int, client_id: str, request_timeout_ms: int):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def closed(self) -> bool:
        return self._writer is None

    async def connect(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        except (OSError, TimeoutError) as exc:
            raise BrokerConnectionError(
                f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: {exc or 'timed out'}"
            ) from None

    async def send(self, api_key: int, entity, *, version: int, timeout: float | None = None):
        """Send one request and return the decoded response entity."""
        if self._writer is None:
            raise BrokerConnectionError(f"{self!r} is closed")
        async with self._lock:
            correlation_id = next(self._correlation)
            frame = messages.encode_request(api_key, version, correlation_id, self.client_id, entity)
            try:
                async with asyncio.timeout(timeout if timeout is not None else self.request_timeout):
                    self._writer.write(frame)
                    (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                    payload = await self._reader.readexactly(size)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                self.close()
                raise BrokerConnectionError(
                    f"request to broker {self.node_id} at {self.host}:{self.port} failed: "
                    f"{type(exc).__name__} {exc}"
                ) from None
            try:
                got, response = messages.decode_response(api_key, version, payload)
            except messages.MalformedResponse as exc:
                self.close()
                raise BrokerConnectionError(str(exc)) from None
            if got != correlation_id:
                self.close()
                raise BrokerConnectionError(f"broker {self.node_id} answered {got}, expected {correlation_id}")
            return response

    def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
