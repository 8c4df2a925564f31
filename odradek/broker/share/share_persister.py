"""The share-partition leader's side of the share coordinator (Kafka's DefaultStatePersister).

A share partition's state lives with its share coordinator, the leader of its
``__share_group_state`` partition (``share_coordinator.py``). This broker reaches it by
calling its own ``ShareCoordinator`` when that is here, else with Initialize/Read/Write/
DeleteShareGroupState over the inter-broker listener (one ``BrokerLink`` per coordinator
broker, as the controller's channel). NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS and failed connections are retried every ``_BACKOFF_S`` until
``_RETRY_S`` has passed, so a share-partition leader rides out its coordinator moving (the
image names the new leader of the state partition once the controller elected it).

Writes of one share partition go out one at a time, in order: ``save`` keeps only the newest
state waiting (each write carries the whole in-flight state, so the newest covers the ones
before it) and resolves every caller's future with the error code of the first write that
included its state (0 once the ISR of the state partition has it).

Threading: the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek._tasks import cancel_and_wait
from odradek.broker.share.share_coordinator import Key, ShareCoordinator, state_key
from odradek.broker.share.share_group_state_api import (
    DELETE,
    INITIALIZE,
    READ,
    SUMMARY,
    WRITE,
    partition_result,
    state_request,
)
from odradek.broker.share.share_state_topic import ShareState
from odradek.cluster.controller_channel import BrokerLink, BrokerLinkError
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_RETRY_S = 30.0  # a coordinator that moved is elected again well within this
_BACKOFF_S = 0.2
_REQUEST_TIMEOUT_S = 10.0
_RETRIABLE = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.request_timed_out,
}
FENCED = {ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch}


class _Writes:
    """The writes of one share partition: the newest state not sent yet, and who waits."""

    __slots__ = ("state", "seq", "waiters", "task")

    def __init__(self):
        self.state: ShareState | None = None  # None with a waiting seq: a delete
        self.seq = 0
        self.waiters: list[tuple[int, asyncio.Future]] = []
        self.task: asyncio.Task | None = None


class SharePersister:
    def __init__(self, broker, coordinator: ShareCoordinator, on_fenced: Callable[[Key], None]):
        self.broker = broker
        self.coordinator = coordinator
        self.on_fenced = on_fenced  # a write was fenced: the caller's in-memory state is stale
        self._links: dict[int, BrokerLink] = {}
        self._writes: dict[Key, _Writes] = {}
        self._deletes: set[Key] = set()

    async def close(self) -> None:
        await cancel_and_wait(*(w.task for w in self._writes.values() if w.task is not None))
        for w in self._writes.values():
            for _, fut in w.waiters:
                fut.cancel()
        self._writes.clear()
        for link in self._links.values():
            link.close()
        self._links.clear()

    # -- the operations ----------------------------------------------------------------------

    async def read(self, key: Key, leader_epoch: int) -> ShareState:
        """The share partition's state (start offset -1 when never written); raises KafkaError."""

        def remote(node: int):
            return self._remote(node, READ, key, {"leader_epoch": leader_epoch})

        result = await self._call(key, lambda: self.coordinator.read(key, leader_epoch), remote)
        return result if isinstance(result, ShareState) else _state_of(result)

    async def summary(self, key: Key) -> ShareState:
        """The state's epochs and start offset, without its batches and without fencing
        (ReadShareGroupStateSummary); raises KafkaError."""

        def remote(node: int):
            return self._remote(node, SUMMARY, key, {"leader_epoch": -1})

        result = await self._call(key, lambda: self.coordinator.read(key, -1, summary=True), remote)
        if isinstance(result, ShareState):
            return result
        return ShareState(result.state_epoch, result.leader_epoch, result.start_offset)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        """A fresh state at ``state_epoch`` (AlterShareGroupOffsets); raises KafkaError."""

        def remote(node: int):
            return self._remote(node, INITIALIZE, key, {"state_epoch": state_epoch, "start_offset": start_offset})

        await self._call(key, lambda: self.coordinator.initialize(key, state_epoch, start_offset), remote)

    def save(self, key: Key, state: ShareState | None) -> asyncio.Future:
        """Write ``state`` (None: delete it) after the writes of ``key`` already waiting; the
        future gets the error code (0: replicated)."""
        w = self._writes.get(key)
        if w is None:
            w = self._writes[key] = _Writes()
        w.state = state
        w.seq += 1
        if state is None:
            self._deletes.add(key)
        else:
            self._deletes.discard(key)
        fut = asyncio.get_running_loop().create_future()
        w.waiters.append((w.seq, fut))
        if w.task is None:
            w.task = asyncio.get_running_loop().create_task(self._drain(key, w), name=f"share-state-writer {key}")
        return fut

    def pending(self, key: Key) -> bool:
        """Whether writes of ``key`` are still on their way."""
        return key in self._writes

    async def _drain(self, key: Key, w: _Writes) -> None:
        try:
            while w.waiters:
                state, seq = w.state, w.seq
                delete = key in self._deletes
                w.state = None
                code = await self._write_now(key, state, delete)
                if code in FENCED:
                    self.on_fenced(key)
                done = [fut for s, fut in w.waiters if s <= seq]
                w.waiters = [(s, fut) for s, fut in w.waiters if s > seq]
                for fut in done:
                    if not fut.done():
                        fut.set_result(code)
        finally:
            w.task = None
            if not w.waiters:
                self._writes.pop(key, None)
                self._deletes.discard(key)

    async def _write_now(self, key: Key, state: ShareState | None, delete: bool) -> int:
        try:
            if delete:
                await self._call(key, lambda: self.coordinator.delete(key), lambda n: self._remote(n, DELETE, key, {}))
            elif state is not None:
                fields = {
                    "state_epoch": state.state_epoch,
                    "leader_epoch": state.leader_epoch,
                    "start_offset": state.start_offset,
                    "state_batches": [
                        {"first_offset": a, "last_offset": b, "delivery_state": s, "delivery_count": n}
                        for a, b, s, n in state.batches
                    ],
                }
                await self._call(
                    key,
                    lambda: self.coordinator.write(
                        key, state.state_epoch, state.leader_epoch, state.start_offset, state.batches
                    ),
                    lambda node: self._remote(node, WRITE, key, fields),
                )
            return 0
        except errors.KafkaError as exc:
            log.warning("writing the share state of %s %s-%d failed: %s", *key, exc)
            return int(exc.code)

    # -- routing -------------------------------------------------------------------------------

    async def _call(self, key: Key, local, remote):
        """``local()`` (maybe a coroutine) where this broker is the key's coordinator, else
        ``remote(node)``; retried while the coordinator is moving. Raises KafkaError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _RETRY_S
        while True:
            try:
                node = self.coordinator.find_coordinator(state_key(*key))
                if node == self.broker.node_id:
                    result = local()
                    return await result if asyncio.iscoroutine(result) else result
                return await remote(node)
            except errors.KafkaError as exc:
                if exc.code not in _RETRIABLE or loop.time() > deadline:
                    raise
                problem = str(exc)
            except BrokerLinkError as exc:
                if loop.time() > deadline:
                    raise errors.CoordinatorNotAvailableError(str(exc)) from None
                problem = str(exc)
            log.debug("share state of %s %s-%d: %s; retrying", *key, problem)
            await asyncio.sleep(_BACKOFF_S)

    async def _remote(self, node: int, api_key: int, key: Key, fields: dict):
        """One request to the coordinator on ``node``; the partition's result, or KafkaError."""
        link = self._link(node)
        response = await link.request(api_key, 0, state_request(api_key, key, fields))
        result = partition_result(response)
        if result.error_code:
            raise errors.error_for(result.error_code)(result.error_message or "")
        return result

    def _link(self, node: int) -> BrokerLink:
        info = self.broker.image.brokers.get(node)
        if info is None:
            raise errors.CoordinatorNotAvailableError(f"share coordinator broker {node} is not alive")
        host, port = info.address(self.broker.config.inter_broker_listener_name)
        link = self._links.get(node)
        if link is None or (link.host, link.port) != (host, port):
            if link is not None:
                link.close()
            link = self._links[node] = BrokerLink(
                host,
                port,
                node,
                f"broker-{self.broker.node_id}-share-persister",
                _REQUEST_TIMEOUT_S,
                self.broker.inter_broker_security,  # the inter-broker listener's TLS and SASL
            )
        return link


def _state_of(result) -> ShareState:
    return ShareState(
        result.state_epoch,
        -1,
        result.start_offset,
        [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches],
    )
