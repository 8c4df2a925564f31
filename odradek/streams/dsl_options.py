"""The DSL's option objects, as Kafka Streams spells them: ``Consumed``, ``Produced``, ``Grouped``,
``Materialized``, ``Joined``, ``StreamJoined``, ``Branched``, ``Named``, the window
specifications and ``Suppressed``. Plain data: the builder records them in the topology's nodes.

A serde left as None means the application's ``default.key.serde`` / ``default.value.serde``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from odradek.streams.serdes import Serde


@dataclass(frozen=True)
class Consumed:
    """How a source reads its topic: serdes, a name, and a ``timestamp_extractor(record,
    partition_time) -> ms`` giving each record its event time (``timestamps.py``)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None
    timestamp_extractor: Any = None

    @classmethod
    def with_(
        cls, key_serde: Serde | None = None, value_serde: Serde | None = None, timestamp_extractor: Any = None
    ) -> Consumed:
        return cls(key_serde, value_serde, timestamp_extractor=timestamp_extractor)

    @classmethod
    def as_(cls, name: str) -> Consumed:
        return cls(name=name)

    def with_timestamp_extractor(self, extractor: Any) -> Consumed:
        return replace(self, timestamp_extractor=extractor)


@dataclass(frozen=True)
class Produced:
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde: Serde | None = None, value_serde: Serde | None = None) -> Produced:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Produced:
        return cls(name=name)


@dataclass(frozen=True)
class Grouped:
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde: Serde | None = None, value_serde: Serde | None = None) -> Grouped:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Grouped:
        return cls(name=name)


@dataclass(frozen=True)
class Repartitioned:
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None
    number_of_partitions: int | None = None

    @classmethod
    def as_(cls, name: str) -> Repartitioned:
        return cls(name=name)


@dataclass(frozen=True)
class Materialized:
    """A state store's name (queryable, with a changelog topic) and the serdes of its contents."""

    store_name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging_enabled: bool = True

    @classmethod
    def as_(cls, store_name: str) -> Materialized:
        return cls(store_name=store_name)

    @classmethod
    def with_(cls, key_serde: Serde | None = None, value_serde: Serde | None = None) -> Materialized:
        return cls(None, key_serde, value_serde)

    def with_key_serde(self, serde: Serde) -> Materialized:
        return Materialized(self.store_name, serde, self.value_serde, self.logging_enabled)

    def with_value_serde(self, serde: Serde) -> Materialized:
        return Materialized(self.store_name, self.key_serde, serde, self.logging_enabled)

    def with_logging_disabled(self) -> Materialized:
        return Materialized(self.store_name, self.key_serde, self.value_serde, False)


@dataclass(frozen=True)
class Named:
    name: str

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name)


@dataclass(frozen=True)
class Branched:
    """One branch of ``split()``: its name suffix, and optionally a function applied to it
    (``with_function``) or a consumer of it (``with_consumer``)."""

    name: str | None = None
    function: Any = None
    consumer: Any = None

    @classmethod
    def as_(cls, name: str) -> Branched:
        return cls(name)

    @classmethod
    def with_function(cls, function, name: str | None = None) -> Branched:
        return cls(name, function=function)

    @classmethod
    def with_consumer(cls, consumer, name: str | None = None) -> Branched:
        return cls(name, consumer=consumer)


@dataclass(frozen=True)
class Joined:
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde=None, value_serde=None, other_value_serde=None) -> Joined:
        return cls(key_serde, value_serde, other_value_serde)

    @classmethod
    def as_(cls, name: str) -> Joined:
        return cls(name=name)


@dataclass(frozen=True)
class StreamJoined:
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde=None, value_serde=None, other_value_serde=None) -> StreamJoined:
        return cls(key_serde, value_serde, other_value_serde)

    def with_name(self, name: str) -> StreamJoined:
        return StreamJoined(self.key_serde, self.value_serde, self.other_value_serde, name)


# -- windows -------------------------------------------------------------------------------


def _ms(value) -> int:
    """Milliseconds from an int or a ``datetime.timedelta`` (Kafka takes ``Duration``)."""
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


@dataclass(frozen=True)
class TimeWindows:
    """Tumbling (advance = size) or hopping windows over record time, with a grace period."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    @classmethod
    def of_size_with_no_grace(cls, size) -> TimeWindows:
        return cls(_ms(size), _ms(size), 0)

    @classmethod
    def of_size_and_grace(cls, size, grace) -> TimeWindows:
        return cls(_ms(size), _ms(size), _ms(grace))

    def advance_by(self, advance) -> TimeWindows:
        advance_ms = _ms(advance)
        if not 0 < advance_ms <= self.size_ms:
            raise ValueError(f"advance_by must be in (0, {self.size_ms}] ms, got {advance_ms}")
        return TimeWindows(self.size_ms, advance_ms, self.grace_ms)


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of records at most ``time_difference_ms`` apart, [start, start + difference] with
    both ends inclusive, made where records are (Kafka's KIP-450), with a grace period."""

    time_difference_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.time_difference_ms < 0:
            raise ValueError(
                f"the window time difference must not be negative, got {self.time_difference_ms} ms"
            )
        if self.grace_ms < 0:
            raise ValueError(f"the window grace period must not be negative, got {self.grace_ms} ms")

    @classmethod
    def of_time_difference_with_no_grace(cls, difference) -> SlidingWindows:
        return cls(_ms(difference), 0)

    @classmethod
    def of_time_difference_and_grace(cls, difference, grace) -> SlidingWindows:
        return cls(_ms(difference), _ms(grace))


@dataclass(frozen=True)
class SessionWindows:
    inactivity_gap_ms: int
    grace_ms: int

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap) -> SessionWindows:
        return cls(_ms(gap), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap, grace) -> SessionWindows:
        return cls(_ms(gap), _ms(grace))


@dataclass(frozen=True)
class JoinWindows:
    before_ms: int
    after_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_with_no_grace(cls, difference) -> JoinWindows:
        return cls(_ms(difference), _ms(difference), 0)

    @classmethod
    def of_time_difference_and_grace(cls, difference, grace) -> JoinWindows:
        return cls(_ms(difference), _ms(difference), _ms(grace))

    def before(self, time_difference) -> JoinWindows:
        """A record joins the other side's records up to this long before it (Kafka's ``before``)."""
        return JoinWindows(_ms(time_difference), self.after_ms, self.grace_ms)

    def after(self, time_difference) -> JoinWindows:
        """A record joins the other side's records up to this long after it (Kafka's ``after``)."""
        return JoinWindows(self.before_ms, _ms(time_difference), self.grace_ms)


@dataclass(frozen=True)
class Suppressed:
    """``Suppressed.until_window_closes(BufferConfig.unbounded())``: one final result per window."""

    until: str
    buffer: Any = None

    @classmethod
    def until_window_closes(cls, buffer=None) -> Suppressed:
        return cls("window-closes", buffer)

    @classmethod
    def until_time_limit(cls, time_limit, buffer=None) -> Suppressed:
        return cls(f"time-limit:{_ms(time_limit)}", buffer)


class BufferConfig:
    """``Suppressed.BufferConfig``: Spark keeps suppressed windows in its state store, unbounded."""

    @staticmethod
    def unbounded() -> str:
        return "unbounded"
