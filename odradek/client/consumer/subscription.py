"""What the consumer reads: its subscription, its assignment and each partition's position.

A data structure, no tasks (STYLE §11): the fetcher and the group coordinator read and
change it, always on the event loop. ``version`` changes with every assignment change,
so a fetch sent before the change can tell that its result is stale.
"""

from __future__ import annotations

import re

from odradek.client.client_errors import IllegalStateError
from odradek.client.structs import TopicPartition


class ConsumerRebalanceListener:
    """Override what you need; methods may be plain functions or coroutines (asyncio API).

    With the blocking consumer they run on the thread that calls ``poll``/``close``/... .
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Partitions taken away without a clean revoke (default: treat as revoked)."""
        return self.on_partitions_revoked(lost)


class PartitionState:
    __slots__ = (
        "position",
        "leader_epoch",
        "paused",
        "reset",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "needs_committed",
    )

    def __init__(self):
        self.position: int | None = None
        self.leader_epoch = -1
        self.paused = False
        self.reset: str | None = None  # "earliest"/"latest"/an offset to look up
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.needs_committed = True

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused and self.reset is None


class SubscriptionState:
    AUTO_TOPICS = "topics"
    AUTO_PATTERN = "pattern"
    USER_ASSIGNED = "assigned"

    def __init__(self, default_reset: str):
        self.default_reset = default_reset
        self.mode: str | None = None
        self.topics: set[str] = set()
        self.pattern: re.Pattern | None = None
        self.listener: ConsumerRebalanceListener | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0
        self.on_change = None  # callable() run after subscription/assignment changes

    # -- subscribing ---------------------------------------------------------------------

    def _set_mode(self, mode: str) -> None:
        if self.mode is not None and self.mode != mode:
            raise IllegalStateError(
                "subscribe() and assign() cannot be mixed on one consumer; call unsubscribe() first"
            )
        self.mode = mode

    def subscribe(self, topics=None, pattern=None, listener=None) -> bool:
        """Returns True if the subscription changed."""
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            if not any(hasattr(listener, m) for m in ("on_partitions_revoked", "on_partitions_assigned")):
                raise TypeError("listener must have on_partitions_revoked/on_partitions_assigned methods")
        if pattern is not None:
            self._set_mode(self.AUTO_PATTERN)
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.listener = listener
            self._changed()
            return True
        if isinstance(topics, str):
            topics = [topics]
        topics = set(topics or ())
        if not topics:
            self.unsubscribe()
            return True
        for t in topics:
            if not isinstance(t, str) or not t:
                raise ValueError(f"topic names must be non-empty strings, got {t!r}")
        self._set_mode(self.AUTO_TOPICS)
        changed = topics != self.topics
        self.topics = topics
        self.listener = listener
        self._changed()
        return changed

    def match_pattern(self, all_topics, exclude_internal: bool, internal=frozenset()) -> bool:
        """Recompute the topic set of a pattern subscription; True if it changed."""
        if self.mode != self.AUTO_PATTERN:
            return False
        topics = {
            t for t in all_topics if self.pattern.fullmatch(t) and not (exclude_internal and t in internal)
        }
        if topics != self.topics:
            self.topics = topics
            return True
        return False

    def assign(self, partitions) -> None:
        partitions = {TopicPartition(*tp) for tp in partitions}
        if not partitions:
            self.unsubscribe()
            return
        self._set_mode(self.USER_ASSIGNED)
        self.topics = {tp.topic for tp in partitions}
        self.set_assignment(partitions)

    def unsubscribe(self) -> None:
        self.mode = None
        self.topics = set()
        self.pattern = None
        self.set_assignment(set())

    @property
    def group_managed(self) -> bool:
        return self.mode in (self.AUTO_TOPICS, self.AUTO_PATTERN)

    @property
    def subscribed(self) -> bool:
        return self.mode is not None

    # -- assignment ----------------------------------------------------------------------

    def set_assignment(self, partitions) -> None:
        new = {}
        for tp in sorted(partitions):
            new[tp] = self.assignment.get(tp) or PartitionState()
        self.assignment = new
        self._changed()

    def add_partitions(self, partitions) -> None:
        for tp in partitions:
            if tp not in self.assignment:
                self.assignment[tp] = PartitionState()
        self._changed()

    def remove_partitions(self, partitions) -> None:
        for tp in partitions:
            self.assignment.pop(tp, None)
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def assigned(self) -> set[TopicPartition]:
        return set(self.assignment)

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.assignment[tp]
        except KeyError:
            raise IllegalStateError(
                f"partition {tp.topic}-{tp.partition} is not assigned to this consumer"
            ) from None

    # -- positions -----------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.state(tp)
        st.position = offset
        st.reset = None
        st.needs_committed = False
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        st = self.state(tp)
        st.reset = strategy
        st.needs_committed = False
        st.position = None
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self.assignment.items() if st.position is not None}

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.fetchable]

    def need_position(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.position is None]

    def pause(self, partitions) -> None:
        for tp in partitions:
            self.state(TopicPartition(*tp)).paused = True
        self.version += 1

    def resume(self, partitions) -> None:
        for tp in partitions:
            self.state(TopicPartition(*tp)).paused = False
        self._changed()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self.assignment.items() if st.paused}
