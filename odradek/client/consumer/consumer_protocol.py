"""The consumer protocol's bytes inside group requests: a member's subscription (JoinGroup
metadata) and its assignment (SyncGroup), versioned by a leading int16 (KIP-429 adds owned
partitions to the subscription in v1).

Any group member writes these bytes, so they are read through the schema check
(``messages.decode_entity``) before kio: a hostile member cannot abort the leader's client.
"""

from __future__ import annotations

import io

from kio.serial import entity_writer

from odradek.client.consumer.assignors import Subscription
from odradek.client.structs import TopicPartition
from odradek.protocol import messages


def _protocol_class(kind: str, version: int):
    import importlib

    v = min(max(version, 0), 3)
    mod = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{v}.data")
    return mod, v


def encode_subscription(topics, user_data, owned, version: int = 1) -> bytes:
    mod, v = _protocol_class("subscription", version)
    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    values = {"topics": tuple(sorted(topics)), "user_data": user_data}
    if v >= 1:
        values["owned_partitions"] = tuple(
            mod.TopicPartition(topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_topic.items())
        )
    entity = mod.ConsumerProtocolSubscription(**values)
    out = io.BytesIO()
    out.write(v.to_bytes(2, "big"))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def decode_subscription(data: bytes, instance_id=None) -> Subscription:
    version = int.from_bytes(data[:2], "big", signed=True)
    mod, _ = _protocol_class("subscription", version)
    entity, _ = messages.decode_entity(mod.ConsumerProtocolSubscription, data, 2)
    owned = [
        TopicPartition(t.topic, int(p)) for t in getattr(entity, "owned_partitions", ()) for p in t.partitions
    ]
    return Subscription(
        list(entity.topics),
        entity.user_data,
        owned,
        int(getattr(entity, "generation_id", -1)),
        instance_id,
        getattr(entity, "rack_id", None),
    )


def encode_assignment(partitions, user_data=None) -> bytes:
    mod, v = _protocol_class("assignment", 0)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    entity = mod.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            mod.TopicPartition(topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_topic.items())
        ),
        user_data=user_data,
    )
    out = io.BytesIO()
    out.write(v.to_bytes(2, "big"))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def decode_assignment(data: bytes) -> tuple[set[TopicPartition], bytes | None]:
    if not data:
        return set(), None
    version = int.from_bytes(data[:2], "big", signed=True)
    mod, _ = _protocol_class("assignment", version)
    entity, _ = messages.decode_entity(mod.ConsumerProtocolAssignment, data, 2)
    return {
        TopicPartition(t.topic, int(p)) for t in entity.assigned_partitions for p in t.partitions
    }, entity.user_data
