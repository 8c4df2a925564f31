"""A broker that answers ApiVersions and Metadata and never answers anything else.

Test double for the failure paths a real broker will not show on demand: a leader that
accepts produce requests and stays silent (buffer exhaustion, request and delivery
timeouts). It speaks the real protocol through ``odradek.protocol.messages``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

from odradek.protocol import api_keys, messages
from odradek.protocol.client_versions import client_versions
from odradek.protocol.request_builder import build


class BlackHoleBroker:
    def __init__(self, topic: str, partitions: int = 1):
        self.topic = topic
        self.partitions = partitions
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self.requests: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self):
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(5)
        return self

    def __exit__(self, *exc):
        async def stop():
            self._server.close()
            for w in list(self._writers):
                w.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _start(self):
        self._writers = set()
        self._server = await asyncio.start_server(self._serve, sock=self._sock)

    async def _serve(self, reader, writer):
        self._writers.add(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                header, pos = messages.parse_request_header(payload)
                self.requests.append(header.api_key)
                body = self._answer(header)
                if body is not None:
                    writer.write(
                        messages.encode_response(
                            header.api_key, header.api_version, header.correlation_id, body
                        )
                    )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _answer(self, header):
        def response(values):
            return build(messages.response_class(header.api_key, header.api_version), values)

        if header.api_key == api_keys.API_VERSIONS:
            keys = [api_keys.API_VERSIONS, api_keys.METADATA, api_keys.PRODUCE]
            return response(
                {
                    "error_code": 0,
                    "api_keys": [
                        {
                            "api_key": k,
                            "min_version": client_versions(k).start,
                            "max_version": client_versions(k).stop - 1,
                        }
                        for k in keys
                    ],
                }
            )
        if header.api_key == api_keys.METADATA:
            return response(
                {
                    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port, "rack": None}],
                    "cluster_id": "blackhole",
                    "controller_id": 1,
                    "topics": [
                        {
                            "error_code": 0,
                            "name": self.topic,
                            "is_internal": False,
                            "partitions": [
                                {
                                    "error_code": 0,
                                    "partition_index": p,
                                    "leader_id": 1,
                                    "leader_epoch": 0,
                                    "replica_nodes": [1],
                                    "isr_nodes": [1],
                                }
                                for p in range(self.partitions)
                            ],
                        }
                    ],
                }
            )
        return None  # silence
