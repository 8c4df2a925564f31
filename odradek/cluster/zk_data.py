"""Every ZooKeeper path Odradek uses and the bytes stored there, in Kafka's ZooKeeper-mode layout.

Kafka's ``ZkData.scala`` as our own Python: the same znodes, the same JSON field names and
versions, so ZK-era tools and habits (``zookeeper-shell get /brokers/ids/1``, Burrow, Cruise
Control, a Kafka broker reading the same chroot) see what they expect. Paths are relative to
the chroot of ``zookeeper.connect``; the ZooKeeper client adds it.

Pure functions: ``*_path`` builds a path, ``encode_*`` returns the bytes to store,
``decode_*`` parses what Kafka (or we) wrote and raises ``ZkDataError`` naming the znode when
the bytes are not what the layout says. JSON is written as Kafka's Jackson writes it:
compact, UTF-8.

Layout (Kafka 3.x, ZooKeeper mode)::

    /cluster/id                          {"version":"1","id":"<base64 uuid>"}
    /controller            (ephemeral)   {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                    1                      (plain text)
    /brokers/ids/<id>      (ephemeral)   broker registration, JSON version 5
    /brokers/seqid                       empty; its znode version generates broker ids
    /brokers/topics/<t>                  {"version":3,"topic_id":..,"partitions":{"0":[1,2]},
                                          "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>/state
                                         {"controller_epoch":1,"leader":1,"version":1,
                                          "leader_epoch":0,"isr":[1,2]}
    /config/<type>/<name>                {"version":1,"config":{"k":"v"}}
                                         type: topics, brokers, users, clients, ips
    /config/changes/config_change_<seq>  {"version":2,"entity_path":"topics/t"}
    /admin/delete_topics/<t>             empty
    /admin/reassign_partitions           {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}
    /admin/preferred_replica_election    {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /isr_change_notification/isr_change_<seq>
                                         {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /log_dir_event_notification/log_dir_event_<seq>
                                         {"version":1,"broker":1,"event":1}
    /latest_producer_id_block            {"version":1,"broker":1,"block_start":"0","block_end":"999"}
    /kafka-acl/<ResourceType>/<name>     {"version":1,"acls":[{"principal":..,"permissionType":"Allow",
                                          "operation":"Read","host":"*"}]}
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   same JSON
    /kafka-acl-changes/acl_changes_<seq>                 TOPIC:<name>   (plain text)
    /kafka-acl-extended-changes/acl_changes_<seq>        {"version":1,"resourceType":"TOPIC",
                                                          "name":..,"patternType":"PREFIXED"}

Called by the ZooKeeper-backed metadata store, the controller and the admin paths; it knows
nothing of connections (zk_client does the I/O).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote_plus

from odradek.cluster.partitions import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.protocol.uuids import encode_uuid  # noqa: F401  (zk_data speaks Kafka's Uuid text)


class ZkDataError(ValueError):
    """A znode's bytes do not match Kafka's layout for that znode."""


# ---------------------------------------------------------------- paths

CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"
CONSUMERS_PATH = "/consumers"  # the pre-0.9 consumers' path; Kafka still creates it
LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"

# Prefixes of sequential znodes; ZooKeeper appends a 10-digit counter.
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
ACL_CHANGE_PREFIX = "acl_changes_"

# Config entity types (Kafka's ConfigType) and the name of the cluster-wide default entity.
TOPIC_CONFIG = "topics"
CLIENT_CONFIG = "clients"
USER_CONFIG = "users"
BROKER_CONFIG = "brokers"
IP_CONFIG = "ips"
CONFIG_ENTITY_TYPES = (TOPIC_CONFIG, CLIENT_CONFIG, USER_CONFIG, BROKER_CONFIG, IP_CONFIG)
DEFAULT_ENTITY = "<default>"

# Persistent znodes a Kafka broker makes sure exist when it starts.
PERSISTENT_PATHS = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{TOPICS_PATH}/{tp.topic}/partitions/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_change_path() -> str:
    """The path to create (sequential) for a config change notification."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def isr_change_path() -> str:
    """The path to create (sequential) for an ISR change notification."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}"


def log_dir_event_path() -> str:
    """The path to create (sequential) for a log directory failure notification."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"


def sequence_number(node: str, prefix: str) -> str:
    """The counter ZooKeeper appended to a sequential znode (``isr_change_0000000007`` → ``0000000007``)."""
    name = node.rsplit("/", 1)[-1]
    if not name.startswith(prefix):
        raise ZkDataError(f"znode {node!r} is not a {prefix}<sequence> notification")
    return name[len(prefix) :]


# ---------------------------------------------------------------- JSON helpers


def _dump(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _load(data: bytes | None, znode: str) -> dict:
    if not data:
        raise ZkDataError(f"{znode} is empty; expected Kafka's JSON")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{znode} is not JSON ({exc}): {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise ZkDataError(f"{znode} holds {type(value).__name__}, expected a JSON object: {data[:200]!r}")
    return value


def _field(obj: Mapping, key: str, kind: type | tuple[type, ...], znode: str):
    try:
        value = obj[key]
    except KeyError:
        raise ZkDataError(f"{znode} has no {key!r}: {obj}") from None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ZkDataError(f"{znode} field {key!r} is {value!r}, not {getattr(kind, '__name__', kind)}")
    return value


def _int_list(value, znode: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ZkDataError(f"{znode} {what} is {value!r}, not a list of broker ids")
    return tuple(value)


def _partitions_list(obj: Mapping, znode: str) -> list[dict]:
    partitions = _field(obj, "partitions", list, znode)
    if not all(isinstance(p, dict) for p in partitions):
        raise ZkDataError(f"{znode} 'partitions' must be a list of objects: {partitions!r}")
    return partitions


def _topic_partition(entry: Mapping, znode: str) -> TopicPartition:
    return TopicPartition(_field(entry, "topic", str, znode), _field(entry, "partition", int, znode))


# ---------------------------------------------------------------- topic ids and cluster id


def decode_uuid(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 16:
        raise ZkDataError(f"{text!r} is not a Kafka Uuid (22 characters of URL-safe base64)")
    return uuid.UUID(bytes=raw)


def new_cluster_id() -> str:
    """A fresh cluster id, as Kafka generates one the first time a broker starts."""
    return encode_uuid(uuid.uuid4())


def encode_cluster_id(cluster_id: str) -> bytes:
    # Kafka writes this version as a string.
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _field(_load(data, CLUSTER_ID_PATH), "id", str, CLUSTER_ID_PATH)


# ---------------------------------------------------------------- controller


@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int = 0
    # Only present when a KRaft controller took over during a ZooKeeper-to-KRaft migration.
    kraft_controller_epoch: int | None = None


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """What the elected controller writes to the ephemeral ``/controller`` (Kafka's version 1)."""
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> ControllerRegistration:
    obj = _load(data, CONTROLLER_PATH)
    kraft_epoch = obj.get("kraftControllerEpoch")
    timestamp = obj.get("timestamp", "0")
    return ControllerRegistration(
        _field(obj, "brokerid", int, CONTROLLER_PATH),
        int(timestamp) if str(timestamp).lstrip("-").isdigit() else 0,
        kraft_epoch if isinstance(kraft_epoch, int) and kraft_epoch >= 0 else None,
    )


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (UnicodeDecodeError, ValueError, AttributeError):
        raise ZkDataError(f"{CONTROLLER_EPOCH_PATH} holds {data!r}, not an integer") from None


# ---------------------------------------------------------------- broker registration

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
BROKER_REGISTRATION_VERSION = 5
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class BrokerEndpoint:
    listener_name: str
    host: str | None
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """``LISTENER://host:port`` (IPv6 hosts in brackets), as Kafka writes it in ``endpoints``."""
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.listener_name}://{host}:{self.port}"


def parse_endpoint(text: str, security_protocol_map: Mapping[str, str] | None = None) -> BrokerEndpoint:
    """``LISTENER://host:port`` → BrokerEndpoint; the security protocol comes from the map, or
    is the listener name itself when that names a protocol (no map, as in old registrations)."""
    match = _ENDPOINT.match(text)
    if match is None:
        raise ZkDataError(f"broker endpoint {text!r} is not LISTENER://host:port")
    listener, host, port = match.group(1), match.group(2), int(match.group(3))
    if security_protocol_map is not None and listener in security_protocol_map:
        protocol = security_protocol_map[listener]
    elif listener in SECURITY_PROTOCOLS:
        protocol = listener
    else:
        raise ZkDataError(f"broker endpoint {text!r}: no security protocol for listener {listener!r}")
    return BrokerEndpoint(listener, host or None, port, protocol)


@dataclass(frozen=True)
class BrokerRegistration:
    """The ephemeral ``/brokers/ids/<id>``: how to reach a live broker, and its rack."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    # KIP-584 supported features: name → (min_version, max_version).
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = BROKER_REGISTRATION_VERSION

    def __post_init__(self):
        object.__setattr__(self, "endpoints", tuple(self.endpoints))

    def moved_from(self, old: BrokerRegistration | None) -> bool:
        """Whether this registration gives the broker other addresses (or rack) than ``old``."""
        return old is not None and (old.endpoints, old.rack) != (self.endpoints, self.rack)

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def inter_broker_endpoint(self, listener_name: str | None) -> BrokerEndpoint | None:
        """Where the other brokers reach this one: its endpoint of ``inter.broker.listener.name``
        (every broker of a cluster has the same), else its first."""
        found = self.endpoint(listener_name) if listener_name else None
        return found or (self.endpoints[0] if self.endpoints else None)


def encode_broker_registration(registration: BrokerRegistration) -> bytes:
    # Top-level host/port are for clients older than 0.10: the first PLAINTEXT endpoint, if any.
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    obj: dict = {
        "listener_security_protocol_map": {
            e.listener_name: e.security_protocol for e in registration.endpoints
        },
        "endpoints": [e.connection_string for e in registration.endpoints],
        "jmx_port": registration.jmx_port,
        "features": {
            name: {"min_version": low, "max_version": high}
            for name, (low, high) in registration.features.items()
        },
        "host": plaintext.host if plaintext else None,
        "timestamp": str(registration.timestamp_ms),
        "port": plaintext.port if plaintext else -1,
        "version": registration.version,
    }
    if registration.rack is not None:
        obj["rack"] = registration.rack
    return _dump(obj)


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerRegistration:
    znode = broker_path(broker_id)
    obj = _load(data, znode)
    version = _field(obj, "version", int, znode)
    if version < 1:
        raise ZkDataError(f"{znode} has unsupported registration version {version}")
    if version == 1:
        endpoints = (
            BrokerEndpoint("PLAINTEXT", _field(obj, "host", str, znode), _field(obj, "port", int, znode)),
        )
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        if protocol_map is not None and not isinstance(protocol_map, dict):
            raise ZkDataError(f"{znode} listener_security_protocol_map is {protocol_map!r}")
        listeners = _field(obj, "endpoints", list, znode)
        try:
            endpoints = tuple(parse_endpoint(str(text), protocol_map) for text in listeners)
        except ZkDataError as exc:
            raise ZkDataError(f"{znode}: {exc}") from None
    features = {}
    for name, versions in (obj.get("features") or {}).items():
        if not isinstance(versions, dict) or "max_version" not in versions:
            raise ZkDataError(f"{znode} feature {name!r} is {versions!r}")
        features[name] = (int(versions.get("min_version", 1)), int(versions["max_version"]))
    timestamp = str(obj.get("timestamp", "0"))
    rack = obj.get("rack")
    return BrokerRegistration(
        broker_id,
        endpoints,
        rack if isinstance(rack, str) else None,
        int(obj.get("jmx_port", -1)),
        int(timestamp) if timestamp.lstrip("-").isdigit() else 0,
        features,
        version,
    )


# ---------------------------------------------------------------- topics and partition state

TOPIC_ZNODE_VERSION = 3


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: the topic id and each partition's replicas."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic_assignment(topic_id: uuid.UUID | None, partitions: Mapping[int, ReplicaAssignment]) -> bytes:
    ordered = sorted(partitions.items())
    obj: dict = {
        "removing_replicas": {str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas},
        "partitions": {str(p): list(a.replicas) for p, a in ordered},
    }
    if topic_id is not None:
        obj["topic_id"] = encode_uuid(topic_id)
    obj["adding_replicas"] = {str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas}
    obj["version"] = TOPIC_ZNODE_VERSION
    return _dump(obj)


def decode_topic_assignment(topic: str, data: bytes) -> TopicAssignment:
    znode = topic_path(topic)
    obj = _load(data, znode)
    topic_id = obj.get("topic_id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise ZkDataError(f"{znode} topic_id is {topic_id!r}")

    def per_partition(key: str) -> dict[str, tuple[int, ...]]:
        value = obj.get(key) or {}
        if not isinstance(value, dict):
            raise ZkDataError(f"{znode} {key!r} is {value!r}, not an object")
        return {p: _int_list(replicas, znode, f"{key}[{p}]") for p, replicas in value.items()}

    adding, removing = per_partition("adding_replicas"), per_partition("removing_replicas")
    partitions = {}
    for p, replicas in per_partition("partitions").items():
        if not p.lstrip("-").isdigit():
            raise ZkDataError(f"{znode} has partition key {p!r}, not a number")
        partitions[int(p)] = ReplicaAssignment(replicas, adding.get(p, ()), removing.get(p, ()))
    return TopicAssignment(
        topic, decode_uuid(topic_id) if topic_id else None, dict(sorted(partitions.items()))
    )


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    lai = state.leader_and_isr
    obj: dict = {
        "controller_epoch": state.controller_epoch,
        "leader": lai.leader,
        "version": 1,
        "leader_epoch": lai.leader_epoch,
        "isr": list(lai.isr),
    }
    # Kafka writes the recovery state only when it is not the default (RECOVERED).
    if lai.leader_recovery_state != LeaderRecoveryState.RECOVERED:
        obj["leader_recovery_state"] = int(lai.leader_recovery_state)
    return _dump(obj)


def decode_partition_state(tp: TopicPartition, data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    """The state znode's JSON plus its znode version (which conditional updates must match)."""
    znode = partition_state_path(tp)
    obj = _load(data, znode)
    recovery = obj.get("leader_recovery_state", 0)
    if recovery not in (0, 1):
        raise ZkDataError(f"{znode} leader_recovery_state is {recovery!r}")
    leader_and_isr = LeaderAndIsr(
        _field(obj, "leader", int, znode),
        _field(obj, "leader_epoch", int, znode),
        _int_list(obj.get("isr"), znode, "isr"),
        LeaderRecoveryState(recovery),
        zk_version,
    )
    return LeaderIsrAndControllerEpoch(leader_and_isr, _field(obj, "controller_epoch", int, znode))


# ---------------------------------------------------------------- configs


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encode a user principal or client id for use as a znode name
    (Java's URLEncoder, then ``*`` → ``%2A`` and space → ``%20``)."""
    out = []
    for byte in name.encode():
        char = chr(byte)
        if char.isascii() and (char.isalnum() or char in "._-"):
            out.append(char)
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def desanitize(name: str) -> str:
    return unquote_plus(name)


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """The entity path relative to ``/config`` (``topics/orders``, ``users/alice%40corp``): the
    znode's name below /config and the ``entity_path`` of a change notification. User and
    client names are sanitized; ``<default>`` is kept as is."""
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ValueError(
            f"unknown config entity type {entity_type!r}; expected one of {', '.join(CONFIG_ENTITY_TYPES)}"
        )
    if entity_type in (USER_CONFIG, CLIENT_CONFIG) and entity_name != DEFAULT_ENTITY:
        entity_name = sanitize(entity_name)
    return f"{entity_type}/{entity_name}"


def user_client_entity_path(user: str, client_id: str) -> str:
    """Quotas for one client id of one user: ``users/<user>/clients/<client>``."""
    return f"{config_entity_path(USER_CONFIG, user)}/{config_entity_path(CLIENT_CONFIG, client_id)}"


def entity_config_path(entity_type: str, entity_name: str) -> str:
    """``/config/<type>/<name>`` (see ``config_entity_path``)."""
    return f"{CONFIG_PATH}/{config_entity_path(entity_type, entity_name)}"


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes | None, znode: str = CONFIG_PATH) -> dict[str, str]:
    """An entity's config overrides; an empty znode (as Kafka sometimes leaves) means none."""
    if not data:
        return {}
    config = _load(data, znode).get("config") or {}
    if not isinstance(config, dict):
        raise ZkDataError(f"{znode} 'config' is {config!r}, not an object")
    if not all(isinstance(v, str) for v in config.values()):
        raise ZkDataError(f"{znode} config values must be strings: {config}")
    return dict(config)


def encode_config_change(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The ``entity_path`` (``topics/orders``) a config change notification points at."""
    znode = CONFIG_CHANGES_PATH
    obj = _load(data, znode)
    if obj.get("version") != 2:
        raise ZkDataError(
            f"{znode} notification version {obj.get('version')!r} is not supported (expected 2)"
        )
    return _field(obj, "entity_path", str, znode)


# ---------------------------------------------------------------- admin requests and notifications


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """The legacy (pre-KIP-455) ``/admin/reassign_partitions`` request."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _dump({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    znode = REASSIGN_PARTITIONS_PATH
    obj = _load(data, znode)
    return {
        _topic_partition(entry, znode): _int_list(entry.get("replicas"), znode, "replicas")
        for entry in _partitions_list(obj, znode)
    }


def _encode_partition_set(partitions: Iterable[TopicPartition]) -> bytes:
    entries = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return _dump({"version": 1, "partitions": entries})


def _decode_partition_set(data: bytes, znode: str) -> set[TopicPartition]:
    obj = _load(data, znode)
    return {_topic_partition(entry, znode) for entry in _partitions_list(obj, znode)}


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    return _decode_partition_set(data, PREFERRED_REPLICA_ELECTION_PATH)


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_isr_change(data: bytes) -> set[TopicPartition]:
    return _decode_partition_set(data, ISR_CHANGE_NOTIFICATION_PATH)


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker whose log directory failed."""
    return _field(
        _load(data, LOG_DIR_EVENT_NOTIFICATION_PATH), "broker", int, LOG_DIR_EVENT_NOTIFICATION_PATH
    )


# ---------------------------------------------------------------- producer ids

PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ProducerIdBlock:
    """The last block of producer ids handed out (inclusive bounds), and to which broker."""

    broker_id: int
    first_producer_id: int
    last_producer_id: int

    @property
    def size(self) -> int:
        return self.last_producer_id - self.first_producer_id + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.first_producer_id),
            "block_end": str(block.last_producer_id),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    znode = PRODUCER_ID_BLOCK_PATH
    obj = _load(data, znode)
    try:
        start = int(_field(obj, "block_start", str, znode))
        end = int(_field(obj, "block_end", str, znode))
    except ValueError:
        raise ZkDataError(f"{znode} block bounds are not integers: {obj}") from None
    return ProducerIdBlock(_field(obj, "broker", int, znode), start, end)


# ---------------------------------------------------------------- ACLs

ACL_RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
ACL_PATTERN_TYPES = ("LITERAL", "PREFIXED")


def pascal_case(enum_name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` → ``TransactionalId``."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


def enum_name(pascal: str) -> str:
    """The reverse: ``DescribeConfigs`` → ``DESCRIBE_CONFIGS`` (enum names pass through)."""
    if pascal.isupper() or "_" in pascal:
        return pascal.upper()
    return re.sub(r"(?<!^)(?=[A-Z])", "_", pascal).upper()


def _check_resource(resource_type: str, pattern_type: str) -> None:
    if resource_type not in ACL_RESOURCE_TYPES:
        raise ValueError(
            f"unknown ACL resource type {resource_type!r}; expected one of {', '.join(ACL_RESOURCE_TYPES)}"
        )
    if pattern_type not in ACL_PATTERN_TYPES:
        raise ValueError(f"unknown ACL pattern type {pattern_type!r}; expected LITERAL or PREFIXED")


def acl_path(resource_type: str, resource_name: str, pattern_type: str = "LITERAL") -> str:
    """Where a resource's ACLs live: ``/kafka-acl/Topic/orders`` (literal) or
    ``/kafka-acl-extended/prefixed/Topic/ord`` (prefixed). Types are Kafka's enum names."""
    _check_resource(resource_type, pattern_type)
    root = LITERAL_ACL_PATH if pattern_type == "LITERAL" else f"{EXTENDED_ACL_PATH}/{pattern_type.lower()}"
    return f"{root}/{pascal_case(resource_type)}/{resource_name}"


@dataclass(frozen=True)
class AclEntry:
    """One access control entry; operation and permission as Kafka's enum names (READ, ALLOW)."""

    principal: str
    permission_type: str
    operation: str
    host: str = "*"


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": pascal_case(e.permission_type),
            "operation": pascal_case(e.operation),
            "host": e.host,
        }
        for e in entries
    ]
    return _dump({"version": 1, "acls": acls})


def decode_acls(data: bytes | None, znode: str = LITERAL_ACL_PATH) -> list[AclEntry]:
    if not data:
        return []
    obj = _load(data, znode)
    if obj.get("version") != 1:
        raise ZkDataError(f"{znode} ACL version {obj.get('version')!r} is not supported (expected 1)")
    entries = []
    for item in _field(obj, "acls", list, znode):
        if not isinstance(item, dict):
            raise ZkDataError(f"{znode} ACL entry {item!r} is not an object")
        entries.append(
            AclEntry(
                _field(item, "principal", str, znode),
                enum_name(_field(item, "permissionType", str, znode)),
                enum_name(_field(item, "operation", str, znode)),
                _field(item, "host", str, znode),
            )
        )
    return entries


def acl_change_path(pattern_type: str = "LITERAL") -> str:
    """The path to create (sequential) to tell brokers a resource's ACLs changed."""
    root = LITERAL_ACL_CHANGES_PATH if pattern_type == "LITERAL" else EXTENDED_ACL_CHANGES_PATH
    return f"{root}/{ACL_CHANGE_PREFIX}"


def encode_acl_change(resource_type: str, resource_name: str, pattern_type: str = "LITERAL") -> bytes:
    _check_resource(resource_type, pattern_type)
    if pattern_type == "LITERAL":
        return f"{resource_type}:{resource_name}".encode()
    return _dump(
        {"version": 1, "resourceType": resource_type, "name": resource_name, "patternType": pattern_type}
    )


def decode_acl_change(data: bytes, pattern_type: str = "LITERAL") -> tuple[str, str, str]:
    """``(resource_type, resource_name, pattern_type)`` of an ACL change notification."""
    if pattern_type == "LITERAL":
        text = data.decode(errors="replace")
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise ZkDataError(f"{LITERAL_ACL_CHANGES_PATH} notification {text!r} is not ResourceType:name")
        result = (enum_name(resource_type), name, "LITERAL")
    else:
        obj = _load(data, EXTENDED_ACL_CHANGES_PATH)
        result = (
            enum_name(_field(obj, "resourceType", str, EXTENDED_ACL_CHANGES_PATH)),
            _field(obj, "name", str, EXTENDED_ACL_CHANGES_PATH),
            _field(obj, "patternType", str, EXTENDED_ACL_CHANGES_PATH).upper(),
        )
    try:
        _check_resource(result[0], result[2])
    except ValueError as exc:
        raise ZkDataError(str(exc)) from None
    return result

