"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``partitionFor``.

``abs(groupId.hashCode()) % partitions`` with Java's ``String.hashCode`` (31-based, over
UTF-16 code units, int32 overflow) and Kafka's ``Utils.abs`` (which maps
``Integer.MIN_VALUE`` to 0 instead of leaving it negative). Getting this exactly right
matters: a client or tool that computes the partition itself must land on the broker
that actually holds the group.
"""

from __future__ import annotations

import struct

OFFSETS_TOPIC = "__consumer_offsets"

_INT32_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: signed int32, over UTF-16 code units."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``Math.abs`` but ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % partitions
