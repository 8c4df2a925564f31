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


_CD = ConfigDef
_INFO = INFORMATIONAL

# fmt: off
BROKER_CONFIGS: dict[str, ConfigDef] = config_table(
    # identity and mode
    _CD("node.id", INT, -1, AtLeast(-1), "Id of this broker; same as broker.id. Unset: 0 on a single node."),
    _CD("broker.id", INT, -1, AtLeast(-1), "Id of this broker; same as node.id. Unset: 0 on a single node."),
    _CD("broker.id.generation.enable", BOOL, True, None, "In cluster mode, generate an id when none is set."),
    _CD("reserved.broker.max.id", INT, 1000, AtLeast(0), "Highest id an operator may configure in cluster mode."),
    _CD("broker.rack", STR, None, None, "Rack of this broker, for rack-aware replica placement."),
    _CD("zookeeper.connect", STR, None, None, "ZooKeeper connection string (host:port,...[/chroot]); enables cluster mode."),
    _CD("zookeeper.session.timeout.ms", INT, 18000, AtLeast(1), "ZooKeeper session timeout."),
    _CD("zookeeper.connection.timeout.ms", INT, None, AtLeast(1), "Time to wait for a ZooKeeper connection; default: the session timeout."),
    _CD("zookeeper.max.in.flight.requests", INT, 10, AtLeast(1), "Unacknowledged ZooKeeper requests before blocking."),
    _CD("zookeeper.set.acl", BOOL, False, None, "Use secure ACLs on the znodes this broker creates."),
    _CD("controller.socket.timeout.ms", INT, 30000, None, "Socket timeout of controller-to-broker channels."),
    _CD("inter.broker.protocol.version", STR, None, None, "Inter-broker protocol version.", _INFO),
    # listeners
    _CD("listeners", LIST, ["PLAINTEXT://127.0.0.1:9092"], NonEmptyUnique(), "Listeners as NAME://host:port; an empty host binds every interface, port 0 an ephemeral port."),
    _CD("advertised.listeners", LIST, None, None, "Addresses given to clients, as NAME://host:port; default: listeners."),
    _CD("listener.security.protocol.map", STR, None, None, "Listener name to security protocol, as NAME:PROTOCOL,...; default maps each protocol to itself."),
    _CD("inter.broker.listener.name", STR, None, None, "Listener used between brokers."),
    _CD("security.inter.broker.protocol", STR, "PLAINTEXT", OneOf(*SECURITY_PROTOCOLS), "Security protocol between brokers, when inter.broker.listener.name is unset."),
    _CD("socket.send.buffer.bytes", INT, 102400, None, "SO_SNDBUF of accepted sockets; -1 for the OS default."),
    _CD("socket.receive.buffer.bytes", INT, 102400, None, "SO_RCVBUF of accepted sockets; -1 for the OS default."),
    _CD("socket.request.max.bytes", INT, 104857600, AtLeast(1), "Largest request accepted, in bytes."),
    _CD("socket.listen.backlog.size", INT, 50, AtLeast(1), "Pending connections the listen socket queues."),
    _CD("max.connections", INT, INT_MAX, AtLeast(0), "Most connections open at once."),
    _CD("max.connections.per.ip", INT, INT_MAX, AtLeast(0), "Most connections open at once from one address."),
    _CD("max.connections.per.ip.overrides", STR, "", HostCounts(), "Per-address limits, as host:count,...; host names are resolved at start."),
    _CD("max.connection.creation.rate", INT, INT_MAX, AtLeast(0), "Most new connections per second."),
    _CD("connections.max.idle.ms", LONG, 600000, None, "Close connections idle for longer than this."),
    _CD("connection.failed.authentication.delay.ms", INT, 100, AtLeast(0), "Delay before closing a connection that failed to authenticate."),
    _CD("connections.max.reauth.ms", LONG, 0, None, "Most time a SASL session may live before re-authenticating; 0 disables."),
    _CD("queued.max.requests", INT, 500, AtLeast(1), "Requests queued for the handler threads (Odradek handles one request per connection at a time).", _INFO),
    _CD("queued.max.request.bytes", LONG, -1, None, "Bytes of large requests being received, all connections together, before connections starting another wait; -1: no limit."),
    _CD("num.network.threads", INT, 3, AtLeast(1), "Network threads.", _INFO),
    _CD("num.io.threads", INT, 8, AtLeast(1), "Request handler threads.", _INFO),
    _CD("background.threads", INT, 10, AtLeast(1), "Background task threads.", _INFO),
    _CD("request.timeout.ms", INT, 30000, None, "Timeout of requests this broker sends."),
    _CD("early.start.listeners", LIST, None, None, "Listeners started before the authorizer is ready.", _INFO),
    # HTTP: metrics, health, JSON API and console (Odradek's own keys; odradek/http/)
    _CD("http.listeners", LIST, ["http://127.0.0.1:9644"], HttpListeners(), "Where /metrics, /healthz, /readyz, the JSON API (/v1) and the console are served, as http://host:port; port 0 picks a free port (logged); empty turns HTTP off."),
    _CD("http.max.connections", INT, 1000, AtLeast(1), "Most HTTP connections open at once; a new one beyond this closes the oldest."),
    # log directories and segments
    _CD("log.dirs", LIST, None, NonEmptyUnique(), "Directories holding the logs; default: log.dir."),
    _CD("log.dir", LIST, ["./odradek-data"], NonEmptyUnique(), "Directory holding the logs, when log.dirs is unset."),
    _CD("num.partitions", INT, 1, AtLeast(1), "Partitions of an auto-created topic."),
    _CD("default.replication.factor", INT, 1, AtLeast(1), "Replication factor of an auto-created topic."),
    _CD("auto.create.topics.enable", BOOL, True, None, "Create a topic when a client asks for metadata of one that does not exist."),
    _CD("auto.create.topics.max.per.request", INT, 100, AtLeast(1), "Most topics one Metadata request may auto-create; the others get THROTTLING_QUOTA_EXCEEDED (Odradek's own key)."),
    _CD("delete.topic.enable", BOOL, True, None, "Allow topics to be deleted."),
    _CD("max.partitions.per.request", INT, 10000, AtLeast(1), "Most partitions one CreateTopics or CreatePartitions request may create (Kafka's controller caps this at 10000)."),
    _CD("max.broker.partitions", INT, INT_MAX, AtLeast(1), "Most partition replicas this broker may host (KIP-578); the file-descriptor limit (RLIMIT_NOFILE, 3 per partition in use) caps it too."),
    _CD("num.recovery.threads.per.data.dir", INT, 1, AtLeast(1), "Threads per log dir for recovery and shutdown flush.", _INFO),
    _CD("log.segment.bytes", INT, 1073741824, AtLeast(14), "Largest size of a log segment file."),
    _CD("log.roll.ms", LONG, None, AtLeast(1), "Roll a new segment after this long; default: log.roll.hours."),
    _CD("log.roll.hours", INT, 168, AtLeast(1), "Roll a new segment after this many hours (second to log.roll.ms)."),
    _CD("log.roll.jitter.ms", LONG, None, AtLeast(0), "Most random jitter subtracted from the roll time; default: log.roll.jitter.hours."),
    _CD("log.roll.jitter.hours", INT, 0, AtLeast(0), "Roll jitter in hours (second to log.roll.jitter.ms)."),
    _CD("log.index.interval.bytes", INT, 4096, AtLeast(0), "Bytes of log between offset index entries."),
    _CD("log.index.size.max.bytes", INT, 10485760, AtLeast(4), "Largest size of an offset or time index file."),
    _CD("log.preallocate", BOOL, False, None, "Preallocate segment files at their full size."),
    _CD("log.segment.delete.delay.ms", LONG, 60000, AtLeast(0), "Delay between scheduling a file for deletion and deleting it."),
    _CD("log.initial.task.delay.ms", LONG, 30000, AtLeast(0), "Delay before the first retention and flush checks after start."),
    # flushing
    _CD("log.flush.interval.messages", LONG, LONG_MAX, AtLeast(1), "Messages appended to a partition before it is fsynced."),
    _CD("log.flush.interval.ms", LONG, None, AtLeast(0), "Most time a message waits in memory before fsync; default: log.flush.scheduler.interval.ms."),
    _CD("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, "How often the flusher checks whether a log needs an fsync."),
    _CD("log.flush.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0), "How often the recovery point checkpoint is written."),
    _CD("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0), "How often the log start offset checkpoint is written."),
    # retention and cleaning
    _CD("log.retention.ms", LONG, None, None, "Keep a segment this long; -1: forever. Default: log.retention.minutes."),
    _CD("log.retention.minutes", INT, None, None, "Retention in minutes (second to log.retention.ms). Default: log.retention.hours."),
    _CD("log.retention.hours", INT, 168, None, "Retention in hours (third to log.retention.ms)."),
    _CD("log.retention.bytes", LONG, -1, None, "Largest size of a partition's log before old segments go; -1: no limit."),
    _CD("log.retention.check.interval.ms", LONG, 300000, AtLeast(1), "How often logs are checked for segments to delete."),
    _CD("log.cleanup.policy", LIST, ["delete"], ListOf("compact", "delete"), "Default cleanup policy: delete, compact or both."),
    _CD("log.cleaner.enable", BOOL, True, None, "Run the log cleaner (needed by compacted topics such as __consumer_offsets)."),
    _CD("log.cleaner.threads", INT, 1, AtLeast(0), "Log cleaner threads."),
    _CD("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, "Memory for the cleaner's key map, over all cleaner threads."),
    _CD("log.cleaner.io.buffer.size", INT, 524288, AtLeast(0), "Memory for cleaner I/O buffers, over all cleaner threads."),
    _CD("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, "Fill ratio of the cleaner's key map."),
    _CD("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, None, "Cleaner read plus write throughput limit."),
    _CD("log.cleaner.backoff.ms", LONG, 15000, AtLeast(0), "Cleaner sleep when no log needs cleaning."),
    _CD("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, Between(0, 1), "Least dirty-to-total ratio of a log worth cleaning."),
    _CD("log.cleaner.delete.retention.ms", LONG, 86400000, AtLeast(0), "How long tombstones stay in compacted logs."),
    _CD("log.cleaner.min.compaction.lag.ms", LONG, 0, AtLeast(0), "Least age of a message before it can be compacted."),
    _CD("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, AtLeast(1), "Most age of a message before it must be compacted."),
    _CD("log.local.retention.ms", LONG, -2, AtLeast(-2), "Tiered storage: local retention time; -2: log.retention.ms.", _INFO),
    _CD("log.local.retention.bytes", LONG, -2, AtLeast(-2), "Tiered storage: local retention size; -2: log.retention.bytes.", _INFO),
    # messages
    _CD("message.max.bytes", INT, 1048588, AtLeast(0), "Largest record batch accepted, in bytes."),
    _CD("compression.type", STR, "producer", OneOf(*COMPRESSION_TYPES), "Compression of stored batches: producer keeps what the producer sent."),
    _CD("compression.gzip.level", INT, -1, Either(-1, Between(1, 9)), "Gzip level when compression.type is gzip."),
    _CD("compression.lz4.level", INT, 9, Between(1, 17), "LZ4 level when compression.type is lz4."),
    _CD("compression.zstd.level", INT, 3, Between(-131072, 22), "Zstd level when compression.type is zstd."),
    _CD("log.message.timestamp.type", STR, "CreateTime", OneOf("CreateTime", "LogAppendTime"), "Timestamp kept in batches: the producer's (CreateTime) or the broker's (LogAppendTime)."),
    _CD("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, AtLeast(0), "Most difference between a CreateTime timestamp and the broker's clock.", DEPRECATED),
    _CD("log.message.timestamp.before.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the past a CreateTime timestamp may be."),
    _CD("log.message.timestamp.after.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the future a CreateTime timestamp may be."),
    _CD("log.message.format.version", STR, None, None, "Message format version.", DEPRECATED),
    _CD("log.message.downconversion.enable", BOOL, True, None, "Down-convert batches for old fetchers.", DEPRECATED),
    _CD("min.insync.replicas", INT, 1, AtLeast(1), "Replicas that must acknowledge an acks=all write."),
    _CD("unclean.leader.election.enable", BOOL, False, None, "Allow a replica outside the ISR to become leader, losing data."),
    # replication
    _CD("replica.lag.time.max.ms", LONG, 30000, None, "A follower that has not caught up for this long leaves the ISR."),
    _CD("replica.socket.timeout.ms", INT, 30000, None, "Socket timeout of follower fetches."),
    _CD("replica.socket.receive.buffer.bytes", INT, 65536, None, "SO_RCVBUF of follower fetch connections."),
    _CD("replica.fetch.max.bytes", INT, 1048576, AtLeast(0), "Bytes a follower asks for per partition."),
    _CD("replica.fetch.min.bytes", INT, 1, None, "Least bytes a follower fetch waits for."),
    _CD("replica.fetch.wait.max.ms", INT, 500, None, "Most time a follower fetch waits."),
    _CD("replica.fetch.backoff.ms", INT, 1000, AtLeast(0), "Follower sleep after a fetch error."),
    _CD("replica.fetch.response.max.bytes", INT, 10485760, AtLeast(0), "Bytes a follower asks for per fetch."),
    _CD("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, "How often high watermarks are checkpointed."),
    _CD("replica.selector.class", CLASS, None, None, "Class choosing the preferred read replica."),
    _CD("num.replica.fetchers", INT, 1, None, "Fetchers per source broker."),
    _CD("num.replica.alter.log.dirs.threads", INT, None, None, "Threads moving replicas between log dirs.", _INFO),
    _CD("fetch.purgatory.purge.interval.requests", INT, 1000, None, "Fetch purgatory purge interval, in requests.", _INFO),
    _CD("producer.purgatory.purge.interval.requests", INT, 1000, None, "Produce purgatory purge interval, in requests.", _INFO),
    _CD("delete.records.purgatory.purge.interval.requests", INT, 1, None, "DeleteRecords purgatory purge interval, in requests.", _INFO),
    _CD("fetch.max.bytes", INT, 57671680, AtLeast(1024), "Most bytes returned by one fetch."),
    _CD("max.incremental.fetch.session.cache.slots", INT, 1000, AtLeast(0), "Incremental fetch sessions kept."),
    _CD("auto.leader.rebalance.enable", BOOL, True, None, "Move leadership back to preferred replicas."),
    _CD("leader.imbalance.per.broker.percentage", INT, 10, None, "Leader imbalance tolerated per broker, in percent."),
    _CD("leader.imbalance.check.interval.seconds", LONG, 300, AtLeast(1), "How often leader balance is checked."),
    _CD("controlled.shutdown.enable", BOOL, True, None, "Move leadership away before shutting down."),
    _CD("controlled.shutdown.max.retries", INT, 3, None, "Controlled shutdown attempts."),
    _CD("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, "Wait between controlled shutdown attempts."),
    # group coordinator and offsets
    _CD("offsets.topic.num.partitions", INT, 50, AtLeast(1), "Partitions of __consumer_offsets (do not change after deployment)."),
    _CD("offsets.topic.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __consumer_offsets (capped at the live brokers)."),
    _CD("offsets.topic.segment.bytes", INT, 104857600, AtLeast(1), "Segment size of __consumer_offsets."),
    _CD("offsets.topic.compression.codec", INT, 0, None, "Compression codec id of __consumer_offsets."),
    _CD("offsets.load.buffer.size", INT, 5242880, AtLeast(1), "Read size when loading group metadata."),
    _CD("offsets.commit.timeout.ms", INT, 5000, AtLeast(1), "Most time an offset commit waits for replication."),
    _CD("offsets.commit.required.acks", SHORT, -1, None, "Acks for offset commits.", DEPRECATED),
    _CD("offsets.retention.minutes", INT, 10080, AtLeast(1), "Keep committed offsets of an empty group this long."),
    _CD("offsets.retention.check.interval.ms", LONG, 600000, AtLeast(1), "How often stale offsets are looked for."),
    _CD("offset.metadata.max.bytes", INT, 4096, None, "Largest metadata string of an offset commit."),
    _CD("group.initial.rebalance.delay.ms", INT, 3000, None, "Wait for more members before a new group's first rebalance."),
    _CD("group.min.session.timeout.ms", INT, 6000, None, "Shortest session timeout a member may ask for."),
    _CD("group.max.session.timeout.ms", INT, 1800000, None, "Longest session timeout a member may ask for."),
    _CD("group.max.size", INT, INT_MAX, AtLeast(1), "Most members of a classic group."),
    _CD("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer"], ListOf("classic", "consumer", "share", "streams"), "Rebalance protocols enabled."),
    _CD("group.coordinator.threads", INT, 1, AtLeast(1), "Group coordinator threads.", _INFO),
    _CD("group.consumer.session.timeout.ms", INT, 45000, AtLeast(1), "Session timeout of consumer-protocol groups."),
    _CD("group.consumer.heartbeat.interval.ms", INT, 5000, AtLeast(1), "Heartbeat interval of consumer-protocol groups."),
    _CD("group.consumer.max.size", INT, INT_MAX, AtLeast(1), "Most members of a consumer-protocol group."),
    # transactions and producer ids
    _CD("transaction.state.log.num.partitions", INT, 50, AtLeast(1), "Partitions of __transaction_state."),
    _CD("transaction.state.log.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __transaction_state (capped at the live brokers)."),
    _CD("transaction.state.log.min.isr", INT, 2, AtLeast(1), "min.insync.replicas of __transaction_state."),
    _CD("transaction.state.log.segment.bytes", INT, 104857600, AtLeast(1), "Segment size of __transaction_state."),
    _CD("transaction.state.log.load.buffer.size", INT, 5242880, AtLeast(1), "Read size when loading transaction state."),
    _CD("transaction.max.timeout.ms", INT, 900000, AtLeast(1), "Longest transaction timeout a producer may ask for."),
    _CD("transactional.id.expiration.ms", INT, 604800000, AtLeast(1), "Forget a transactional id idle this long."),
    _CD("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, AtLeast(1), "How often timed-out transactions are aborted."),
    _CD("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, AtLeast(1), "How often expired transactional ids are removed."),
    _CD("transaction.partition.verification.enable", BOOL, True, None, "Verify a partition is in the transaction before appending."),
    _CD("producer.id.expiration.ms", INT, 86400000, AtLeast(1), "Forget an idempotent producer id idle this long."),
    _CD("producer.id.expiration.check.interval.ms", INT, 600000, AtLeast(1), "How often expired producer ids are removed."),
    # share groups (Kafka 4 writes these into its sample server.properties)
    _CD("share.coordinator.state.topic.replication.factor", SHORT, 3, AtLeast(1), "Replication factor of __share_group_state.", _INFO),
    _CD("share.coordinator.state.topic.min.isr", SHORT, 2, AtLeast(1), "min.insync.replicas of __share_group_state.", _INFO),
    _CD("share.coordinator.state.topic.num.partitions", INT, 50, AtLeast(1), "Partitions of __share_group_state.", _INFO),
    # security
    _CD("authorizer.class.name", STR, "", None, "Authorizer class; empty: no authorization."),
    _CD("super.users", STR, None, None, "Principals allowed everything, as User:name;User:other."),
    _CD("allow.everyone.if.no.acl.found", BOOL, False, None, "Allow access to resources that have no ACL."),
    _CD("principal.builder.class", CLASS, None, None, "Class building the principal of a connection."),
    _CD("ssl.protocol", STR, "TLSv1.3", None, "TLS protocol of SSL contexts."),
    _CD("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], None, "TLS protocols enabled."),
    _CD("ssl.cipher.suites", LIST, None, None, "Cipher suites enabled; default: all the runtime supports."),
    _CD("ssl.provider", STR, None, None, "Security provider of SSL contexts."),
    _CD("ssl.keystore.type", STR, "JKS", None, "Key store file format."),
    _CD("ssl.keystore.location", STR, None, None, "Key store file."),
    _CD("ssl.keystore.password", PASSWORD, None, None, "Key store password."),
    _CD("ssl.key.password", PASSWORD, None, None, "Password of the private key in the key store."),
    _CD("ssl.keystore.key", PASSWORD, None, None, "Private key in PEM format."),
    _CD("ssl.keystore.certificate.chain", PASSWORD, None, None, "Certificate chain in PEM format."),
    _CD("ssl.truststore.type", STR, "JKS", None, "Trust store file format."),
    _CD("ssl.truststore.location", STR, None, None, "Trust store file."),
    _CD("ssl.truststore.password", PASSWORD, None, None, "Trust store password."),
    _CD("ssl.truststore.certificates", PASSWORD, None, None, "Trusted certificates in PEM format."),
    _CD("ssl.keymanager.algorithm", STR, "SunX509", None, "Key manager algorithm."),
    _CD("ssl.trustmanager.algorithm", STR, "PKIX", None, "Trust manager algorithm."),
    _CD("ssl.endpoint.identification.algorithm", STR, "https", None, "Server host name check; empty disables it."),
    _CD("ssl.secure.random.implementation", STR, None, None, "SecureRandom implementation."),
    _CD("ssl.client.auth", STR, "none", OneOf("required", "requested", "none"), "Ask clients for certificates."),
    _CD("ssl.principal.mapping.rules", STR, "DEFAULT", None, "Rules mapping certificate names to principals."),
    _CD("ssl.engine.factory.class", CLASS, None, None, "Custom SSL engine factory."),
    _CD("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None, "SASL mechanisms enabled."),
    _CD("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", None, "SASL mechanism between brokers."),
    _CD("sasl.jaas.config", PASSWORD, None, None, "JAAS login configuration."),
    _CD("sasl.server.callback.handler.class", CLASS, None, None, "SASL server callback handler."),
    _CD("sasl.server.max.receive.size", INT, 524288, None, "Largest SASL packet before authentication."),
    # metrics and quotas
    _CD("metric.reporters", LIST, [], None, "Metric reporter classes.", _INFO),
    _CD("metrics.num.samples", INT, 2, AtLeast(1), "Samples kept per metric.", _INFO),
    _CD("metrics.sample.window.ms", LONG, 30000, AtLeast(1), "Window of one metric sample.", _INFO),
    _CD("metrics.recording.level", STR, "INFO", OneOf("INFO", "DEBUG", "TRACE"), "Highest metric recording level.", _INFO),
    _CD("auto.include.jmx.reporter", BOOL, True, None, "Add the JMX reporter.", DEPRECATED),
    _CD("kafka.metrics.reporters", LIST, [], None, "Yammer metric reporter classes.", _INFO),
    _CD("kafka.metrics.polling.interval.secs", INT, 10, AtLeast(1), "Yammer metrics polling interval.", _INFO),
    _CD("quota.window.num", INT, 11, AtLeast(1), "Samples kept for client quotas."),
    _CD("quota.window.size.seconds", INT, 1, AtLeast(1), "Time span of one quota sample."),
    _CD("replication.quota.window.num", INT, 11, AtLeast(1), "Samples kept for replication quotas."),
    _CD("replication.quota.window.size.seconds", INT, 1, AtLeast(1), "Time span of one replication quota sample."),
    _CD("client.quota.callback.class", CLASS, None, None, "Custom client quota callback."),
    # policies and config providers
    _CD("create.topic.policy.class.name", CLASS, None, None, "Class validating CreateTopics.", _INFO),
    _CD("alter.config.policy.class.name", CLASS, None, None, "Class validating AlterConfigs.", _INFO),
    _CD("config.providers", LIST, [], None, "Config providers (variable substitution is not supported).", _INFO),
    # KRaft: accepted, ignored with a warning
    _CD("process.roles", LIST, [], ListOf("broker", "controller", allow_empty=True), "Roles of a KRaft node.", KRAFT),
    _CD("controller.quorum.voters", LIST, [], None, "KRaft quorum voters, as id@host:port,...", KRAFT),
    _CD("controller.quorum.bootstrap.servers", LIST, [], None, "KRaft quorum bootstrap servers.", KRAFT),
    _CD("controller.listener.names", LIST, None, None, "Listeners of the KRaft controller (not bound by Odradek).", KRAFT),
    _CD("controller.quorum.election.timeout.ms", INT, 1000, None, "KRaft election timeout.", KRAFT),
    _CD("controller.quorum.fetch.timeout.ms", INT, 2000, None, "KRaft fetch timeout.", KRAFT),
    _CD("controller.quorum.election.backoff.max.ms", INT, 1000, None, "KRaft election backoff.", KRAFT),
    _CD("controller.quorum.append.linger.ms", INT, 25, None, "KRaft append linger.", KRAFT),
    _CD("controller.quorum.request.timeout.ms", INT, 2000, None, "KRaft request timeout.", KRAFT),
    _CD("controller.quorum.retry.backoff.ms", INT, 20, None, "KRaft retry backoff.", KRAFT),
    _CD("metadata.log.dir", STR, None, None, "KRaft metadata log directory.", KRAFT),
    _CD("metadata.log.segment.bytes", INT, 1073741824, None, "KRaft metadata segment size.", KRAFT),
    _CD("metadata.log.segment.ms", LONG, 604800000, None, "KRaft metadata roll time.", KRAFT),
    _CD("metadata.max.retention.bytes", LONG, 104857600, None, "KRaft metadata retention size.", KRAFT),
    _CD("metadata.max.retention.ms", LONG, 604800000, None, "KRaft metadata retention time.", KRAFT),
    _CD("metadata.log.max.record.bytes.between.snapshots", LONG, 20971520, None, "KRaft snapshot size trigger.", KRAFT),
    _CD("metadata.log.max.snapshot.interval.ms", LONG, 3600000, None, "KRaft snapshot time trigger.", KRAFT),
    _CD("metadata.max.idle.interval.ms", INT, 500, None, "KRaft no-op record interval.", KRAFT),
    _CD("broker.heartbeat.interval.ms", INT, 2000, None, "KRaft broker heartbeat interval.", KRAFT),
    _CD("broker.session.timeout.ms", INT, 9000, None, "KRaft broker session timeout.", KRAFT),
    _CD("initial.broker.registration.timeout.ms", INT, 60000, None, "KRaft registration timeout.", KRAFT),
    _CD("sasl.mechanism.controller.protocol", STR, "GSSAPI", None, "SASL mechanism towards KRaft controllers.", KRAFT),
    _CD("zookeeper.metadata.migration.enable", BOOL, False, None, "ZooKeeper to KRaft migration.", KRAFT),
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
