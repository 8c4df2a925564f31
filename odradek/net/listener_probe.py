"""What security a broker's listener expects, asked on a connection of its own.

A connection the broker closes at once is most often a security mismatch: a client without
TLS on a TLS listener (closed before ApiVersions is answered), or a client without SASL on a
SASL listener (ApiVersions answered, the next request closed). The connection only sees the
close; these probes find the cause, so the client can say it at once instead of retrying:

* ``speaks_tls``: does the listener complete a TLS handshake (certificate not checked)?
* ``sasl_mechanisms``: the mechanisms a SaslHandshake v1 on a fresh connection is told, or
  None when the listener does not do SASL (Kafka answers ILLEGAL_SASL_STATE with none there).

Each probe is one short connection with a deadline; any failure answers "not shown".
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from odradek.protocol.api_keys import SASL_HANDSHAKE
from odradek.protocol.client_connection import ClientConnection

PROBE_TIMEOUT_S = 3.0
MAX_ANSWER_BYTES = 64 * 1024  # a SaslHandshake answer is a few dozen bytes


async def speaks_tls(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port, ssl=ctx)
    except (OSError, TimeoutError, ssl.SSLError):
        return False
    await _close(writer)
    return True


async def sasl_mechanisms(
    host: str, port: int, ssl_context: ssl.SSLContext | None = None, timeout: float = PROBE_TIMEOUT_S
) -> list[str] | None:
    core = ClientConnection("odradek-listener-probe")
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=ssl_context, server_hostname=host if ssl_context else None
            )
            try:
                _, frame = core.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, token=None)
                writer.write(frame)
                size = int.from_bytes(await reader.readexactly(4), "big")
                if not 4 <= size <= MAX_ANSWER_BYTES:
                    return None  # not a Kafka broker's answer
                body = await reader.readexactly(size)
            finally:
                await _close(writer)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError):
        return None
    answer = core.response(memoryview(body))
    mechanisms = getattr(answer.entity, "mechanisms", None)
    return list(mechanisms) if mechanisms else None


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
