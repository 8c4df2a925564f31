"""Incremental fetch sessions (KIP-227; Kafka's FetchSession, FetchSessionCache, FetchContext).

Theory of operation. A fetcher asking for many partitions over and over lets the broker
remember them: its first, *full*, fetch (session id 0, epoch 0) lists every partition and
the answer carries a new session id. Each later, *incremental*, fetch names that id and the
next epoch (1, 2, ... wrapping to 1), lists only the partitions added or changed since
(a new fetch offset, log start offset, leader epoch, last fetched epoch or max bytes), and
names those it no longer wants in ``forgotten_topics_data``; the broker reads every
partition of the session as if all were listed, and answers only those with something to
say: records, an error, a new high watermark, last stable offset or log start offset, a
preferred read replica, a diverging epoch. Partitions that returned records move to the
end of the session, so that ``max_bytes`` does not always go to the same first ones.

Requests by (session id, epoch):

* (0, -1): no session (librdkafka always sends this; so did every fetch before sessions).
* (0, 0) or (id, 0): full; closes session ``id`` and opens a new one when the cache has a
  slot (``max.incremental.fetch.session.cache.slots``) or can evict one: a session unused
  for ``EVICTION_MS``, else the smallest unprivileged (consumer) session when the new one
  is a follower's or larger. No slot: the answer carries session id 0 (no session).
* (id, -1): full, closes session ``id``, opens none.
* (id, n > 0): incremental. An unknown id answers FETCH_SESSION_ID_NOT_FOUND, another epoch
  INVALID_FETCH_SESSION_EPOCH (the fetcher then starts over with a full fetch).

A consumer's fetch over its ``consumer_byte_rate`` quota is answered empty, with the throttle
time (KIP-219, as Kafka does): a full fetch then gets no session (session id 0), an
incremental one keeps its session id and epoch (``FetchSessionCache.throttled``).

Sessions are not tied to connections, as in Kafka. Called only from the event loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
EVICTION_MS = 120_000  # Kafka's min.incremental.fetch.session.eviction.ms


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class CachedPartition:
    """What a session knows of one partition: the fetcher's last request for it, and what
    the last answer told it (so that an unchanged partition is left out)."""

    __slots__ = ("fetch_offset", "max_bytes", "leader_epoch", "last_fetched_epoch", "log_start", "sent")

    def __init__(self, fetch_offset: int, max_bytes: int, leader_epoch: int, last_fetched_epoch: int, log_start: int):
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.leader_epoch = leader_epoch
        self.last_fetched_epoch = last_fetched_epoch
        self.log_start = log_start  # the fetcher's own log start (a follower's)
        self.sent: tuple | None = None  # (high watermark, last stable offset, log start) last answered


@dataclass
class FetchSession:
    id: int
    privileged: bool  # a follower's: evicted only by age
    epoch: int  # the epoch the next incremental fetch must carry
    last_used_ms: int
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    topic_ids: dict = field(default_factory=dict)  # name -> topic id, for v13+ answers


@dataclass
class FetchContext:
    """One fetch as the handler reads it: the partitions to read (the request's, or the
    whole session's), and the session id to answer with; or a top-level error code."""

    plan: list
    last_fetched: dict | None
    log_starts: dict | None
    session_id: int = INVALID_SESSION_ID
    session: FetchSession | None = None
    incremental: bool = False
    error: int = 0

    def responses(self, topics: list) -> list:
        """``topics`` as ``ReplicaManager.read`` returned them, kept in the session: all of
        them for a full fetch, those with something new for an incremental one."""
        session = self.session
        if session is None:
            return topics
        cached = session.partitions
        out = []
        moved = []
        for name, entries in topics:
            kept = []
            for entry in entries:
                key = (name, entry[0])
                part = cached.get(key)
                if part is None:  # refused before the session (authorisation): always said
                    kept.append(entry)
                    continue
                now = (entry[2], entry[3], entry[4]) if not entry[1] else None  # an error: say it again next time
                records = len(entry[6])
                if records:
                    moved.append(key)
                if (
                    not self.incremental
                    or records
                    or entry[1]
                    or now != part.sent
                    or (len(entry) > 7 and (entry[7] >= 0 or len(entry) > 8))
                ):
                    kept.append(entry)
                part.sent = now
            if kept:
                out.append((name, kept))
        for key in moved:  # fairness: those that had data go to the end
            cached[key] = cached.pop(key)
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int = EVICTION_MS):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}  # least recently used first
        self.evictions = 0

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def context(
        self,
        session_id: int,
        epoch: int,
        plan: list,
        last_fetched: dict | None,
        log_starts: dict | None,
        forgotten: list[tuple[str, int]],
        topic_ids: dict | None,
        privileged: bool,
        now_ms: int,
    ) -> FetchContext:
        """The context of a fetch with ``session_id`` and ``epoch``; ``plan`` is the request's
        partitions as ``(topic, index, fetch offset, max bytes, current leader epoch)``,
        ``last_fetched`` and ``log_starts`` map them to their last fetched epoch and the
        fetcher's log start offset, ``forgotten`` lists those to drop."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            context = FetchContext(plan, last_fetched, log_starts)
            if epoch == INITIAL_EPOCH and plan:
                session = self._create(len(plan), privileged, now_ms)
                if session is not None:
                    _update(session, plan, last_fetched, log_starts, (), topic_ids)
                    context.session, context.session_id = session, session.id
            return context
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], None, None, error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext([], None, None, error=ErrorCode.invalid_fetch_session_epoch)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        self.sessions[session_id] = self.sessions.pop(session_id)  # most recently used
        _update(session, plan, last_fetched, log_starts, forgotten, topic_ids)
        full_plan = []
        fetched: dict = {}
        starts: dict = {}
        for key, part in session.partitions.items():
            full_plan.append((key[0], key[1], part.fetch_offset, part.max_bytes, part.leader_epoch))
            if part.last_fetched_epoch >= 0:
                fetched[key] = part.last_fetched_epoch
            starts[key] = part.log_start
        return FetchContext(full_plan, fetched or None, starts, session.id, session, incremental=True)

    def throttled(self, context: FetchContext) -> int:
        """The session id of an empty, throttled answer to ``context``'s fetch (a quota held it
        back), as Kafka answers one: an incremental fetch keeps its session (its changes are
        taken, and the partitions it did not get are answered next time); a full fetch opens
        none, so the session made for it goes."""
        if context.incremental:
            return context.session_id
        if context.session is not None:
            self.sessions.pop(context.session.id, None)
            context.session, context.session_id = None, INVALID_SESSION_ID
        return INVALID_SESSION_ID

    def _create(self, size: int, privileged: bool, now_ms: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots:
            victim = self._evictable(size, privileged, now_ms)
            if victim is None:
                return None
            del self.sessions[victim]
            self.evictions += 1
        session_id = random.randint(1, 2**31 - 1)
        while session_id in self.sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = self.sessions[session_id] = FetchSession(session_id, privileged, next_epoch(INITIAL_EPOCH), now_ms)
        return session

    def _evictable(self, size: int, privileged: bool, now_ms: int) -> int | None:
        oldest = next(iter(self.sessions.values()))
        if now_ms - oldest.last_used_ms >= self.eviction_ms:
            return oldest.id
        consumers = [s for s in self.sessions.values() if not s.privileged]
        if not consumers:
            return None
        smallest = min(consumers, key=lambda s: (len(s.partitions), s.last_used_ms))
        if privileged or len(smallest.partitions) < size:
            return smallest.id
        return None


def _update(session: FetchSession, plan, last_fetched, log_starts, forgotten, topic_ids) -> None:
    partitions = session.partitions
    for topic, index, offset, max_bytes, leader_epoch in plan:
        key = (topic, index)
        fetched = last_fetched.get(key, -1) if last_fetched else -1
        start = log_starts.get(key, -1) if log_starts else -1
        part = partitions.get(key)
        if part is None:
            partitions[key] = CachedPartition(offset, max_bytes, leader_epoch, fetched, start)
        else:
            part.fetch_offset, part.max_bytes, part.leader_epoch = offset, max_bytes, leader_epoch
            part.last_fetched_epoch, part.log_start = fetched, start
    for key in forgotten:
        partitions.pop(key, None)
    if topic_ids:
        session.topic_ids.update(topic_ids)
