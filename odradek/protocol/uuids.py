"""Kafka's text form of a UUID (topic ids, cluster ids): URL-safe base64 of the 16 bytes,
without padding, 22 characters (``org.apache.kafka.common.Uuid.toString``). Kafka's tools
print topic ids this way, and so does every Odradek surface (CLI, console, JSON API)."""

from __future__ import annotations

import base64
import uuid


def encode_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def topic_id_text(topic_id) -> str | None:
    """A topic id as Kafka prints it; None for none (null or Kafka's all-zero id)."""
    if topic_id is None:
        return None
    if isinstance(topic_id, uuid.UUID):
        return None if topic_id.int == 0 else encode_uuid(topic_id)
    return str(topic_id)
