"""The listener probes (net/listener_probe.py) against servers that are not a secured Kafka
listener: they answer "not shown" (None, False), never raise, and stay within their deadline."""

from __future__ import annotations

import asyncio

from odradek.net import listener_probe


async def _serve(reply: bytes):
    async def handle(reader, writer):
        await reader.read(100)
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_a_server_that_is_not_kafka_shows_neither_sasl_nor_tls():
    async def run():
        results = []
        for reply in (b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\x00\x00\x00\x02xy", b""):
            server, port = await _serve(reply)
            async with server:
                results.append(await listener_probe.sasl_mechanisms("127.0.0.1", port, timeout=2))
                results.append(await listener_probe.speaks_tls("127.0.0.1", port, timeout=2))
        return results

    assert asyncio.run(run()) == [None, False] * 3


def test_a_closed_port_shows_nothing():
    async def run():
        server, port = await _serve(b"")
        server.close()
        await server.wait_closed()
        return await listener_probe.sasl_mechanisms("127.0.0.1", port), await listener_probe.speaks_tls("127.0.0.1", port)

    assert asyncio.run(run()) == (None, False)
