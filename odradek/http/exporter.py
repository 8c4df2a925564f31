"""``/metrics``: the components' counters in Prometheus' text format, rendered when scraped.

Names follow Kafka's JMX metrics as the Prometheus JMX exporter's usual Kafka rules
render them (``kafka.server<type=BrokerTopicMetrics, name=MessagesInPerSec, topic=t>``
→ ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``), so dashboards and
alerts written for Kafka keep working; the lag families are named as kafka-exporter
names them (``kafka_consumergroup_lag{consumergroup,topic,partition}``). Each family is
listed with its source in docs/console.md. Nothing is computed between scrapes.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from odradek.protocol.messages import api_name
from odradek.storage.log import LOG_FLUSH_TIMES

__all__ = ["CONTENT_TYPE_LATEST", "broker_families", "exporter_families", "render"]

_TOPIC_COUNTERS = (
    ("messagesin", "messages_in", "Records appended"),
    ("bytesin", "bytes_in", "Record batch bytes appended"),
    ("bytesout", "bytes_out", "Record batch bytes sent to consumers"),
    ("totalproducerequests", "produce_requests", "Produce requests, per partition written"),
    ("totalfetchrequests", "fetch_requests", "Fetch responses, per topic read"),
    ("failedproducerequests", "failed_produce_requests", "Failed partition appends"),
    ("failedfetchrequests", "failed_fetch_requests", "Partitions a fetch failed to read"),
    ("replicationbytesin", "replication_bytes_in", "Record batch bytes a follower appended from its leaders"),
    ("replicationbytesout", "replication_bytes_out", "Record batch bytes sent to followers"),
)

# Kafka's names for the purgatories (DelayedOperationPurgatory's delayedOperation tag).
_PURGATORY_NAMES = {
    "fetch": "Fetch",
    "produce": "Produce",
    "rebalance": "Rebalance",
    "heartbeat": "Heartbeat",
}


def request_name(api_key: int) -> str:
    """Kafka's request name, as RequestMetrics tags it: ``list_offsets`` → ``ListOffsets``."""
    return "".join(part.capitalize() for part in api_name(api_key).split("_"))


def _histogram(name: str, doc: str, labels: list[str]):
    return HistogramMetricFamily(name, doc, labels=labels)


def _add_histogram(family, labels: list[str], histogram) -> None:
    cumulative, total_ms, _ = histogram.snapshot()
    buckets = [("+Inf" if bound == float("inf") else repr(float(bound)), n) for bound, n in cumulative]
    family.add_metric(labels, buckets, total_ms)


def broker_families(broker, http_server=None) -> list:
    """The broker's own metric families (everything but the kafka-exporter ones)."""
    replicas = broker.replica_manager
    image = broker.image
    node = broker.node_id
    out = []

    # kafka.server:type=BrokerTopicMetrics
    per_topic = sorted(replicas.topic_metrics.topics.items())
    totals = replicas.topic_metrics.all_topics()
    for short, attr, doc in _TOPIC_COUNTERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
        family.add_metric([], getattr(totals, attr))
        for topic, counters in per_topic:
            family.add_metric([topic], getattr(counters, attr))
        out.append(family)

    # kafka.network:type=RequestMetrics
    times = _histogram(
        "kafka_network_requestmetrics_totaltimems",
        "Total time of requests, in milliseconds, from a complete frame to a queued response",
        ["request"],
    )
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests", "Requests answered", labels=["request"]
    )
    for api_key, histogram in sorted(broker.network.request_metrics.by_api.items()):
        name = request_name(api_key)
        _add_histogram(times, [name], histogram)
        requests.add_metric([name], histogram.count)
    out += [times, requests]

    # kafka.server:type=ReplicaManager
    partitions = replicas.partitions.values()
    leaders = [p for p in partitions if p.is_leader]
    under = sum(1 for p in leaders if len(p.state.isr) < len(p.state.replicas))
    under_min_isr = sum(1 for p in leaders if len(p.state.isr) < p.log_config.min_insync_replicas)
    out += [
        GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount", "Partitions on this broker", value=len(partitions)
        ),
        GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount", "Partitions this broker leads", value=len(leaders)
        ),
        GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replica set",
            value=under,
        ),
        GaugeMetricFamily(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Led partitions with fewer in-sync replicas than min.insync.replicas",
            value=under_min_isr,
        ),
        CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks",
            value=replicas.replica_metrics.isr_shrinks,
        ),
        CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expands",
            value=replicas.replica_metrics.isr_expands,
        ),
    ]

    # kafka.server:type=ReplicaFetcherManager and FetcherLagMetrics (a follower's fetchers)
    fetchers = replicas.fetchers
    out.append(
        GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest lag, in records, of a partition this broker follows behind its leader's high watermark",
            labels=["clientId"],
        )
    )
    out[-1].add_metric(["Replica"], fetchers.max_lag() if fetchers is not None else 0)
    lag = GaugeMetricFamily(
        "kafka_server_fetcherlagmetrics_consumerlag",
        "Records a followed partition is behind its leader's high watermark, after its last fetch",
        labels=["clientId", "topic", "partition"],
    )
    if fetchers is not None:
        for client_id, topic, index, records in sorted(fetchers.lags()):
            lag.add_metric([client_id, topic, str(index)], records)
    out.append(lag)

    # kafka.server:type=FetchSessionCache (KIP-227)
    sessions = broker.fetch_sessions
    out += [
        GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "Incremental fetch sessions kept",
            value=len(sessions.sessions),
        ),
        GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions in the incremental fetch sessions kept",
            value=sessions.partitions_cached,
        ),
        CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Fetch sessions evicted to make room for others",
            value=sessions.evictions,
        ),
    ]

    # kafka.controller:type=KafkaController (the figures are the active controller's)
    active = image.controller_id == node
    offline = global_partitions = 0
    if active:
        for topic in image.topics.values():
            for state in topic.partitions.values():
                global_partitions += 1
                if state.leader not in image.brokers:
                    offline += 1
    out += [
        GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 elsewhere",
            value=1 if active else 0,
        ),
        GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (reported by the active controller)",
            value=offline,
        ),
        GaugeMetricFamily(
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster (reported by the active controller)",
            value=len(image.topics) if active else 0,
        ),
        GaugeMetricFamily(
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster (reported by the active controller)",
            value=global_partitions,
        ),
    ]

    # kafka.log:type=Log, per partition; kafka.log:type=LogFlushStats
    logs = {
        "size": ("Bytes of the partition's segments", lambda log: log.size),
        "numlogsegments": ("Segments of the partition", lambda log: len(log.segments)),
        "logstartoffset": ("The partition's log start offset", lambda log: log.log_start_offset),
        "logendoffset": ("The partition's log end offset", lambda log: log.log_end_offset),
    }
    items = sorted(replicas.partitions.items())
    for short, (doc, read) in logs.items():
        family = GaugeMetricFamily(f"kafka_log_log_{short}", doc, labels=["topic", "partition"])
        for (topic, index), partition in items:
            family.add_metric([topic, str(index)], read(partition.log))
        out.append(family)
    flush = _histogram(
        "kafka_log_logflushstats_logflushrateandtimems", "Time of log flushes (fsync), in milliseconds", []
    )
    _add_histogram(flush, [], LOG_FLUSH_TIMES)
    out.append(flush)

    # kafka.server:type=socket-server-metrics
    connections = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count",
        "Open Kafka connections per listener",
        labels=["listener", "network_processor"],
    )
    per_listener = dict.fromkeys(broker.network.bound, 0)
    for conn in list(broker.network.connections):
        per_listener[conn.listener] = per_listener.get(conn.listener, 0) + 1
    for listener, count in sorted(per_listener.items()):
        connections.add_metric([listener, "0"], count)
    out.append(connections)

    # kafka.server:type=DelayedOperationPurgatory
    size = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Watch registrations in the purgatory",
        labels=["delayedOperation"],
    )
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Operations waiting in the purgatory",
        labels=["delayedOperation"],
    )
    coordinator = broker.group_coordinator
    for purgatory in (broker.fetch_purgatory, *coordinator.purgatories):
        name = _PURGATORY_NAMES.get(purgatory.name, purgatory.name.capitalize())
        size.add_metric([name], purgatory.watched)
        delayed.add_metric([name], purgatory.delayed)
    out += [size, delayed]

    # kafka.coordinator.group:type=GroupMetadataManager
    group_count, offset_count = coordinator.counts()
    out += [
        GaugeMetricFamily(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups this coordinator holds",
            value=group_count,
        ),
        GaugeMetricFamily(
            "kafka_coordinator_group_groupmetadatamanager_numoffsets",
            "Committed offsets this coordinator holds",
            value=offset_count,
        ),
    ]

    if http_server is not None:
        out += http_families(http_server)
    return out


def http_families(http_server) -> list:
    return [
        GaugeMetricFamily(
            "odradek_http_connections", "Open HTTP connections", value=len(http_server.connections)
        ),
        CounterMetricFamily(
            "odradek_http_connections_evicted",
            "HTTP connections closed because http.max.connections was reached",
            value=http_server.evicted,
        ),
    ]


def exporter_families(snapshot: dict) -> list:
    """kafka-exporter's families from a view's ``exporter_snapshot()``."""
    brokers = GaugeMetricFamily("kafka_brokers", "Brokers in the cluster", value=snapshot["brokers"])
    tp = ["topic", "partition"]
    partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of the topic", labels=["topic"])
    current = GaugeMetricFamily(
        "kafka_topic_partition_current_offset", "High watermark of the partition", labels=tp
    )
    oldest = GaugeMetricFamily(
        "kafka_topic_partition_oldest_offset", "Log start offset of the partition", labels=tp
    )
    leader = GaugeMetricFamily("kafka_topic_partition_leader", "Leader broker of the partition", labels=tp)
    replicas = GaugeMetricFamily("kafka_topic_partition_replicas", "Replicas of the partition", labels=tp)
    in_sync = GaugeMetricFamily(
        "kafka_topic_partition_in_sync_replica", "In-sync replicas of the partition", labels=tp
    )
    under = GaugeMetricFamily(
        "kafka_topic_partition_under_replicated_partition",
        "1 if the partition is under-replicated",
        labels=tp,
    )
    counts: dict[str, int] = {}
    for topic, index, lead, n_replicas, n_isr, start, end in sorted(snapshot["partitions"]):
        labels = [topic, str(index)]
        counts[topic] = counts.get(topic, 0) + 1
        current.add_metric(labels, end)
        oldest.add_metric(labels, start)
        leader.add_metric(labels, lead)
        replicas.add_metric(labels, n_replicas)
        in_sync.add_metric(labels, n_isr)
        under.add_metric(labels, 1 if n_isr < n_replicas else 0)
    for topic, n in sorted(counts.items()):
        partitions.add_metric([topic], n)

    gtp = ["consumergroup", "topic", "partition"]
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of the group", labels=["consumergroup"]
    )
    committed = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "Committed offset of the group", labels=gtp
    )
    committed_sum = GaugeMetricFamily(
        "kafka_consumergroup_current_offset_sum",
        "Sum of the group's committed offsets",
        labels=["consumergroup", "topic"],
    )
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset", labels=gtp)
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum",
        "The group's lag over the topic's partitions",
        labels=["consumergroup", "topic"],
    )
    for group, n_members, offsets, ends in sorted(snapshot["groups"], key=lambda g: g[0]):
        members.add_metric([group], n_members)
        sums: dict[str, list[int]] = {}
        for (topic, index), offset in sorted(offsets.items()):
            end = ends.get((topic, index))
            committed.add_metric([group, topic, str(index)], offset)
            sums.setdefault(topic, [0, 0])[0] += offset
            if end is not None and end >= 0:
                behind = max(end - offset, 0)
                lag.add_metric([group, topic, str(index)], behind)
                sums[topic][1] += behind
        for topic, (offset_sum, lag_total) in sorted(sums.items()):
            committed_sum.add_metric([group, topic], offset_sum)
            lag_sum.add_metric([group, topic], lag_total)
    return [
        brokers,
        partitions,
        current,
        oldest,
        leader,
        replicas,
        in_sync,
        under,
        members,
        committed,
        committed_sum,
        lag,
        lag_sum,
    ]


class _Families:
    """The registry interface ``generate_latest`` reads: ``collect()``."""

    def __init__(self, families: list):
        self.families = families

    def collect(self):
        return iter(self.families)


def render(families: list) -> bytes:
    from prometheus_client import process_collector

    process = list(process_collector.ProcessCollector(registry=None).collect())
    return generate_latest(_Families(families + process))
