"""Small helpers shared by the group handlers (``odradek/broker/handlers/*group*``, offsets)."""

from __future__ import annotations

import asyncio
import datetime
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from odradek.protocol import errors


def coordinator_of(broker):
    """The broker's GroupCoordinator; COORDINATOR_NOT_AVAILABLE while there is none."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        raise errors.CoordinatorNotAvailableError("the group coordinator is not running")
    return coordinator


def ms(value) -> int:
    """kio gives durations as timedelta; plain ints pass through."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(request) -> str:
    """Kafka shows a member's host as ``/<address>``."""
    peer = request.peer or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


def answer_later(register: Callable[[Callable], None], build: Callable):
    """Run ``register(callback)``; answer ``build(result)`` now if it was called, else when it is.

    The callback may fire after the connection went away; then it does nothing.
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def callback(result) -> None:
        if not future.done():
            future.set_result(result)

    register(callback)
    if future.done():
        return build(future.result())

    async def wait():
        answer = build(await future)
        return (await answer) if inspect.isawaitable(answer) else answer

    return wait()


def when_group_replicated(broker, group_ids: Iterable[str], answer: Callable[[int], Any]):
    """``answer(0)`` once the ``__consumer_offsets`` partitions of ``group_ids`` have in
    their ISR everything written to them, else ``answer(coordinator error)`` (Kafka waits
    ``offsets.commit.timeout.ms`` for group and offset writes): ``InternalTopic.when_replicated``."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None or not broker.replica_manager.replicated:
        return answer(0)  # a single node: nothing to wait for
    return coordinator.topic.when_replicated(
        [coordinator.partition_of(g) for g in group_ids], broker.config.get("offsets.commit.timeout.ms"), answer
    )


def assignment_field(assignment) -> dict | None:
    """A heartbeat answer's ``assignment`` from ``{topic id: partitions}`` (None: unchanged)."""
    if assignment is None:
        return None
    return {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items())]}


def heartbeat_answer(error=0, message=None, member_id=None, epoch=-1, interval=0, assignment=None) -> dict:
    """The body of a ConsumerGroupHeartbeat or ShareGroupHeartbeat answer."""
    return {
        "throttle_time": 0,
        "error_code": error,
        "error_message": message,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval": interval,
        "assignment": assignment_field(assignment),
    }


def describe_if_allowed(broker, request, describe: Callable[[str], dict]) -> Callable[[str], dict]:
    """``describe`` behind Kafka's check for ConsumerGroupDescribe/ShareGroupDescribe: Describe on
    the group, else GROUP_AUTHORIZATION_FAILED for that group."""

    def checked(group_id: str) -> dict:
        if not broker.allowed(request, "Describe", "Group", group_id):
            raise errors.GroupAuthorizationFailedError(f"not authorized to describe group {group_id}")
        return describe(group_id)

    return checked


def described_group(group_id: str, operations: int, describe: Callable[[str], dict]) -> dict:
    """One group of a ConsumerGroupDescribe or ShareGroupDescribe answer; ``describe`` gives
    the group's fields or raises KafkaError (GROUP_ID_NOT_FOUND, coordinator errors)."""
    entry = {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": operations,
    }
    try:
        entry.update(describe(group_id))
    except errors.KafkaError as exc:
        entry.update(error_code=exc.code, error_message=exc.message)
    return entry
