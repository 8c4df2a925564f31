"""The counters the broker's components own (Kafka's BrokerTopicMetrics, RequestMetrics, ...).

Each component keeps its own object from here and increments plain integers on its path:

* ``BrokerTopicMetrics`` (the replica manager): per topic, records and bytes in (appends),
  bytes out (fetch responses to consumers), replication bytes in (a follower's appends of
  its leader's batches) and out (fetch responses to followers), produce and fetch requests
  and their failures. A partition
  holds its topic's ``TopicCounters`` so an append adds to it without a lookup. The
  all-topics figures are the sum over topics, taken when scraped; a deleted topic's counts
  move into ``retired`` so the totals never go backwards.
* ``RequestMetrics`` (the network server): a histogram of each API's total time, from
  the request's frame being complete to its response being queued.
* ``ReplicaMetrics`` (the replica manager): ISR shrinks and expands. In single-node mode the
  ISR never changes, so both stay 0 until replication increments them
  (``Partition.maybe_shrink_isr``/``maybe_expand_isr`` in cluster mode).

Everything else the exporter shows (log sizes, under-replicated and offline partitions,
purgatory sizes, connections, group lag) is read from the components' state at scrape
time. Called only from the event loop.
"""

from __future__ import annotations

from bisect import bisect_left

from odradek.metrics import Histogram


class TopicCounters:
    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "produce_requests",
        "fetch_requests",
        "failed_produce_requests",
        "failed_fetch_requests",
        "replication_bytes_in",
        "replication_bytes_out",
    )

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def add(self, other: TopicCounters) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicMetrics:
    def __init__(self):
        self.topics: dict[str, TopicCounters] = {}
        self.retired = TopicCounters()

    def for_topic(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    def remove_topic(self, topic: str) -> None:
        counters = self.topics.pop(topic, None)
        if counters is not None:
            self.retired.add(counters)

    def all_topics(self) -> TopicCounters:
        total = TopicCounters()
        total.add(self.retired)
        for counters in self.topics.values():
            total.add(counters)
        return total


class RequestMetrics:
    """Per API key, a histogram of the requests' total time (Kafka's ``TotalTimeMs``)."""

    def __init__(self):
        self.by_api: dict[int, Histogram] = {}

    def observe(self, api_key: int, elapsed_ns: int) -> None:
        histogram = self.by_api.get(api_key)
        if histogram is None:
            histogram = self.by_api[api_key] = Histogram()
        # Histogram.observe_ns, inlined: this runs once per request.
        histogram.counts[bisect_left(histogram.bounds_ns, elapsed_ns)] += 1
        histogram.sum_ns += elapsed_ns
        histogram.count += 1


class ReplicaMetrics:
    __slots__ = ("isr_shrinks", "isr_expands")

    def __init__(self):
        self.isr_shrinks = 0
        self.isr_expands = 0
