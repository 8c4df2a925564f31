"""The asyncio client: ``Producer``, ``Consumer``, ``ShareConsumer`` and ``Admin`` with the blocking API's options.

``send``, ``flush``, ``poll``, ``commit`` and ``close`` are coroutines; ``subscribe``,
``assign`` and ``assignment`` are plain calls. Use ``async with`` (or ``await start()``).
"""

from odradek.client.admin import Admin
from odradek.client.consumer.consumer import Consumer
from odradek.client.producer.producer import Producer
from odradek.client.share_consumer import ShareConsumer
from odradek.client.structs import (
    ConsumerRecord,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRecord",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "TopicPartition",
]
