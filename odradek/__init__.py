"""Odradek: an event-streaming platform that speaks the Apache Kafka protocol.

``from odradek import Producer, Consumer, Admin, TopicPartition`` gives the blocking
client; ``odradek.aio`` has the asyncio one. Both are imported on first use only.
"""

_CLIENT = ("Producer", "Consumer", "Admin", "TopicPartition")

__all__ = list(_CLIENT)


def __getattr__(name: str):
    if name in _CLIENT:
        from odradek import client

        return getattr(client, name)
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")
