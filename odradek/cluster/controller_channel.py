"""The controller's requests to brokers: one connection and one sender per broker (Kafka's
ControllerChannelManager and RequestSendThread).

``ControllerChannelManager.send(broker, api_key, request, on_response)`` queues a request
for one broker; that broker's sender task writes the requests in order, one at a time,
and hands each answer to ``on_response`` (the controller turns it into an event on its own
queue, so no controller state is touched here). A request that fails (the broker is down,
the connection dropped) is sent again on a fresh connection after a short backoff, until it
succeeds or the broker is removed (it died: the controller stops talking to it).

The wire work is the shared sans-IO protocol layer (``protocol.messages``): the frames are
the same as every Kafka client's. ``BrokerLink`` is the smallest asyncio transport around it
(one request in flight, as Kafka's controller does); ``odradek.net.connection.Connection``
(the client's connection, moved out of odradek.client) can replace it once it is on main.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from odradek._tasks import cancel_and_wait
from odradek.protocol import messages

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
_SIZE = struct.Struct(">i")
MAX_RESPONSE_SIZE = 100 * 1024 * 1024


class BrokerLinkError(ConnectionError):
    """The request did not get an answer: the connection failed or the answer was garbage."""


class BrokerLink:
    """One connection to one broker, one request at a time."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def request(self, api_key: int, version: int, entity):
        """Send one request and return the decoded response; BrokerLinkError on failure (the
        connection is then closed; the next request opens a new one)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._writer is None:
                    self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
                self._correlation_id += 1
                self._writer.write(
                    messages.encode_request(api_key, version, self._correlation_id, self.client_id, entity)
                )
                (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_SIZE:
                    raise BrokerLinkError(f"response size {size} out of range")
                payload = await self._reader.readexactly(size)
            correlation_id, response = messages.decode_response(api_key, version, payload)
            if correlation_id != self._correlation_id:
                raise BrokerLinkError(f"answer to request {correlation_id}, expected {self._correlation_id}")
            return response
        except (OSError, TimeoutError, asyncio.IncompleteReadError, messages.MalformedResponse) as exc:
            self.close()
            raise BrokerLinkError(
                f"{messages.api_name(api_key)} to {self.host}:{self.port} failed: {exc or type(exc).__name__}"
            ) from exc
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


@dataclass
class _Queued:
    api_key: int
    version: int
    request: object
    on_response: Callable[[object], None] | None


class _BrokerSender:
    def __init__(self, broker_id: int, link: BrokerLink):
        self.broker_id = broker_id
        self.link = link
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-to-broker-{broker_id}")

    async def _run(self) -> None:
        warned = False
        while True:
            item = await self.queue.get()
            while True:
                try:
                    response = await self.link.request(item.api_key, item.version, item.request)
                    break
                except BrokerLinkError as exc:
                    if not warned:
                        log.warning("controller to broker %d: %s; retrying", self.broker_id, exc)
                        warned = True
                    await asyncio.sleep(RETRY_BACKOFF_S)
            if warned:
                log.info("controller to broker %d: connected again", self.broker_id)
                warned = False
            if item.on_response is not None:
                try:
                    item.on_response(response)
                except Exception:
                    log.exception("handling a %s answer from broker %d failed", messages.api_name(item.api_key), self.broker_id)


class ControllerChannelManager:
    def __init__(self, controller_id: int, timeout_s: float = 30.0):
        self.client_id = f"controller-{controller_id}"
        self.timeout_s = timeout_s
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Start talking to a broker (again, after it re-registered: its address may have changed)."""
        old = self._senders.pop(broker_id, None)
        if old is not None:
            old.task.cancel()
            old.link.close()
        self._senders[broker_id] = _BrokerSender(broker_id, BrokerLink(host, port, self.client_id, self.timeout_s))

    def remove_broker(self, broker_id: int) -> None:
        """Stop talking to a broker; what was queued for it is dropped."""
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.task.cancel()
            sender.link.close()

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._senders

    def send(self, broker_id: int, api_key: int, version: int, request, on_response=None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.debug("dropping %s to broker %d: no channel", messages.api_name(api_key), broker_id)
            return
        sender.queue.put_nowait(_Queued(api_key, version, request, on_response))

    async def close(self) -> None:
        senders = list(self._senders.values())
        self._senders.clear()
        await cancel_and_wait(*(s.task for s in senders))
        for s in senders:
            s.link.close()
