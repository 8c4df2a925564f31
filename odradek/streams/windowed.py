"""Windowed keys and their serdes, in Kafka Streams' byte layouts.

A windowed aggregation's output key is ``Windowed(key, Window(start, end))`` (times in ms since the
epoch). On the wire Kafka writes:

- time windows (``TimeWindowedSerializer``): the inner key's bytes, then the window start as an 8-byte
  big-endian long. The end is not written: the reader adds the window size (``window_size_ms``).
- session windows (``SessionWindowedSerializer``): the inner key's bytes, then the end, then the start,
  each an 8-byte big-endian long.

A null windowed key serializes to null, and null bytes read as None, as in Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from odradek.client.client_errors import SerializationError

from .serdes import Serde, Serdes

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")
_MAX_LONG = 2**63 - 1


@dataclass(frozen=True, order=True)
class Window:
    """A window's bounds in ms: time windows are [start, end), session windows [start, end]."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"a window needs 0 <= start <= end, got [{self.start}, {self.end}]")


@dataclass(frozen=True)
class Windowed:
    """A key and the window it was aggregated in (Kafka's ``Windowed<K>``)."""

    key: Any
    window: Window

    def __str__(self) -> str:  # Kafka's Windowed.toString
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


class TimeWindowedSerde(Serde):
    """Kafka's ``WindowedSerdes.TimeWindowedSerde``: inner key bytes + 8-byte start."""

    kafka_class_name = "org.apache.kafka.streams.kstream.WindowedSerdes$TimeWindowedSerde"
    short_name = "time-windowed"

    def __init__(self, inner: Serde | None = None, window_size_ms: int = _MAX_LONG):
        if window_size_ms < 0:  # 0: sliding windows of time difference 0, [t, t]
            raise ValueError(f"window_size_ms must not be negative, got {window_size_ms}")
        self.inner = inner if inner is not None else Serdes.ByteArray()
        self.window_size_ms = window_size_ms

    def serialize(self, topic, value):
        if value is None:
            return None
        key = self.inner.serialize(topic, value.key)
        return (key or b"") + _LONG.pack(value.window.start)

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) < _LONG.size:
            raise SerializationError(
                f"a time-windowed key needs at least 8 bytes, got {len(data)} on {topic!r}"
            )
        data = bytes(data)
        (start,) = _LONG.unpack_from(data, len(data) - _LONG.size)
        key = self.inner.deserialize(topic, data[: -_LONG.size])
        return Windowed(key, Window(start, min(start + self.window_size_ms, _MAX_LONG)))

    def __repr__(self) -> str:
        return f"WindowedSerdes.time_windowed_serde_from({self.inner!r}, {self.window_size_ms})"


class SessionWindowedSerde(Serde):
    """Kafka's ``WindowedSerdes.SessionWindowedSerde``: inner key bytes + 8-byte end + 8-byte start."""

    kafka_class_name = "org.apache.kafka.streams.kstream.WindowedSerdes$SessionWindowedSerde"
    short_name = "session-windowed"

    def __init__(self, inner: Serde | None = None):
        self.inner = inner if inner is not None else Serdes.ByteArray()

    def serialize(self, topic, value):
        if value is None:
            return None
        key = self.inner.serialize(topic, value.key)
        return (key or b"") + _TWO_LONGS.pack(value.window.end, value.window.start)

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) < _TWO_LONGS.size:
            raise SerializationError(
                f"a session-windowed key needs at least 16 bytes, got {len(data)} on {topic!r}"
            )
        data = bytes(data)
        end, start = _TWO_LONGS.unpack_from(data, len(data) - _TWO_LONGS.size)
        return Windowed(self.inner.deserialize(topic, data[: -_TWO_LONGS.size]), Window(start, end))

    def __repr__(self) -> str:
        return f"WindowedSerdes.session_windowed_serde_from({self.inner!r})"


class WindowedSerdes:
    """Kafka's ``WindowedSerdes`` factory."""

    @staticmethod
    def time_windowed_serde_from(inner: Serde | str | type, window_size_ms: int) -> TimeWindowedSerde:
        return TimeWindowedSerde(Serdes.from_class_name(inner), window_size_ms)

    @staticmethod
    def session_windowed_serde_from(inner: Serde | str | type) -> SessionWindowedSerde:
        return SessionWindowedSerde(Serdes.from_class_name(inner))
