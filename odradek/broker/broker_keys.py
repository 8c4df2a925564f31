"""The table of broker keys: every ``server.properties`` key Kafka's broker knows.

One ``ConfigDef`` per line (``odradek.config_def``): name, type, Kafka's default, check,
documentation and a note for keys Odradek accepts without effect (``_INFO``: validated and
reported, e.g. thread counts, Odradek running on one event loop; ``KRAFT``: accepted and
ignored with a warning; ``DEPRECATED``). Adding a key is adding a line; ``BrokerConfig`` reads
it by name (``config.get("zookeeper.session.timeout.ms")``). Topic-level keys live in
``odradek.storage.log_config.TOPIC_CONFIGS``; their broker-wide defaults (``log.*``, ...) are
here, as in Kafka.

Also here: the key prefixes kept as free-form strings (``listener.name.*`` is in
``listeners``), the keys that belong elsewhere, and the broker keys that are one setting in
different units (``BROKER_SYNONYMS``, DescribeConfigs' synonyms).
"""

from __future__ import annotations

import re

from odradek.broker.listeners import SECURITY_PROTOCOLS, HttpListeners
from odradek.config_def import (
    BOOL,
    CLASS,
    DEPRECATED,
    DOUBLE,
    DOUBLE_MAX,
    INFORMATIONAL,
    INT,
    INT_MAX,
    KRAFT,
    LIST,
    LONG,
    LONG_MAX,
    PASSWORD,
    SHORT,
    STR,
    AtLeast,
    Between,
    ConfigDef,
    Either,
    InvalidValue,
    ListOf,
    NonEmptyUnique,
    OneOf,
    Validator,
    config_table,
)
from odradek.storage.log_config import COMPRESSION_TYPES

__all__ = [
    "BROKER_CONFIGS",
    "BROKER_SYNONYMS",
    "FREE_PREFIXES",
    "NOT_BROKER_KEYS",
    "SECURITY_PREFIXES",
    "looks_secret",
    "parse_host_counts",
]


class HostCounts(Validator):
    """``host:count,...`` (``max.connections.per.ip.overrides``); the string is kept."""

    description = "comma-separated host:count pairs, e.g. 10.0.0.7:50,client.example.com:10"

    def __call__(self, value):
        if value is None:
            return value
        try:
            parse_host_counts(value)
        except ValueError:
            raise InvalidValue(self.description) from None
        return value


_HOST_RE = re.compile(r"[A-Za-z0-9._%:\-]+")


def parse_host_counts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not _HOST_RE.fullmatch(host) or not count.strip().isdigit():
            raise ValueError(item)
        out[host] = int(count)
    return out


_INFO = INFORMATIONAL

# fmt: off
BROKER_CONFIGS: dict[str, ConfigDef] = config_table(
    # identity and mode
    ConfigDef("node.id", INT, -1, AtLeast(-1), "Id of this broker; same as broker.id. Unset: 0 on a single node."),
    ConfigDef("broker.id", INT, -1, AtLeast(-1), "Id of this broker; same as node.id. Unset: 0 on a single node."),
    ConfigDef("broker.id.generation.enable", BOOL, True, None, "In cluster mode, generate an id when none is set."),
    ConfigDef("reserved.broker.max.id", INT, 1000, AtLeast(0), "Highest id an operator may configure in cluster mode."),
    ConfigDef("broker.rack", STR, None, None, "Rack of this broker, for rack-aware replica placement."),
    ConfigDef("zookeeper.connect", STR, None, None, "ZooKeeper connection string (host:port,...[/chroot]); enables cluster mode."),
    ConfigDef("zookeeper.session.timeout.ms", INT, 18000, AtLeast(1), "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", INT, None, AtLeast(1), "Time to wait for a ZooKeeper connection; default: the session timeout."),
    ConfigDef("zookeeper.max.in.flight.requests", INT, 10, AtLeast(1), "Unacknowledged ZooKeeper requests before blocking (Odradek's ZooKeeper client, kazoo, does not bound them).", _INFO),
    ConfigDef("zookeeper.set.acl", BOOL, False, None, "Use secure ACLs on the znodes this broker creates (Odradek creates them with ZooKeeper's open ACL; secure the ensemble at the network level).", _INFO),
    ConfigDef("controller.socket.timeout.ms", INT, 30000, None, "Socket timeout of controller-to-broker channels."),
    ConfigDef("inter.broker.protocol.version", STR, None, None, "Inter-broker protocol version; below 2.7 replica fetchers send Fetch v11 and truncate with OffsetForLeaderEpoch, as Kafka's did before KIP-595 (unset: the newest)."),
    # listeners
    ConfigDef("listeners", LIST, ["PLAINTEXT://127.0.0.1:9092"], NonEmptyUnique(), "Listeners as NAME://host:port; an empty host binds every interface, port 0 an ephemeral port."),
    ConfigDef("advertised.listeners", LIST, None, None, "Addresses given to clients, as NAME://host:port; default: listeners."),
    ConfigDef("listener.security.protocol.map", STR, None, None, "Listener name to security protocol, as NAME:PROTOCOL,...; default maps each protocol to itself."),
    ConfigDef("inter.broker.listener.name", STR, None, None, "Listener used between brokers."),
    ConfigDef("security.inter.broker.protocol", STR, "PLAINTEXT", OneOf(*SECURITY_PROTOCOLS), "Security protocol between brokers, when inter.broker.listener.name is unset."),
    # Odradek's defaults are -1, not Kafka's 102400/102400/65536: a fixed SO_SNDBUF/SO_RCVBUF turns
    # off Linux's buffer autotuning, and on loopback (benchmarks/broker_bench.py --quick, two runs
    # each way, noisy) the raw Fetch rows ran 15-25 % slower with Kafka's values, and
    # benchmarks/replication_bench.py's RF=1 acks=all produce 640-815 against 1,056-1,125 MB/s.
    ConfigDef("socket.send.buffer.bytes", INT, -1, AtLeast(-1), "SO_SNDBUF of accepted sockets; -1 (Odradek's default; Kafka's is 102400) keeps the OS's autotuned buffer, which a fixed size turns off on Linux (Kafka's three socket buffer defaults together cost 15-25 % of fetch throughput on loopback)."),
    ConfigDef("socket.receive.buffer.bytes", INT, -1, AtLeast(-1), "SO_RCVBUF of accepted sockets (set on the listening socket); -1 (Odradek's default; Kafka's is 102400) keeps the OS's autotuned buffer, which a fixed size turns off on Linux (Kafka's three socket buffer defaults together cost 15-25 % of fetch and 20-40 % of acks=all produce throughput on loopback)."),
    ConfigDef("socket.request.max.bytes", INT, 104857600, AtLeast(1), "Largest request accepted, in bytes."),
    ConfigDef("socket.listen.backlog.size", INT, 50, AtLeast(1), "Pending connections the listen socket queues."),
    ConfigDef("max.connections", INT, INT_MAX, AtLeast(0), "Most connections open at once."),
    ConfigDef("max.connections.per.ip", INT, INT_MAX, AtLeast(0), "Most connections open at once from one address."),
    ConfigDef("max.connections.per.ip.overrides", STR, "", HostCounts(), "Per-address limits, as host:count,...; host names are resolved at start."),
    ConfigDef("max.connection.creation.rate", INT, INT_MAX, AtLeast(0), "Most new connections per second."),
    ConfigDef("connections.max.idle.ms", LONG, 600000, None, "Close connections idle for longer than this."),
    ConfigDef("connection.failed.authentication.delay.ms", INT, 100, AtLeast(0), "Delay before closing a connection that failed to authenticate."),
    ConfigDef("connections.max.reauth.ms", LONG, 0, None, "Most time a SASL session may live before re-authenticating; 0 disables."),
    ConfigDef("queued.max.requests", INT, 500, AtLeast(1), "Requests queued for the handler threads (Odradek handles one request per connection at a time).", _INFO),
    ConfigDef("queued.max.request.bytes", LONG, None, None, "Bytes of large requests being received, all connections together, before connections starting another wait; -1: no limit; unset: 1/256 of the machine's (or container's) memory, at least socket.request.max.bytes (logged at start)."),
    ConfigDef("num.network.threads", INT, 3, AtLeast(1), "Network threads.", _INFO),
    ConfigDef("num.io.threads", INT, 8, AtLeast(1), "Request handler threads.", _INFO),
    ConfigDef("background.threads", INT, 10, AtLeast(1), "Background task threads.", _INFO),
    ConfigDef("request.timeout.ms", INT, 30000, None, "Timeout of requests this broker sends."),
    ConfigDef("early.start.listeners", LIST, None, None, "Listeners started before the authorizer is ready.", _INFO),
    # HTTP: metrics, health, JSON API and console (Odradek's own keys; odradek/http/)
    ConfigDef("http.listeners", LIST, ["http://127.0.0.1:9644"], HttpListeners(), "Where /metrics, /healthz, /readyz, the JSON API (/v1) and the console are served, as http://host:port; port 0 picks a free port (logged); empty turns HTTP off."),
    ConfigDef("console.connect.urls", LIST, [], None, "Kafka Connect REST URLs (comma-separated, e.g. http://127.0.0.1:8083) whose connectors the console's Connectors page shows, read by the broker; empty: the page says how to set this. DescribeConfigs shows this value, so give workers that ask for a password to `odradek console --connect-url` instead."),
    # The schema registry started beside the broker by `odradek server` (odradek/cli/registry_beside.py)
    ConfigDef("schema.registry.listeners", LIST, ["http://127.0.0.1:8081"], HttpListeners(https=True), "Where `odradek server` serves a schema registry (Confluent's REST API) beside the broker, as http://host:port or https://host:port (TLS with the broker's ssl.keystore.* keys); port 0 picks a free port (logged); empty turns it off. It is a client of the broker's first PLAINTEXT listener, else of the inter-broker listener with its credentials; on a broker with SASL listeners it asks HTTP basic credentials of the broker's users, and with an authorizer a write needs Write on the topic named like the subject (docs/schema-registry.md)."),
    ConfigDef("http.max.connections", INT, 1000, AtLeast(1), "Most HTTP connections open at once; a new one beyond this closes the oldest."),
    # log directories and segments
    ConfigDef("log.dirs", LIST, None, NonEmptyUnique(), "Directories holding the logs; default: log.dir."),
    ConfigDef("log.dir", LIST, ["./odradek-data"], NonEmptyUnique(), "Directory holding the logs, when log.dirs is unset."),
    ConfigDef("num.partitions", INT, 1, AtLeast(1), "Partitions of an auto-created topic."),
    ConfigDef("default.replication.factor", INT, 1, AtLeast(1), "Replication factor of an auto-created topic."),
    ConfigDef("auto.create.topics.enable", BOOL, True, None, "Create a topic when a client asks for metadata of one that does not exist."),
    ConfigDef("auto.create.topics.max.per.request", INT, 100, AtLeast(1), "Most topics one Metadata request may auto-create; the others get THROTTLING_QUOTA_EXCEEDED (Odradek's own key)."),
    ConfigDef("delete.topic.enable", BOOL, True, None, "Allow topics to be deleted."),
    ConfigDef("max.partitions.per.request", INT, 10000, AtLeast(1), "Most partitions one CreateTopics or CreatePartitions request may create (Kafka's controller caps this at 10000)."),
    ConfigDef("max.broker.partitions", INT, INT_MAX, AtLeast(1), "Most partition replicas this broker may host (KIP-578); the file-descriptor limit (RLIMIT_NOFILE, 3 per partition in use) caps it too."),
    ConfigDef("num.recovery.threads.per.data.dir", INT, 1, AtLeast(1), "Threads per log dir for recovery and shutdown flush.", _INFO),
    ConfigDef("log.segment.bytes", INT, 1073741824, AtLeast(14), "Largest size of a log segment file."),
    ConfigDef("log.roll.ms", LONG, None, AtLeast(1), "Roll a new segment after this long; default: log.roll.hours."),
    ConfigDef("log.roll.hours", INT, 168, AtLeast(1), "Roll a new segment after this many hours (second to log.roll.ms)."),
    ConfigDef("log.roll.jitter.ms", LONG, None, AtLeast(0), "Most random jitter subtracted from the roll time; default: log.roll.jitter.hours."),
    ConfigDef("log.roll.jitter.hours", INT, 0, AtLeast(0), "Roll jitter in hours (second to log.roll.jitter.ms)."),
    ConfigDef("log.index.interval.bytes", INT, 4096, AtLeast(0), "Bytes of log between offset index entries."),
    ConfigDef("log.index.size.max.bytes", INT, 10485760, AtLeast(4), "Largest size of an offset or time index file."),
    ConfigDef("log.preallocate", BOOL, False, None, "Preallocate segment files at their full size (Odradek's segment files grow as they are written).", _INFO),
    ConfigDef("log.segment.delete.delay.ms", LONG, 60000, AtLeast(0), "Delay between scheduling a file for deletion and deleting it."),
    ConfigDef("log.initial.task.delay.ms", LONG, 30000, AtLeast(0), "Delay before the first retention and flush checks after start."),
    # flushing
    ConfigDef("log.flush.interval.messages", LONG, LONG_MAX, AtLeast(1), "Messages appended to a partition before it is fsynced."),
    ConfigDef("log.flush.interval.ms", LONG, None, AtLeast(0), "Most time a message waits in memory before fsync; default: log.flush.scheduler.interval.ms."),
    ConfigDef("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, "How often the flusher checks whether a log needs an fsync."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0), "How often the recovery point checkpoint is written."),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0), "How often the log start offset checkpoint is written."),
    # retention and cleaning
    ConfigDef("log.retention.ms", LONG, None, None, "Keep a segment this long; -1: forever. Default: log.retention.minutes."),
    ConfigDef("log.retention.minutes", INT, None, None, "Retention in minutes (second to log.retention.ms). Default: log.retention.hours."),
    ConfigDef("log.retention.hours", INT, 168, None, "Retention in hours (third to log.retention.ms)."),
    ConfigDef("log.retention.bytes", LONG, -1, None, "Largest size of a partition's log before old segments go; -1: no limit."),
    ConfigDef("log.retention.check.interval.ms", LONG, 300000, AtLeast(1), "How often logs are checked for segments to delete."),
    ConfigDef("log.cleanup.policy", LIST, ["delete"], ListOf("compact", "delete"), "Default cleanup policy: delete, compact or both."),
    ConfigDef("log.cleaner.enable", BOOL, True, None, "Run the log cleaner (needed by compacted topics such as __consumer_offsets)."),
    ConfigDef("log.cleaner.threads", INT, 1, AtLeast(0), "Log cleaner threads."),
    ConfigDef("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, "Memory for the cleaner's key map, over all cleaner threads."),
    ConfigDef("log.cleaner.io.buffer.size", INT, 524288, AtLeast(0), "Memory for cleaner I/O buffers, over all cleaner threads."),
    ConfigDef("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, "Fill ratio of the cleaner's key map."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, None, "Cleaner read plus write throughput limit."),
    ConfigDef("log.cleaner.backoff.ms", LONG, 15000, AtLeast(0), "Cleaner sleep when no log needs cleaning."),
    ConfigDef("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, Between(0, 1), "Least dirty-to-total ratio of a log worth cleaning."),
    ConfigDef("log.cleaner.delete.retention.ms", LONG, 86400000, AtLeast(0), "How long tombstones stay in compacted logs."),
    ConfigDef("log.cleaner.min.compaction.lag.ms", LONG, 0, AtLeast(0), "Least age of a message before it can be compacted."),
    ConfigDef("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, AtLeast(1), "Most age of a message before it must be compacted."),
    ConfigDef("log.local.retention.ms", LONG, -2, AtLeast(-2), "Tiered storage: local retention time; -2: log.retention.ms.", _INFO),
    ConfigDef("log.local.retention.bytes", LONG, -2, AtLeast(-2), "Tiered storage: local retention size; -2: log.retention.bytes.", _INFO),
    # messages
    ConfigDef("message.max.bytes", INT, 1048588, AtLeast(0), "Largest record batch accepted, in bytes."),
    ConfigDef("compression.type", STR, "producer", OneOf(*COMPRESSION_TYPES), "Compression of stored batches: producer keeps what the producer sent."),
    ConfigDef("compression.gzip.level", INT, -1, Either(-1, Between(1, 9)), "Gzip level when compression.type is gzip."),
    ConfigDef("compression.lz4.level", INT, 9, Between(1, 17), "LZ4 level when compression.type is lz4."),
    ConfigDef("compression.zstd.level", INT, 3, Between(-131072, 22), "Zstd level when compression.type is zstd."),
    ConfigDef("log.message.timestamp.type", STR, "CreateTime", OneOf("CreateTime", "LogAppendTime"), "Timestamp kept in batches: the producer's (CreateTime) or the broker's (LogAppendTime)."),
    ConfigDef("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, AtLeast(0), "Most difference between a CreateTime timestamp and the broker's clock.", DEPRECATED),
    ConfigDef("log.message.timestamp.before.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the past a CreateTime timestamp may be."),
    ConfigDef("log.message.timestamp.after.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the future a CreateTime timestamp may be."),
    ConfigDef("log.message.format.version", STR, None, None, "Message format version.", DEPRECATED),
    ConfigDef("log.message.downconversion.enable", BOOL, True, None, "Down-convert batches for old fetchers.", DEPRECATED),
    ConfigDef("min.insync.replicas", INT, 1, AtLeast(1), "Replicas that must acknowledge an acks=all write."),
    ConfigDef("unclean.leader.election.enable", BOOL, False, None, "Allow a replica outside the ISR to become leader, losing data."),
    # replication
    ConfigDef("replica.lag.time.max.ms", LONG, 30000, None, "A follower that has not caught up for this long leaves the ISR."),
    ConfigDef("replica.socket.timeout.ms", INT, 30000, None, "Socket timeout of follower fetches."),
    ConfigDef("replica.socket.receive.buffer.bytes", INT, -1, AtLeast(-1), "SO_RCVBUF of follower fetch connections, set before connecting; -1 (Odradek's default; Kafka's is 65536) keeps the OS's autotuned buffer, which a fixed size turns off on Linux."),
    ConfigDef("replica.fetch.max.bytes", INT, 1048576, AtLeast(0), "Bytes a follower asks for per partition."),
    ConfigDef("replica.fetch.min.bytes", INT, 1, None, "Least bytes a follower fetch waits for."),
    ConfigDef("replica.fetch.wait.max.ms", INT, 500, None, "Most time a follower fetch waits."),
    ConfigDef("replica.fetch.backoff.ms", INT, 1000, AtLeast(0), "Follower sleep after a fetch error."),
    ConfigDef("replica.fetch.response.max.bytes", INT, 10485760, AtLeast(0), "Bytes a follower asks for per fetch."),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, "How often high watermarks are checkpointed."),
    ConfigDef("replica.selector.class", CLASS, None, None, "Class choosing the preferred read replica."),
    ConfigDef("num.replica.fetchers", INT, 1, None, "Fetchers per source broker."),
    ConfigDef("num.replica.alter.log.dirs.threads", INT, None, None, "Threads moving replicas between log dirs.", _INFO),
    ConfigDef("fetch.purgatory.purge.interval.requests", INT, 1000, None, "Fetch purgatory purge interval, in requests (Odradek's purgatory drops a completed operation at once).", _INFO),
    ConfigDef("producer.purgatory.purge.interval.requests", INT, 1000, None, "Produce purgatory purge interval, in requests (Odradek's purgatory drops a completed operation at once).", _INFO),
    ConfigDef("delete.records.purgatory.purge.interval.requests", INT, 1, None, "DeleteRecords purgatory purge interval, in requests (Odradek's purgatory drops a completed operation at once).", _INFO),
    ConfigDef("fetch.max.bytes", INT, 57671680, AtLeast(1024), "Most bytes returned by one fetch (not applied yet: a fetch returns up to the max_bytes the request asks for).", _INFO),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, 1000, AtLeast(0), "Incremental fetch sessions kept."),
    ConfigDef("auto.leader.rebalance.enable", BOOL, True, None, "Move leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.per.broker.percentage", INT, 10, None, "Leader imbalance tolerated per broker, in percent."),
    ConfigDef("leader.imbalance.check.interval.seconds", LONG, 300, AtLeast(1), "How often leader balance is checked."),
    ConfigDef("controlled.shutdown.enable", BOOL, True, None, "Move leadership away before shutting down."),
    ConfigDef("controlled.shutdown.max.retries", INT, 3, None, "Controlled shutdown attempts."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, "Wait between controlled shutdown attempts."),
    # group coordinator and offsets
    ConfigDef("offsets.topic.num.partitions", INT, 50, AtLeast(1), "Partitions of __consumer_offsets (do not change after deployment)."),
    ConfigDef("offsets.topic.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __consumer_offsets (capped at the live brokers)."),
    ConfigDef("offsets.topic.segment.bytes", INT, 104857600, AtLeast(1), "Segment size of __consumer_offsets."),
    ConfigDef("offsets.topic.compression.codec", INT, 0, None, "Compression codec id of __consumer_offsets (Odradek writes offset commits uncompressed).", _INFO),
    ConfigDef("offsets.load.buffer.size", INT, 5242880, AtLeast(1), "Read size when loading group metadata."),
    ConfigDef("offsets.commit.timeout.ms", INT, 5000, AtLeast(1), "Most time an offset commit waits for replication."),
    ConfigDef("offsets.commit.required.acks", SHORT, -1, None, "Acks for offset commits.", DEPRECATED),
    ConfigDef("offsets.retention.minutes", INT, 10080, AtLeast(1), "Keep committed offsets of an empty group this long."),
    ConfigDef("offsets.retention.check.interval.ms", LONG, 600000, AtLeast(1), "How often stale offsets are looked for."),
    ConfigDef("offset.metadata.max.bytes", INT, 4096, None, "Largest metadata string of an offset commit."),
    ConfigDef("group.initial.rebalance.delay.ms", INT, 3000, None, "Wait for more members before a new group's first rebalance."),
    ConfigDef("group.min.session.timeout.ms", INT, 6000, None, "Shortest session timeout a member may ask for."),
    ConfigDef("group.max.session.timeout.ms", INT, 1800000, None, "Longest session timeout a member may ask for."),
    ConfigDef("group.max.size", INT, INT_MAX, AtLeast(1), "Most members of a classic group."),
    ConfigDef("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer", "share"], ListOf("classic", "consumer", "share", "streams"), "Rebalance protocols enabled: classic (JoinGroup/SyncGroup), consumer (KIP-848, group.protocol=consumer), share (KIP-932 share groups; remove it to turn them off)."),
    ConfigDef("group.share.enable", BOOL, False, None, "Kafka's internal switch: share groups are on when this is true or group.coordinator.rebalance.protocols lists share."),
    ConfigDef("group.coordinator.threads", INT, 1, AtLeast(1), "Group coordinator threads.", _INFO),
    ConfigDef("group.consumer.session.timeout.ms", INT, 45000, AtLeast(1), "Session timeout of consumer-protocol groups."),
    ConfigDef("group.consumer.heartbeat.interval.ms", INT, 5000, AtLeast(1), "Heartbeat interval of consumer-protocol groups."),
    ConfigDef("group.consumer.min.session.timeout.ms", INT, 45000, AtLeast(1), "Shortest consumer.session.timeout.ms a consumer-protocol group may set."),
    ConfigDef("group.consumer.max.session.timeout.ms", INT, 60000, AtLeast(1), "Longest consumer.session.timeout.ms a consumer-protocol group may set."),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", INT, 5000, AtLeast(1), "Shortest consumer.heartbeat.interval.ms a consumer-protocol group may set."),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", INT, 15000, AtLeast(1), "Longest consumer.heartbeat.interval.ms a consumer-protocol group may set."),
    ConfigDef("group.consumer.max.size", INT, INT_MAX, AtLeast(1), "Most members of a consumer-protocol group."),
    ConfigDef("group.consumer.migration.policy", STR, "bidirectional", OneOf("bidirectional", "upgrade", "downgrade", "disabled"), "Online conversion of groups with members: a consumer-protocol member joining a classic group makes it a consumer group (upgrade); the last one leaving makes it classic again (downgrade)."),
    ConfigDef("group.consumer.assignors", LIST, ["uniform", "range"], ListOf("uniform", "range"), "Server-side assignors of consumer-protocol groups; the first is the default."),
    ConfigDef("group.share.heartbeat.interval.ms", INT, 5000, AtLeast(1), "Heartbeat interval of share groups."),
    ConfigDef("group.share.session.timeout.ms", INT, 45000, AtLeast(1), "Session timeout of share-group members."),
    ConfigDef("group.share.record.lock.duration.ms", INT, 30000, Between(1000, 3600000), "How long a share-group member holds the records it acquired (within the min and max below)."),
    ConfigDef("group.share.min.record.lock.duration.ms", INT, 15000, Between(1000, 30000), "Smallest share.record.lock.duration.ms a share group may set."),
    ConfigDef("group.share.max.record.lock.duration.ms", INT, 60000, Between(30000, 3600000), "Largest share.record.lock.duration.ms a share group may set."),
    ConfigDef("group.share.delivery.count.limit", INT, 5, Between(2, 10), "Deliveries of a record to share-group members before it is archived (within the min and max below)."),
    ConfigDef("group.share.min.delivery.count.limit", INT, 2, Between(2, 5), "Smallest share.delivery.count.limit a share group may set."),
    ConfigDef("group.share.max.delivery.count.limit", INT, 10, Between(5, 25), "Largest share.delivery.count.limit a share group may set."),
    ConfigDef("group.share.partition.max.record.locks", INT, 2000, Between(100, 10000), "Records of a share partition in flight at once (past its start offset); within the min and max below."),
    ConfigDef("group.share.min.partition.max.record.locks", INT, 100, Between(100, 2000), "Smallest share.partition.max.record.locks a share group may set."),
    ConfigDef("group.share.max.partition.max.record.locks", INT, 4000, Between(2000, 10000), "Largest share.partition.max.record.locks a share group may set."),
    # transactions and producer ids
    ConfigDef("transaction.state.log.num.partitions", INT, 50, AtLeast(1), "Partitions of __transaction_state."),
    ConfigDef("transaction.state.log.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __transaction_state (capped at the live brokers)."),
    ConfigDef("transaction.state.log.min.isr", INT, 2, AtLeast(1), "min.insync.replicas of __transaction_state."),
    ConfigDef("transaction.state.log.segment.bytes", INT, 104857600, AtLeast(1), "Segment size of __transaction_state."),
    ConfigDef("transaction.state.log.load.buffer.size", INT, 5242880, AtLeast(1), "Read size when loading transaction state."),
    ConfigDef("transaction.max.timeout.ms", INT, 900000, AtLeast(1), "Longest transaction timeout a producer may ask for."),
    ConfigDef("transactional.id.expiration.ms", INT, 604800000, AtLeast(1), "Forget a transactional id idle this long."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, AtLeast(1), "How often timed-out transactions are aborted."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, AtLeast(1), "How often expired transactional ids are removed."),
    ConfigDef("transaction.partition.verification.enable", BOOL, True, None, "Verify a partition is in the transaction before appending."),
    ConfigDef("producer.id.expiration.ms", INT, 86400000, AtLeast(1), "Forget an idempotent producer id idle this long."),
    ConfigDef("producer.id.expiration.check.interval.ms", INT, 600000, AtLeast(1), "How often expired producer ids are removed."),
    # share groups (Kafka 4 writes these into its sample server.properties)
    ConfigDef("share.coordinator.state.topic.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __share_group_state (capped at the live brokers)."),
    ConfigDef("share.coordinator.state.topic.min.isr", SHORT, 2, AtLeast(1), "min.insync.replicas of __share_group_state."),
    ConfigDef("share.coordinator.state.topic.num.partitions", INT, 50, AtLeast(1), "Partitions of __share_group_state."),
    ConfigDef("share.coordinator.write.timeout.ms", INT, 5000, AtLeast(1), "Most time a share-state write waits for the ISR of its __share_group_state partition."),
    # security
    ConfigDef("authorizer.class.name", STR, "", None, "Authorizer class; empty: no authorization."),
    ConfigDef("super.users", STR, None, None, "Principals allowed everything, as User:name;User:other."),
    ConfigDef("allow.everyone.if.no.acl.found", BOOL, False, None, "Allow access to resources that have no ACL."),
    ConfigDef("principal.builder.class", CLASS, None, None, "Class building the principal of a connection (no Java plugins: principals come from SASL and ssl.principal.mapping.rules).", _INFO),
    ConfigDef("ssl.protocol", STR, "TLSv1.3", None, "Newest TLS version of SSL contexts, as a JVM's SSLContext protocol: TLSv1.2 keeps TLS 1.3 off even when ssl.enabled.protocols has it; TLSv1.3 or TLS caps nothing."),
    ConfigDef("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], None, "TLS protocols enabled."),
    ConfigDef("ssl.cipher.suites", LIST, None, None, "Cipher suites enabled; default: all the runtime supports."),
    ConfigDef("ssl.provider", STR, None, None, "Security provider of SSL contexts (a JVM setting; Odradek uses OpenSSL).", _INFO),
    ConfigDef("ssl.keystore.type", STR, "JKS", None, "Key store file format."),
    ConfigDef("ssl.keystore.location", STR, None, None, "Key store file."),
    ConfigDef("ssl.keystore.password", PASSWORD, None, None, "Key store password (PEM stores have none; an encrypted key takes ssl.key.password).", _INFO),
    ConfigDef("ssl.key.password", PASSWORD, None, None, "Password of the private key in the key store."),
    ConfigDef("ssl.keystore.key", PASSWORD, None, None, "Private key in PEM format."),
    ConfigDef("ssl.keystore.certificate.chain", PASSWORD, None, None, "Certificate chain in PEM format."),
    ConfigDef("ssl.truststore.type", STR, "JKS", None, "Trust store file format."),
    ConfigDef("ssl.truststore.location", STR, None, None, "Trust store file."),
    ConfigDef("ssl.truststore.password", PASSWORD, None, None, "Trust store password (PEM trust stores have none).", _INFO),
    ConfigDef("ssl.truststore.certificates", PASSWORD, None, None, "Trusted certificates in PEM format."),
    ConfigDef("ssl.keymanager.algorithm", STR, "SunX509", None, "Key manager algorithm (a JVM setting).", _INFO),
    ConfigDef("ssl.trustmanager.algorithm", STR, "PKIX", None, "Trust manager algorithm (a JVM setting).", _INFO),
    ConfigDef("ssl.endpoint.identification.algorithm", STR, "https", None, "Server host name check; empty disables it."),
    ConfigDef("ssl.secure.random.implementation", STR, None, None, "SecureRandom implementation (a JVM setting; OpenSSL seeds itself).", _INFO),
    ConfigDef("ssl.client.auth", STR, "none", OneOf("required", "requested", "none"), "Ask clients for certificates."),
    ConfigDef("ssl.principal.mapping.rules", STR, "DEFAULT", None, "Rules mapping certificate names to principals."),
    ConfigDef("ssl.engine.factory.class", CLASS, None, None, "Custom SSL engine factory (no Java plugins).", _INFO),
    ConfigDef("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None, "SASL mechanisms enabled."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", None, "SASL mechanism between brokers."),
    ConfigDef("sasl.jaas.config", PASSWORD, None, None, "JAAS login configuration (brokers read it per listener and mechanism, as listener.name.<listener>.<mechanism>.sasl.jaas.config).", _INFO),
    ConfigDef("sasl.server.callback.handler.class", CLASS, None, None, "SASL server callback handler (no Java plugins: PLAIN users come from the JAAS line, SCRAM credentials from AlterUserScramCredentials).", _INFO),
    ConfigDef("sasl.server.max.receive.size", INT, 524288, None, "Largest SASL packet before authentication."),
    # metrics and quotas
    ConfigDef("metric.reporters", LIST, [], None, "Metric reporter classes.", _INFO),
    ConfigDef("metrics.num.samples", INT, 2, AtLeast(1), "Samples kept per metric.", _INFO),
    ConfigDef("metrics.sample.window.ms", LONG, 30000, AtLeast(1), "Window of one metric sample.", _INFO),
    ConfigDef("metrics.recording.level", STR, "INFO", OneOf("INFO", "DEBUG", "TRACE"), "Highest metric recording level.", _INFO),
    ConfigDef("auto.include.jmx.reporter", BOOL, True, None, "Add the JMX reporter.", DEPRECATED),
    ConfigDef("kafka.metrics.reporters", LIST, [], None, "Yammer metric reporter classes.", _INFO),
    ConfigDef("kafka.metrics.polling.interval.secs", INT, 10, AtLeast(1), "Yammer metrics polling interval.", _INFO),
    ConfigDef("quota.window.num", INT, 11, AtLeast(1), "Samples kept for client quotas."),
    ConfigDef("quota.window.size.seconds", INT, 1, AtLeast(1), "Time span of one quota sample."),
    ConfigDef("replication.quota.window.num", INT, 11, AtLeast(1), "Samples kept for replication quotas."),
    ConfigDef("replication.quota.window.size.seconds", INT, 1, AtLeast(1), "Time span of one replication quota sample."),
    ConfigDef("leader.replication.throttled.rate", LONG, LONG_MAX, AtLeast(0), "Bytes/s this broker sends to followers of throttled replicas (a dynamic config)."),
    ConfigDef("follower.replication.throttled.rate", LONG, LONG_MAX, AtLeast(0), "Bytes/s this broker fetches for throttled replicas (a dynamic config)."),
    ConfigDef("client.quota.callback.class", CLASS, None, None, "Custom client quota callback (no Java plugins: quotas come from AlterClientQuotas).", _INFO),
    # policies and config providers
    ConfigDef("create.topic.policy.class.name", CLASS, None, None, "Class validating CreateTopics.", _INFO),
    ConfigDef("alter.config.policy.class.name", CLASS, None, None, "Class validating AlterConfigs.", _INFO),
    ConfigDef("config.providers", LIST, [], None, "Config providers (variable substitution is not supported).", _INFO),
    # KRaft: accepted, ignored with a warning
    ConfigDef("process.roles", LIST, [], ListOf("broker", "controller", allow_empty=True), "Roles of a KRaft node.", KRAFT),
    ConfigDef("controller.quorum.voters", LIST, [], None, "KRaft quorum voters, as id@host:port,...", KRAFT),
    ConfigDef("controller.quorum.bootstrap.servers", LIST, [], None, "KRaft quorum bootstrap servers.", KRAFT),
    ConfigDef("controller.listener.names", LIST, None, None, "Listeners of the KRaft controller (not bound by Odradek).", KRAFT),
    ConfigDef("controller.quorum.election.timeout.ms", INT, 1000, None, "KRaft election timeout.", KRAFT),
    ConfigDef("controller.quorum.fetch.timeout.ms", INT, 2000, None, "KRaft fetch timeout.", KRAFT),
    ConfigDef("controller.quorum.election.backoff.max.ms", INT, 1000, None, "KRaft election backoff.", KRAFT),
    ConfigDef("controller.quorum.append.linger.ms", INT, 25, None, "KRaft append linger.", KRAFT),
    ConfigDef("controller.quorum.request.timeout.ms", INT, 2000, None, "KRaft request timeout.", KRAFT),
    ConfigDef("controller.quorum.retry.backoff.ms", INT, 20, None, "KRaft retry backoff.", KRAFT),
    ConfigDef("metadata.log.dir", STR, None, None, "KRaft metadata log directory.", KRAFT),
    ConfigDef("metadata.log.segment.bytes", INT, 1073741824, None, "KRaft metadata segment size.", KRAFT),
    ConfigDef("metadata.log.segment.ms", LONG, 604800000, None, "KRaft metadata roll time.", KRAFT),
    ConfigDef("metadata.max.retention.bytes", LONG, 104857600, None, "KRaft metadata retention size.", KRAFT),
    ConfigDef("metadata.max.retention.ms", LONG, 604800000, None, "KRaft metadata retention time.", KRAFT),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", LONG, 20971520, None, "KRaft snapshot size trigger.", KRAFT),
    ConfigDef("metadata.log.max.snapshot.interval.ms", LONG, 3600000, None, "KRaft snapshot time trigger.", KRAFT),
    ConfigDef("metadata.max.idle.interval.ms", INT, 500, None, "KRaft no-op record interval.", KRAFT),
    ConfigDef("broker.heartbeat.interval.ms", INT, 2000, None, "KRaft broker heartbeat interval.", KRAFT),
    ConfigDef("broker.session.timeout.ms", INT, 9000, None, "KRaft broker session timeout.", KRAFT),
    ConfigDef("initial.broker.registration.timeout.ms", INT, 60000, None, "KRaft registration timeout.", KRAFT),
    ConfigDef("sasl.mechanism.controller.protocol", STR, "GSSAPI", None, "SASL mechanism towards KRaft controllers.", KRAFT),
    ConfigDef("zookeeper.metadata.migration.enable", BOOL, False, None, "ZooKeeper to KRaft migration.", KRAFT),
)
# fmt: on

# Prefixes whose keys are accepted as free-form strings.
FREE_PREFIXES = ("sasl.oauthbearer.", "sasl.login.", "sasl.kerberos.", "config.providers.")
SECURITY_PREFIXES = (
    "ssl.",
    "sasl.",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "principal.builder.class",
)
NOT_BROKER_KEYS = {
    "cluster.id": "the cluster id is not a broker config; it lives in meta.properties in each log dir",
}

# Broker keys that are one setting in different units, in precedence order.
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("node.id", "broker.id"),
    ("log.dirs", "log.dir"),
)
BROKER_SYNONYMS = {name: group for group in _SYNONYM_GROUPS for name in group}


def looks_secret(key: str) -> bool:
    """A prefixed key whose value must not be shown (DescribeConfigs, logs)."""
    return key.endswith(".password") or key.endswith("jaas.config") or key.endswith(".secret")
