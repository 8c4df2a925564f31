"""Broker configuration: Kafka's ``server.properties`` keys, types, defaults and checks.

A Kafka operator's configuration carries over: the keys, types and defaults are Kafka's
(``KafkaConfig``, ``ServerLogConfigs``, ``SocketServerConfigs``, ``CleanerConfig``, the group
and transaction coordinator configs), and so are the precedence rules between synonyms
(``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``, ``log.roll.ms`` >
``log.roll.hours``, ``log.flush.interval.ms`` > ``log.flush.scheduler.interval.ms``,
``log.dirs`` > ``log.dir``). Unknown keys and invalid values fail at start with a
``ConfigError`` whose message names the key and says what was expected. Where Odradek
chooses differently from Kafka it says so here:

* defaults: ``listeners=PLAINTEXT://127.0.0.1:9092`` and ``log.dir=./odradek-data``.
* ``node.id`` / ``broker.id``: either may be set (both must then agree). Unset means 0 on a
  single node; with ``zookeeper.connect`` it means -1, "let the cluster layer generate one" as
  Kafka does from ``reserved.broker.max.id`` + 1.
* KRaft keys (``process.roles``, ``controller.quorum.voters``, ``controller.listener.names``,
  ``metadata.log.*``, ...) are accepted and ignored with a warning; listeners named in
  ``controller.listener.names`` are neither bound nor advertised.
* internal topics: ``offsets.topic.replication.factor`` and
  ``transaction.state.log.replication.factor`` default to 3 as in Kafka, but where Kafka fails
  to create the topic on a smaller cluster, ``internal_topic_replication_factor`` caps the
  factor at the number of live brokers and logs a warning.
* an empty advertised host means this machine's host name (Kafka uses the canonical host
  name); a 0.0.0.0 or :: advertised host is refused, as in Kafka.
* ``segment.bytes`` / ``log.segment.bytes`` accept 14 bytes and up (Kafka 3.x; 4.x wants 1 MiB).
* thread counts (``num.network.threads``, ``num.io.threads``, ``num.recovery.threads.per.data.dir``,
  ...) and a few other Kafka tuning keys are validated and reported but have no effect:
  Odradek runs on one event loop.
* ``server.properties`` is read as UTF-8 (falling back to Latin-1, Java's encoding).
* ``auto.create.topics.max.per.request`` is Odradek's own key: the most topics one Metadata
  request may auto-create (the rest get THROTTLING_QUOTA_EXCEEDED and may be asked again).
* security: until TLS, SASL and ACLs are implemented, ``check_security()`` (called before a
  broker serves) refuses a listener whose protocol is not PLAINTEXT, ``authorizer.class.name``
  and ``ssl.client.auth=required``, so a broker never serves in a weaker mode than
  configured; other ``ssl.*`` / ``sasl.*`` keys are accepted with a warning.

Topic-level configs (``TOPIC_CONFIGS``) take their defaults from broker synonyms
(``retention.ms`` ← ``log.retention.ms``/``minutes``/``hours``, ...). The DescribeConfigs,
AlterConfigs and CreateTopics handlers use ``validate_topic_configs``,
``topic_config_entries`` and ``broker_config_entries``; the log manager uses
``effective_topic_config``, whose keys feed ``odradek.storage.log_config.LogConfig.from_dict``.

Immutable once built; safe to share between threads.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odradek.broker.listeners import LISTENER_PREFIX, SECURITY_PROTOCOLS, Endpoint, resolve_listeners
from odradek.config_def import (
    BOOL,
    CLASS,
    DEPRECATED,
    DOUBLE,
    DOUBLE_MAX,
    HOUR_MS,
    INFORMATIONAL,
    INT,
    INT_MAX,
    KRAFT,
    LIST,
    LONG,
    LONG_MAX,
    MINUTE_MS,
    PASSWORD,
    SHORT,
    STR,
    AtLeast,
    Between,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    Either,
    InvalidValue,
    ListOf,
    NonEmptyUnique,
    OneOf,
    Validator,
    config_table,
    parse_value,
    render_value,
    suggest,
)
from odradek.properties import PropertiesError, load_properties, parse_properties
from odradek.storage.log_config import COMPRESSION_TYPES, NO_OP_TOPIC_CONFIGS, TOPIC_CONFIGS

__all__ = [
    "BROKER_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "NO_OP_TOPIC_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Endpoint",
    "broker_config_entries",
    "default_broker_config_entries",
    "effective_topic_config",
    "topic_config_entries",
    "validate_topic_configs",
]

log = logging.getLogger(__name__)




class HostCounts(Validator):
    """``host:count,...`` (``max.connections.per.ip.overrides``); the string is kept."""

    description = "comma-separated host:count pairs, e.g. 10.0.0.7:50,client.example.com:10"

    def __call__(self, value):
        if value is None:
            return value
        try:
            _parse_host_counts(value)
        except ValueError:
            raise InvalidValue(self.description) from None
        return value


_HOST_RE = re.compile(r"[A-Za-z0-9._%:\-]+")


def _parse_host_counts(text: str) -> dict[str, int]:
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
_FREE_PREFIXES = ("sasl.oauthbearer.", "sasl.login.", "sasl.kerberos.", "config.providers.")
_SECURITY_PREFIXES = (
    "ssl.",
    "sasl.",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "principal.builder.class",
)
_NOT_BROKER_KEYS = {
    "cluster.id": "the cluster id is not a broker config; it lives in meta.properties in each log dir",
}

# Broker keys that are one setting in different units, in precedence order.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("node.id", "broker.id"),
    ("log.dirs", "log.dir"),
)
_BROKER_SYNONYMS = {name: group for group in _BROKER_SYNONYM_GROUPS for name in group}


# -- the broker configuration ---------------------------------------------------------------


class BrokerConfig:
    """The broker's static configuration: every Kafka broker key, typed.

    Build it with ``BrokerConfig.load(path, overrides)`` (``server.properties`` plus
    ``--override`` pairs), ``BrokerConfig.from_properties(text)``, or ``BrokerConfig(mapping)``
    where values are strings as in a file or Python values (``1024``, ``True``, lists).
    """

    def __init__(self, props: Mapping[str, Any] | None = None):
        given = dict(props or {})
        problems: list[tuple[str, str]] = []
        values: dict[str, Any] = {}
        explicit: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, raw in given.items():
            key = key.strip()
            if raw is None:
                continue
            d = BROKER_CONFIGS.get(key)
            if d is None:
                if key.startswith(LISTENER_PREFIX) or key.startswith(_FREE_PREFIXES):
                    extra[key] = str(raw).strip()
                elif key in _NOT_BROKER_KEYS:
                    problems.append((key, f"{key}: {_NOT_BROKER_KEYS[key]}"))
                elif key in TOPIC_CONFIGS and key not in BROKER_CONFIGS:
                    syn = TOPIC_CONFIGS[key].synonyms
                    hint = f"; the broker-wide default is {syn[0][0]!r}" if syn else ""
                    problems.append((key, f"{key}: a topic-level config, not a broker config{hint}"))
                else:
                    problems.append((key, f"{key}: unknown broker config{suggest(key, BROKER_CONFIGS)}"))
                continue
            try:
                value = parse_value(d, raw)
            except ConfigError as exc:
                problems.append((key, exc.message))
                continue
            if value is None:  # an empty value for a key without default: as if unset
                continue
            values[key] = value
            explicit[key] = raw
        if problems:
            _raise(problems)
        for name, d in BROKER_CONFIGS.items():
            values.setdefault(name, d.default)
        self._values = values
        self._explicit = explicit
        self._extra = extra
        self._security_checked = False
        try:
            self._derive()
        except ConfigError as exc:
            _raise(exc.problems)
        self._warn()

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        """``server.properties`` at ``path`` (if any), then ``overrides`` on top."""
        try:
            props: dict[str, Any] = load_properties(path) if path is not None else {}
        except PropertiesError as exc:
            raise ConfigError(str(exc)) from None
        props.update(overrides or {})
        return cls(props)

    @classmethod
    def from_properties(cls, text: str, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        try:
            props: dict[str, Any] = parse_properties(text)
        except PropertiesError as exc:
            raise ConfigError(str(exc)) from None
        props.update(overrides or {})
        return cls(props)

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A new config: this one's explicit settings with ``overrides`` on top."""
        props = {**self._explicit, **self._extra}
        props.update(overrides)
        return BrokerConfig(props)

    # -- access --------------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The typed value of a key (its default when unset; None for unset keys without one)."""
        try:
            value = self._values[name]
        except KeyError:
            if name in self._extra:
                return self._extra[name]
            raise KeyError(f"unknown broker config {name!r}") from None
        return list(value) if isinstance(value, list) else value

    __getitem__ = get

    def is_set(self, name: str) -> bool:
        """True if the key was given explicitly (file or override)."""
        return name in self._explicit or name in self._extra

    def source(self, name: str) -> ConfigSource:
        for source, layer in self._dynamic.items():
            if name in layer:
                return source
        static = self.static
        return ConfigSource.STATIC_BROKER_CONFIG if static.is_set(name) else ConfigSource.DEFAULT_CONFIG

    @property
    def originals(self) -> dict[str, Any]:
        """Every explicitly given key with its raw value (passwords included: do not log it)."""
        return {**self._explicit, **self._extra}

    @property
    def extra(self) -> dict[str, str]:
        """Prefixed keys kept as strings (``listener.name.<listener>.*``, ``sasl.login.*``, ...)."""
        return dict(self._extra)

    def __repr__(self) -> str:
        shown = {
            k: (
                "<hidden>"
                if (BROKER_CONFIGS.get(k) and BROKER_CONFIGS[k].sensitive) or _looks_secret(k)
                else v
            )
            for k, v in self.originals.items()
        }
        return f"BrokerConfig({shown!r})"

    # -- dynamic layers (KIP-226; odradek/broker/dynamic_config.py keeps and applies them) ------

    _static: BrokerConfig | None = None
    _dynamic: Mapping[ConfigSource, Mapping[str, str]] = MappingProxyType({})

    def with_dynamic(self, defaults: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The configuration in force: the static one (``server.properties``), under the
        cluster-wide dynamic defaults, under this broker's dynamic configs (Kafka's precedence).
        Raises ``ConfigError`` naming a bad key, like the constructor."""
        static = self.static
        props = {**static.originals, **defaults, **per_broker}
        cfg = BrokerConfig(props)
        cfg._static = static
        cfg._dynamic = MappingProxyType(
            {
                ConfigSource.DYNAMIC_BROKER_CONFIG: dict(per_broker),
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: dict(defaults),
            }
        )
        return cfg

    @property
    def static(self) -> BrokerConfig:
        """The configuration the broker started with, without dynamic layers."""
        return self._static or self

    def dynamic_layer(self, source: ConfigSource) -> dict[str, str]:
        """The dynamic keys given at one level (DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        return dict(self._dynamic.get(source, {}))

    # -- derived values ------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        """This broker's id: node.id or broker.id; unset → 0 (single node) or -1 (cluster, to generate)."""
        return self._node_id

    @property
    def cluster_mode(self) -> bool:
        """True when ``zookeeper.connect`` is set."""
        return bool(self._values["zookeeper.connect"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self._log_dirs)

    @property
    def listeners(self) -> list[Endpoint]:
        """Endpoints to bind (controller listeners of a KRaft config left out)."""
        return list(self._listeners.bound)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """Endpoints given to clients. Port 0 means "the port ``listeners`` bound"."""
        return list(self._listeners.advertised)

    def advertised_endpoints(self, bound_ports: Mapping[str, int]) -> list[Endpoint]:
        """Advertised endpoints with ephemeral ports (0) replaced by the bound ones, by listener name."""
        return self._listeners.advertised_endpoints(bound_ports)

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides`` as {host: limit} (hosts as written)."""
        return dict(self._ip_overrides)

    def check_security(self) -> None:
        """Refuse what asks for security Odradek does not implement yet (TLS, SASL, ACLs):
        serving without it would be weaker than configured. Raises ``ConfigError`` naming
        the first such key; warns (once) about ``ssl.*`` / ``sasl.*`` keys no listener uses."""
        if self._security_checked:
            return
        for e in self._listeners.bound:
            if e.security_protocol != "PLAINTEXT":
                key = "listeners" if e.name == e.security_protocol else "listener.security.protocol.map"
                raise ConfigError(
                    f"{key}: listener {e} is {e.security_protocol}, but Odradek serves PLAINTEXT only "
                    "(TLS and SASL are not implemented yet); refusing to serve it unprotected",
                    key,
                )
        if self._values["authorizer.class.name"]:
            raise ConfigError(
                "authorizer.class.name: authorization (ACLs) is not implemented yet; refusing to start "
                "with every client allowed everything (remove the key to run without authorization)",
                "authorizer.class.name",
            )
        client_auth = {k: v for k, v in self._extra.items() if k.endswith(".ssl.client.auth")}
        client_auth["ssl.client.auth"] = self._values["ssl.client.auth"]
        for key, value in client_auth.items():
            if str(value).strip().lower() == "required":
                raise ConfigError(
                    f"{key}: client certificates need TLS, which Odradek does not implement yet; "
                    "refusing to accept clients without them",
                    key,
                )
        unused = sorted(
            k for k in self.originals if k.startswith(_SECURITY_PREFIXES) or ".ssl." in k or ".sasl." in k
        )
        if unused:
            log.warning(
                "ignoring %s: no listener uses SSL or SASL (Odradek serves PLAINTEXT only)", ", ".join(unused)
            )
        self._security_checked = True

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return dict(self._listeners.protocols)

    @property
    def inter_broker_listener_name(self) -> str:
        return self._listeners.inter_broker

    @property
    def log_roll_ms(self) -> int:
        return self._first_of(("log.roll.ms", 1), ("log.roll.hours", HOUR_MS))

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._first_of(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS))

    @property
    def log_retention_ms(self) -> int:
        """ms > minutes > hours; any negative value means -1, keep forever."""
        return self._retention_ms

    @property
    def log_flush_interval_ms(self) -> int:
        return self._first_of(("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))

    @property
    def offsets_retention_ms(self) -> int:
        return self._values["offsets.retention.minutes"] * MINUTE_MS

    def internal_topic_replication_factor(self, key: str, live_brokers: int) -> int:
        """The replication factor for an internal topic, capped at ``live_brokers``.

        ``key`` is ``offsets.topic.replication.factor`` or
        ``transaction.state.log.replication.factor``. Kafka refuses to create the topic while
        fewer brokers are alive; Odradek uses what it has and logs a warning.
        """
        wanted = self._values[key]
        if live_brokers >= wanted:
            return wanted
        got = max(1, live_brokers)
        log.warning("%s is %d but only %d broker(s) are alive; using %d", key, wanted, live_brokers, got)
        return got

    def _first_of(self, *keys: tuple[str, int]) -> int:
        for key, factor in keys:
            value = self._values[key]
            if value is not None:
                return value * factor
        raise AssertionError(f"no value for {keys}")

    def _derive(self) -> None:
        v = self._values
        # ids
        node_id, broker_id = v["node.id"], v["broker.id"]
        if node_id >= 0 and broker_id >= 0 and node_id != broker_id:
            raise ConfigError(
                f"node.id ({node_id}) and broker.id ({broker_id}) must be equal when both are set", "node.id"
            )
        configured = node_id if node_id >= 0 else broker_id
        if configured < 0:
            configured = -1 if self.cluster_mode else 0
        elif (
            self.cluster_mode
            and v["broker.id.generation.enable"]
            and configured > v["reserved.broker.max.id"]
        ):
            raise ConfigError(
                f"broker.id: {configured} is above reserved.broker.max.id ({v['reserved.broker.max.id']}); "
                "raise reserved.broker.max.id or pick a smaller id",
                "broker.id",
            )
        self._node_id = configured
        # log dirs
        self._log_dirs = list(v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"])
        # retention
        retention = self._first_of(
            ("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)
        )
        if retention == 0:
            key = next(
                k
                for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
                if v[k] is not None
            )
            raise ConfigError(f"{key}: expected -1 (unlimited) or a positive value, got 0", key)
        self._retention_ms = -1 if retention < 0 else retention
        # connections and requests
        self._ip_overrides = _parse_host_counts(v["max.connections.per.ip.overrides"] or "")
        if v["max.connections.per.ip"] == 0 and not self._ip_overrides:
            raise ConfigError(
                "max.connections.per.ip: 0 is allowed only with max.connections.per.ip.overrides "
                "naming the addresses that may connect",
                "max.connections.per.ip",
            )
        queued = v["queued.max.request.bytes"]
        if 0 < queued < v["socket.request.max.bytes"]:
            raise ConfigError(
                f"queued.max.request.bytes: must be -1 (no limit) or at least socket.request.max.bytes "
                f"({v['socket.request.max.bytes']}), so that the largest request fits; got {queued}",
                "queued.max.request.bytes",
            )
        # replication timing
        wait = v["replica.fetch.wait.max.ms"]
        if wait > v["replica.socket.timeout.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms: must not exceed replica.socket.timeout.ms",
                "replica.fetch.wait.max.ms",
            )
        if wait > v["replica.lag.time.max.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms: must not exceed replica.lag.time.max.ms",
                "replica.fetch.wait.max.ms",
            )
        if v["log.cleaner.min.compaction.lag.ms"] > v["log.cleaner.max.compaction.lag.ms"]:
            raise ConfigError(
                "log.cleaner.min.compaction.lag.ms: must not exceed log.cleaner.max.compaction.lag.ms",
                "log.cleaner.min.compaction.lag.ms",
            )
        self._listeners = resolve_listeners(v, self._explicit, self._extra)

    def _warn(self) -> None:
        kraft = [k for k in self._explicit if BROKER_CONFIGS[k].note == KRAFT]
        if kraft:
            log.warning(
                "ignoring KRaft settings %s: Odradek runs as a single node or with ZooKeeper "
                "(controller listeners are not bound)",
                ", ".join(sorted(kraft)),
            )
        deprecated = [k for k in self._explicit if BROKER_CONFIGS[k].note == DEPRECATED]
        if deprecated:
            log.info("deprecated Kafka settings accepted: %s", ", ".join(sorted(deprecated)))


def _looks_secret(key: str) -> bool:
    return key.endswith(".password") or key.endswith("jaas.config") or key.endswith(".secret")


def _raise(problems: list[tuple[str, str]]) -> None:
    if len(problems) == 1:
        key, message = problems[0]
        raise ConfigError(message, key, problems)
    lines = "\n".join(f"  {message}" for _, message in problems)
    raise ConfigError(f"{len(problems)} invalid broker settings:\n{lines}", problems[0][0], problems)


# -- DescribeConfigs entries ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs entry; ``source`` is a ``ConfigSource``, ``type`` a ``ConfigType``."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: int = ConfigType.UNKNOWN
    documentation: str | None = None


def _broker_value(cfg: BrokerConfig, name: str) -> tuple[str | None, int]:
    d = BROKER_CONFIGS[name]
    source = cfg.source(name)
    value = None if d.sensitive else render_value(d, cfg.get(name))
    return value, source


def _topic_default(d: ConfigDef, cfg: BrokerConfig | None) -> tuple[str | None, int]:
    """The value a topic gets without an override, and where it comes from."""
    if cfg is None or not d.synonyms:
        return render_value(d, d.default), ConfigSource.DEFAULT_CONFIG
    for key, factor in d.synonyms:
        value = cfg.get(key)
        if value is None:
            continue
        if factor != 1:
            value *= factor
        if d.name == "retention.ms" and value < 0:
            value = -1
        return render_value(d, value), cfg.source(key)
    return render_value(d, d.default), ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(cfg: BrokerConfig, keys: Iterable[str]) -> list[ConfigSynonym]:
    keys = tuple(keys)
    out = _dynamic_synonyms(cfg, keys)
    static = cfg.static
    for key in keys:
        d = BROKER_CONFIGS[key]
        if static.is_set(key):
            value = None if d.sensitive else render_value(d, static.get(key))
            out.append(ConfigSynonym(key, value, ConfigSource.STATIC_BROKER_CONFIG))
        elif d.default is not None:
            out.append(
                ConfigSynonym(
                    key, None if d.sensitive else render_value(d, d.default), ConfigSource.DEFAULT_CONFIG
                )
            )
    return out


def topic_config_entries(
    topic_overrides: Mapping[str, str], broker_config: BrokerConfig | None
) -> list[ConfigEntry]:
    """Every topic-level config of a topic, for DescribeConfigs and CreateTopics (v5+), by name.

    Source: DYNAMIC_TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG when a broker synonym
    is set in server.properties, DEFAULT_CONFIG otherwise. Synonyms (Kafka's order): the
    override, then the broker synonyms that are set, then those with a default.
    """
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        synonyms: list[ConfigSynonym] = []
        override = topic_overrides.get(name)
        if override is not None:
            synonyms.append(ConfigSynonym(name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if broker_config is not None:
            synonyms.extend(_broker_synonyms(broker_config, (k for k, _ in d.synonyms)))
        if override is not None:
            value, source = override, ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = _topic_default(d, broker_config)
        entries.append(
            ConfigEntry(name, value, int(source), False, False, synonyms, int(d.type), d.documentation)
        )
    return entries


def broker_config_entries(broker_config: BrokerConfig) -> list[ConfigEntry]:
    """Every broker config, for DescribeConfigs on a broker resource. Read-only unless
    dynamically updatable (``DYNAMIC_BROKER_CONFIGS``); the source says which level set it.

    Passwords are sensitive and their value is None. Synonyms list the keys of the same
    setting in other units (log.retention.ms/minutes/hours, ...) that are set or defaulted.
    """
    entries = []
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        value, source = _broker_value(broker_config, name)
        synonyms = _broker_synonyms(broker_config, _BROKER_SYNONYMS.get(name, (name,)))
        # As Kafka: higher-precedence synonyms set before this key's own entries are left out.
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)
        read_only = name not in DYNAMIC_BROKER_CONFIGS
        entries.append(
            ConfigEntry(name, value, int(source), d.sensitive, read_only, synonyms, int(d.type), d.documentation)
        )
    for name in sorted(broker_config.extra):
        secret = _looks_secret(name)
        value = None if secret else broker_config.extra[name]
        entries.append(
            ConfigEntry(
                name,
                value,
                int(ConfigSource.STATIC_BROKER_CONFIG),
                secret,
                True,
                [ConfigSynonym(name, value, int(ConfigSource.STATIC_BROKER_CONFIG))],
                int(ConfigType.PASSWORD if secret else ConfigType.STRING),
                None,
            )
        )
    return entries


# -- topic configs ---------------------------------------------------------------------------


def validate_topic_configs(
    configs: Mapping[str, Any], broker_config: BrokerConfig | None = None
) -> dict[str, str]:
    """Check topic overrides (CreateTopics, AlterConfigs); return them normalised as strings.

    Raises ``ConfigError`` (INVALID_CONFIG) naming the first bad key. ``compression.type=none``
    is taken as ``uncompressed``. With ``broker_config`` the cross-key checks also see the
    broker's defaults.
    """
    out: dict[str, str] = {}
    for key, raw in configs.items():
        d = TOPIC_CONFIGS.get(key)
        if d is None:
            hint = suggest(key, TOPIC_CONFIGS)
            if not hint and key in BROKER_CONFIGS:
                hint = "; that is a broker config"
            raise ConfigError(f"{key}: unknown topic config{hint}", key)
        if raw is None:
            raise ConfigError(f"{key}: a value is required", key)
        if key == "compression.type" and isinstance(raw, str) and raw.strip().lower() == "none":
            raw = "uncompressed"
        value = parse_value(d, raw)
        if key == "remote.storage.enable" and value:
            raise ConfigError("remote.storage.enable: tiered storage is not supported by Odradek", key)
        out[key] = render_value(d, value)  # type: ignore[assignment]
    _check_compaction_lags(out, broker_config)
    return out


def _check_compaction_lags(overrides: Mapping[str, str], broker_config: BrokerConfig | None) -> None:
    def effective(name: str) -> int:
        if name in overrides:
            return int(overrides[name])
        value, _ = _topic_default(TOPIC_CONFIGS[name], broker_config)
        return int(value)  # type: ignore[arg-type]

    if "min.compaction.lag.ms" in overrides or "max.compaction.lag.ms" in overrides:
        low, high = effective("min.compaction.lag.ms"), effective("max.compaction.lag.ms")
        if low > high:
            key = "min.compaction.lag.ms" if "min.compaction.lag.ms" in overrides else "max.compaction.lag.ms"
            raise ConfigError(
                f"{key}: min.compaction.lag.ms ({low}) must not exceed max.compaction.lag.ms ({high})", key
            )


def effective_topic_config(
    overrides: Mapping[str, Any], broker_config: BrokerConfig | None
) -> dict[str, str]:
    """Every topic-level key with the value in force: the override, else the broker's default.

    The result feeds ``odradek.storage.log_config.LogConfig.from_dict``.
    """
    checked = validate_topic_configs(overrides, broker_config) if overrides else {}
    out: dict[str, str] = {}
    for name, d in TOPIC_CONFIGS.items():
        if name in NO_OP_TOPIC_CONFIGS:
            continue
        if name in checked:
            out[name] = checked[name]
        else:
            value, _ = _topic_default(d, broker_config)
            out[name] = "" if value is None else value
    return out


# -- dynamic broker configs (KIP-226) --------------------------------------------------------
#
# Kafka's dynamically updatable broker keys (DynamicBrokerConfig.AllDynamicConfigs) that mean
# something here. Listener, SSL and SASL keys (per broker in Kafka) wait for security support;
# until then they are read-only like every other key. All of these may be set for one broker
# or as the cluster-wide default.

# The broker-wide defaults of topic configs: each topic key's first synonym (DynamicLogConfig).
DYNAMIC_LOG_CONFIGS = frozenset(
    d.synonyms[0][0] for d in TOPIC_CONFIGS.values() if d.synonyms and d.name not in NO_OP_TOPIC_CONFIGS
)
DYNAMIC_CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "message.max.bytes",
    }
)
# Thread pools (no effect here, one event loop), changed by at most a factor of two, as in Kafka.
DYNAMIC_THREAD_CONFIGS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"}
)
# Kafka's SocketServer keys: only the connection limit is applied at run time here (the
# per-address limits and the creation rate stay read-only until the network server takes them).
DYNAMIC_SOCKET_CONFIGS = frozenset({"max.connections"})
DYNAMIC_PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
DYNAMIC_BROKER_CONFIGS = (
    DYNAMIC_LOG_CONFIGS
    | DYNAMIC_CLEANER_CONFIGS
    | DYNAMIC_THREAD_CONFIGS
    | DYNAMIC_SOCKET_CONFIGS
    | DYNAMIC_PRODUCER_STATE_CONFIGS
    | {"metric.reporters"}
)
assert DYNAMIC_BROKER_CONFIGS <= set(BROKER_CONFIGS), DYNAMIC_BROKER_CONFIGS - set(BROKER_CONFIGS)


def _dynamic_synonyms(cfg: BrokerConfig, keys: tuple[str, ...]) -> list[ConfigSynonym]:
    """Synonyms set dynamically: this broker's first, then the cluster default's (Kafka's order)."""
    out = []
    for source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG):
        layer = cfg.dynamic_layer(source)
        for key in keys:
            if key in layer:
                d = BROKER_CONFIGS[key]
                value = None if d.sensitive else render_value(d, parse_value(d, layer[key]))
                out.append(ConfigSynonym(key, value, int(source)))
    return out


def default_broker_config_entries(broker_config: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs of the cluster-wide default resource (an empty broker name): only the
    keys set at that level, as Kafka answers, each with its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    layer = broker_config.dynamic_layer(source)
    entries = []
    for name in sorted(layer):
        d = BROKER_CONFIGS[name]
        value = None if d.sensitive else render_value(d, parse_value(d, layer[name]))
        synonyms = [
            s
            for s in _dynamic_synonyms(broker_config, _BROKER_SYNONYMS.get(name, (name,)))
            if s.source == source
        ]
        entries.append(
            ConfigEntry(name, value, int(source), d.sensitive, False, synonyms, int(d.type), d.documentation)
        )
    return entries
