"""The controller's requests to brokers: one connection and one sender per broker (Kafka's
ControllerChannelManager and RequestSendThread).

``ControllerChannelManager.send(broker, api_key, request, on_response)`` queues a request
for one broker; that broker's sender task writes the requests in order, one at a time,
and hands each answer to ``on_response`` (the controller turns it into an event on its own
queue, so no controller state is touched here). A request that fails (the broker is down,
the connection dropped) is sent again on a fresh connection after a short backoff, until it
succeeds or the broker is removed (it died: the controller stops talking to it).

The wire is the shared connection (``odradek.net.connection``, the same one the client uses,
over the sans-IO ``protocol.client_connection``); ``BrokerLink`` keeps one per broker, with one
request in flight, as Kafka's controller does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from odradek._tasks import cancel_and_wait
from odradek.net.connection import Connection
from odradek.net.connection_errors import ClientError, KafkaConnectionError
from odradek.net.connection_security import ConnectionSecurity
from odradek.net.socket_buffers import OS_DEFAULT
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1


async def connect_to_broker(
    host: str,
    port: int,
    node_id: int,
    client_id: str,
    timeout_ms: int,
    security: ConnectionSecurity | None,
    receive_buffer_bytes: int = OS_DEFAULT,
) -> Connection:
    """A connection from this broker to another (controller requests, follower fetches,
    transaction markers, controlled shutdown), with the inter-broker listener's ``security``.
    A login the other broker refuses (a Kafka error from SASL, e.g. a user it does not know
    yet) is a failed connection like any other, KafkaConnectionError, for the caller to retry
    after its backoff. ``receive_buffer_bytes`` is SO_RCVBUF (-1: the OS's)."""
    conn = Connection(host, port, node_id, client_id, timeout_ms, security=security, receive_buffer_bytes=receive_buffer_bytes)
    try:
        await conn.connect(timeout_ms / 1000)
    except KafkaError as exc:
        raise KafkaConnectionError(f"broker {node_id} at {host}:{port} refused the login: {exc}") from exc
    return conn


class BrokerLinkError(ConnectionError):
    """The request did not get an answer: the connection failed, timed out or was garbage."""


class BrokerLink:
    """One connection to one broker (the shared ``odradek.net`` connection), one request at a
    time; it reconnects on the next request after a failure."""

    def __init__(
        self,
        host: str,
        port: int,
        node_id: int,
        client_id: str,
        timeout_s: float,
        security: ConnectionSecurity | None = None,
    ):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security  # the inter-broker listener's TLS and SASL, as a client
        self._conn: Connection | None = None

    async def request(self, api_key: int, version: int, entity):
        """Send one request and return the decoded response; BrokerLinkError on failure."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await connect_to_broker(
                    self.host, self.port, self.node_id, self.client_id, int(self.timeout_s * 1000), self.security
                )
            return await self._conn.send(api_key, entity, version=version)
        except (ClientError, OSError) as exc:
            self.close()
            raise BrokerLinkError(
                f"{messages.api_name(api_key)} to broker {self.node_id} at {self.host}:{self.port} failed: {exc}"
            ) from exc
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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
        self.refused = False
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
            if getattr(response, "error_code", 0) == ErrorCode.cluster_authorization_failed and not self.refused:
                self.refused = True  # said once per broker: every later request meets the same refusal
                log.error(
                    "broker %d refused %s with CLUSTER_AUTHORIZATION_FAILED: the brokers' own user (of "
                    "inter.broker.listener.name) needs ClusterAction on the cluster or a place in super.users",
                    self.broker_id,
                    messages.api_name(item.api_key),
                )
            if item.on_response is not None:
                try:
                    item.on_response(response)
                except Exception:
                    log.exception("handling a %s answer from broker %d failed", messages.api_name(item.api_key), self.broker_id)


class ControllerChannelManager:
    def __init__(self, controller_id: int, timeout_s: float = 30.0, security: ConnectionSecurity | None = None):
        self.client_id = f"controller-{controller_id}"
        self.timeout_s = timeout_s
        self.security = security
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Start talking to a broker (again, after it re-registered: its address may have changed)."""
        old = self._senders.pop(broker_id, None)
        if old is not None:
            old.task.cancel()
            old.link.close()
        self._senders[broker_id] = _BrokerSender(
            broker_id, BrokerLink(host, port, broker_id, self.client_id, self.timeout_s, self.security)
        )

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
