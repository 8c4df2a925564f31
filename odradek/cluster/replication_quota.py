"""Replication throttles (Kafka's ReplicationQuotaManager), for reassignments that must not
starve clients.

Two quotas per broker, in bytes per second, set as dynamic broker configs (IncrementalAlterConfigs
on the BROKER resource, or ZooKeeper's ``/config/brokers/<id>``):

- ``leader.replication.throttled.rate``: what this broker, as leader, sends to followers of its
  throttled replicas. Over the quota, a follower fetch gets no records for those partitions
  (their bytes also do not count toward the fetch's ``min_bytes``, so the follower waits
  ``replica.fetch.wait.max.ms`` before asking again).
- ``follower.replication.throttled.rate``: what this broker's fetchers ask for throttled
  replicas. Over the quota, the fetcher leaves those partitions out of its next fetch.

Which replicas are throttled is a topic config: ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas``, lists of ``partition:broker`` (or ``*`` for every
replica of the topic); a broker throttles partition ``p`` when ``p:<its id>`` is listed.

As in Kafka, only replicas that are out of sync are held back (throttling one in the ISR would
make it drop out and thrash the ISR): the leader skips followers in the partition's ISR; the
follower skips partitions it has caught up with (its log end reached the leader's high watermark
in the last fetch). The bytes of every throttled partition count against the quota.

The rate is measured as Kafka's ``Rate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``: the bytes of the samples kept, divided by the time
they span but never less than ``num - 1`` windows, so the first second of a move is not judged
on its own.
"""

from __future__ import annotations

import time
from collections import deque

UNLIMITED = 2**63 - 1  # Kafka's Long.MAX_VALUE: no throttle
ALL_REPLICAS = "*"


class ReplicationQuota:
    """One side's quota (leader or follower) on one broker."""

    def __init__(self, broker_id: int, window_num: int = 11, window_seconds: float = 1.0):
        self.broker_id = broker_id
        self.window_num = max(1, window_num)
        self.window_seconds = window_seconds
        self.rate = UNLIMITED
        self._samples: deque[list] = deque()  # [window start (monotonic s), bytes]
        self._parsed: dict[tuple[str, ...], object] = {}  # throttled-replicas value -> partitions

    @property
    def limited(self) -> bool:
        return self.rate < UNLIMITED

    def set_rate(self, rate: int) -> None:
        self.rate = rate

    # -- which replicas --------------------------------------------------------------------

    def throttled(self, replicas: tuple[str, ...], index: int) -> bool:
        """Whether partition ``index`` of a topic whose throttled-replicas config is
        ``replicas`` is throttled on this broker."""
        if not replicas:
            return False
        mine = self._parsed.get(replicas)
        if mine is None:
            mine = self._parsed[replicas] = self._parse(replicas)
        return mine is ALL_REPLICAS or index in mine  # type: ignore[operator]

    def _parse(self, replicas: tuple[str, ...]):
        if any(r.strip() == ALL_REPLICAS for r in replicas):
            return ALL_REPLICAS
        mine = set()
        for item in replicas:
            partition, _, broker = item.strip().partition(":")
            if broker.strip() == str(self.broker_id):
                mine.add(int(partition))
        return frozenset(mine)

    # -- the rate --------------------------------------------------------------------------

    def record(self, nbytes: int, now: float | None = None) -> None:
        if nbytes <= 0:
            return
        now = time.monotonic() if now is None else now
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= self.window_seconds:
            self._samples.append([now, 0])
            while len(self._samples) > self.window_num:
                self._samples.popleft()
        self._samples[-1][1] += nbytes

    def measured(self, now: float | None = None) -> float:
        """Bytes per second over the samples kept."""
        now = time.monotonic() if now is None else now
        self._purge(now)
        if not self._samples:
            return 0.0
        total = sum(s[1] for s in self._samples)
        elapsed = now - self._samples[0][0]
        full = int(elapsed // self.window_seconds)
        if full < self.window_num - 1:  # judge a young measurement over num - 1 windows
            elapsed += (self.window_num - 1 - full) * self.window_seconds
        return total / elapsed if elapsed > 0 else float(total)

    def exceeded(self, now: float | None = None) -> bool:
        return self.limited and self.measured(now) > self.rate

    def _purge(self, now: float) -> None:
        horizon = now - self.window_num * self.window_seconds
        while self._samples and self._samples[0][0] + self.window_seconds <= horizon:
            self._samples.popleft()


class LeaderThrottle(ReplicationQuota):
    """``leader.replication.throttled.rate``: the hook the leader's follower fetches call."""

    def apply(self, partitions, replica_id: int, topics):
        """``topics`` (a follower fetch's read: [(topic, [(index, error, hw, lso, log start,
        aborted, records), ...])]) with the records of throttled, out-of-sync partitions
        withheld while the quota is exceeded. Returns (topics, bytes withheld, withheld keys);
        the bytes of the throttled partitions sent are recorded."""
        exceeded = self.exceeded()
        sent = withheld = 0
        held: set = set()
        out = []
        for name, entries in topics:
            kept = entries
            for i, entry in enumerate(entries):
                partition = partitions.get((name, entry[0]))
                if partition is None or not self.throttled(
                    partition.log_config.leader_replication_throttled_replicas, entry[0]
                ):
                    continue
                if exceeded and replica_id not in partition.state.isr:
                    if kept is entries:
                        kept = list(entries)
                    kept[i] = (*entry[:6], b"")
                    withheld += len(entry[6])
                    held.add((name, entry[0]))
                else:
                    sent += len(entry[6])
            out.append((name, kept))
        self.record(sent)
        return out, withheld, held


class FollowerThrottle(ReplicationQuota):
    """``follower.replication.throttled.rate``: the hook this broker's replica fetchers call."""

    def __init__(self, broker_id: int, window_num: int = 11, window_seconds: float = 1.0):
        super().__init__(broker_id, window_num, window_seconds)
        self._caught_up: set[tuple[str, int]] = set()

    def _is_throttled(self, partition) -> bool:
        return self.throttled(partition.log_config.follower_replication_throttled_replicas, partition.index)

    def holds_back(self, partition) -> bool:
        """Leave ``partition`` out of the next fetch: throttled, not caught up, quota exceeded."""
        if not self.limited or not self._is_throttled(partition):
            return False
        return (partition.topic, partition.index) not in self._caught_up and self.exceeded()

    def fetched(self, partition, nbytes: int, leader_high_watermark: int) -> None:
        """A fetch answered ``nbytes`` of records for ``partition``, now appended."""
        if not self.limited:
            return
        key = (partition.topic, partition.index)
        if partition.log_end_offset >= leader_high_watermark:
            self._caught_up.add(key)
        else:
            self._caught_up.discard(key)
        if nbytes and self._is_throttled(partition):
            self.record(nbytes)


class ReplicationQuotas:
    """The leader and follower quotas of one broker, following its dynamic configs."""

    def __init__(self, broker_id: int, get):
        num, size = get("replication.quota.window.num"), get("replication.quota.window.size.seconds")
        self.leader = LeaderThrottle(broker_id, num, size)
        self.follower = FollowerThrottle(broker_id, num, size)
        self.update(get)

    def update(self, get) -> None:
        """Take the rates from the configuration in force (``get`` reads a broker key)."""
        self.leader.set_rate(get("leader.replication.throttled.rate"))
        self.follower.set_rate(get("follower.replication.throttled.rate"))
