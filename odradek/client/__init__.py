"""Odradek's Kafka client: Producer, Consumer and Admin, blocking (here) and asyncio (``odradek.aio``).

Imports are lazy so that ``import odradek`` stays cheap for the broker.
"""

from __future__ import annotations

_EXPORTS = {
    "Producer": "odradek.client.blocking",
    "Consumer": "odradek.client.blocking",
    "Admin": "odradek.client.blocking",
    "ShareConsumer": "odradek.client.blocking",
    "TopicPartition": "odradek.client.structs",
    "RecordMetadata": "odradek.client.structs",
    "ConsumerRecord": "odradek.client.structs",
    "OffsetAndMetadata": "odradek.client.structs",
    "OffsetAndTimestamp": "odradek.client.structs",
    "NewTopic": "odradek.client.structs",
    "NewPartitions": "odradek.client.structs",
    "ConfigResource": "odradek.client.structs",
    "ConsumerRebalanceListener": "odradek.client.consumer.subscription",
    "ProducerRecord": "odradek.client.producer.producer",
    "ConsumerGroupMetadata": "odradek.client.producer.transactions",
    "run_exactly_once": "odradek.client.consume_transform_produce",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'odradek.client' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
