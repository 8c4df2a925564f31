"""A blocking Kafka-protocol socket for hand-made group requests (no real client sends these)."""

from __future__ import annotations

import socket
import struct

from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.request_builder import build_request

_SIZE = struct.Struct(">i")


class RawClient:
    def __init__(self, broker, timeout: float = 10.0, client_id: str = "raw"):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: dict) -> int:
        self._correlation += 1
        entity = build_request(api_key, version, body)
        self.sock.sendall(encode_request(api_key, version, self._correlation, self.client_id, entity))
        return self._correlation

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return out

    def receive(self, api_key: int, version: int):
        (size,) = _SIZE.unpack(self._read(4))
        return decode_response(api_key, version, self._read(size))

    def request(self, api_key: int, version: int, body: dict):
        correlation = self.send(api_key, version, body)
        got, entity = self.receive(api_key, version)
        assert got == correlation
        return entity
