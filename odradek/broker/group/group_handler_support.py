"""Small helpers shared by the group handlers (``odradek/broker/handlers/*group*``, offsets)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable

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
        return build(await future)

    return wait()


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
