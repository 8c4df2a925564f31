"""Partitioners: which partition a record goes to.

The default, ``murmur2_random``, is the Java client's and librdkafka's: keyed records go
to ``(murmur2(key) & 0x7fffffff) % partition_count`` over all partitions, so a key lands
where Java and confluent-kafka put it; unkeyed records stick to one available partition
until about ``batch_size`` bytes went there, then move to another (KIP-480, KIP-794).

librdkafka's other names are accepted too: ``murmur2`` (unkeyed records hash the empty
key), ``consistent``/``consistent_random`` (CRC32), ``fnv1a``/``fnv1a_random``, ``random``.

A custom partitioner is a callable ``f(topic, key_bytes, all_partitions,
available_partitions) -> int`` or an object with such a ``partition`` method.
"""

from __future__ import annotations

import random
import struct
import threading
import zlib
from functools import lru_cache

from odradek.client.client_errors import ConfigError

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@lru_cache(maxsize=256)
def _words(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}I")


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``Utils.murmur2``) as an unsigned 32-bit value."""
    length = len(data)
    h = 0x9747B28C ^ length
    n4 = length >> 2
    if n4:
        for k in _words(n4).unpack_from(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest:
        base = length & ~3
        if rest == 3:
            h ^= data[base + 2] << 16
        if rest >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def fnv1a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & _MASK
    return h


class StickyPartitioner:
    """Chooses a partition for unkeyed records; moves on after ``batch_size`` bytes."""

    def __init__(self, batch_size: int):
        self.batch_size = max(batch_size, 1)
        self._current: dict[str, list] = {}  # topic -> [partition, bytes so far]
        self._lock = threading.Lock()

    def partition(self, topic: str, size: int, all_partitions, available) -> int:
        state = self._current.get(topic)
        if state is not None and state[1] < self.batch_size and state[0] < len(all_partitions):
            state[1] += size
            return state[0]
        with self._lock:
            choices = available or all_partitions
            previous = state[0] if state is not None else None
            if len(choices) > 1 and previous is not None:
                choices = [p for p in choices if p != previous]
            part = random.choice(choices)
            self._current[topic] = [part, size]
            return part


class DefaultPartitioner:
    """The built-in partitioners, by librdkafka name."""

    NAMES = (
        "murmur2_random",
        "murmur2",
        "consistent",
        "consistent_random",
        "fnv1a",
        "fnv1a_random",
        "random",
    )

    def __init__(self, name: str, batch_size: int):
        if name not in self.NAMES:
            raise ConfigError(
                f"partitioner must be one of {', '.join(self.NAMES)} or a callable; got {name!r}"
            )
        self.name = name
        self.hash = {"murmur2": murmur2, "consistent": zlib.crc32, "fnv1a": fnv1a}.get(name.split("_")[0])
        self.hash_null = not name.endswith("random")
        self.sticky = StickyPartitioner(batch_size)

    def __call__(self, topic, key, all_partitions, available, size=0) -> int:
        if key is None and not self.hash_null or self.hash is None:
            return self.sticky.partition(topic, size, all_partitions, available)
        h = self.hash(key or b"")
        if self.hash is murmur2:
            h &= 0x7FFFFFFF
        return all_partitions[h % len(all_partitions)]


def make_partitioner(option, batch_size: int):
    """Return ``f(topic, key, all, available, size) -> int`` and whether it is built in."""
    if option is None or option == "default":
        option = "murmur2_random"
    if isinstance(option, str):
        return DefaultPartitioner(option, batch_size), True
    fn = getattr(option, "partition", option)
    if not callable(fn):
        raise ConfigError(
            f"partitioner must be a name, a callable or have a partition() method; got {option!r}"
        )

    def custom(topic, key, all_partitions, available, size=0):
        return fn(topic, key, list(all_partitions), list(available))

    return custom, False
