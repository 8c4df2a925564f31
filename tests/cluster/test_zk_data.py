"""zk_data: Kafka's znode layout. Decoding uses bytes exactly as Kafka 2.x/3.x brokers wrote them
(copied from `zookeeper-shell get` output); encoding is checked byte for byte where Kafka's
field order is fixed, and by round trip everywhere."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.cluster import zk_data
from odradek.cluster.partitions import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.cluster.zk_data import (
    AclEntry,
    BrokerEndpoint,
    BrokerRegistration,
    ProducerIdBlock,
    ZkDataError,
)

# --------------------------------------------------------------------- paths


def test_paths_follow_kafkas_layout():
    tp = TopicPartition("orders", 3)
    assert zk_data.broker_path(7) == "/brokers/ids/7"
    assert zk_data.topic_path("orders") == "/brokers/topics/orders"
    assert zk_data.topic_partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert zk_data.partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert zk_data.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk_data.config_change_path() == "/config/changes/config_change_"
    assert zk_data.isr_change_path() == "/isr_change_notification/isr_change_"
    assert zk_data.log_dir_event_path() == "/log_dir_event_notification/log_dir_event_"
    assert zk_data.entity_config_path("topics", "orders") == "/config/topics/orders"
    assert zk_data.entity_config_path("brokers", "<default>") == "/config/brokers/<default>"
    assert zk_data.entity_config_path("brokers", "1") == "/config/brokers/1"
    assert zk_data.CLUSTER_ID_PATH == "/cluster/id"
    assert zk_data.CONTROLLER_PATH == "/controller"
    assert zk_data.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert zk_data.BROKER_SEQUENCE_ID_PATH == "/brokers/seqid"
    assert zk_data.PRODUCER_ID_BLOCK_PATH == "/latest_producer_id_block"
    assert zk_data.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert zk_data.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"


def test_persistent_paths_are_the_ones_a_kafka_broker_creates_at_start():
    assert set(zk_data.PERSISTENT_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    }


def test_user_and_client_names_are_sanitized_like_kafkas_sanitizer():
    assert zk_data.sanitize("alice") == "alice"
    assert zk_data.sanitize("User:CN=alice, O=corp") == "User%3ACN%3Dalice%2C%20O%3Dcorp"
    assert zk_data.sanitize("a*b~c") == "a%2Ab%7Ec"
    assert zk_data.sanitize("名") == "%E5%90%8D"
    assert zk_data.desanitize(zk_data.sanitize("User:CN=alice, O=corp*")) == "User:CN=alice, O=corp*"
    assert zk_data.entity_config_path("users", "alice@corp") == "/config/users/alice%40corp"
    assert zk_data.entity_config_path("users", "<default>") == "/config/users/<default>"
    assert zk_data.entity_config_path("clients", "my app") == "/config/clients/my%20app"
    assert zk_data.user_client_entity_path("alice", "<default>") == "users/alice/clients/<default>"
    with pytest.raises(ValueError, match="unknown config entity type"):
        zk_data.entity_config_path("topic", "x")


def test_sequence_number_of_a_notification():
    assert (
        zk_data.sequence_number("/isr_change_notification/isr_change_0000000042", "isr_change_")
        == "0000000042"
    )
    assert zk_data.sequence_number("config_change_0000000001", zk_data.CONFIG_CHANGE_PREFIX) == "0000000001"
    with pytest.raises(ZkDataError):
        zk_data.sequence_number("/isr_change_notification/other", "isr_change_")


# --------------------------------------------------------------------- cluster id and controller


def test_cluster_id_as_kafka_writes_it():
    data = b'{"version":"1","id":"_jMoVOJEQiS8ez1Eo1ucpQ"}'
    assert zk_data.decode_cluster_id(data) == "_jMoVOJEQiS8ez1Eo1ucpQ"
    assert zk_data.encode_cluster_id("_jMoVOJEQiS8ez1Eo1ucpQ") == data
    fresh = zk_data.new_cluster_id()
    assert len(fresh) == 22 and zk_data.decode_uuid(fresh)


def test_kafka_uuid_text_round_trip():
    # Kafka prints topic ids as 22 characters of URL-safe base64 without padding.
    topic_id = zk_data.decode_uuid("RSZ--odYRlSOPGRgukKnAQ")
    assert zk_data.encode_uuid(topic_id) == "RSZ--odYRlSOPGRgukKnAQ"
    value = uuid.uuid4()
    assert zk_data.decode_uuid(zk_data.encode_uuid(value)) == value
    with pytest.raises(ZkDataError, match="not a Kafka Uuid"):
        zk_data.decode_uuid("not-a-uuid")


def test_controller_znode():
    assert (
        zk_data.encode_controller(1, 1643692590537)
        == b'{"version":1,"brokerid":1,"timestamp":"1643692590537"}'
    )
    v1 = zk_data.decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1643692590537"}')
    assert (v1.broker_id, v1.timestamp_ms, v1.kraft_controller_epoch) == (0, 1643692590537, None)
    # Kafka 3.4+ writes version 2 with kraftControllerEpoch -1 when no migration is running.
    v2 = zk_data.decode_controller(
        b'{"version":2,"brokerid":2,"timestamp":"1676813353461","kraftControllerEpoch":-1}'
    )
    assert (v2.broker_id, v2.kraft_controller_epoch) == (2, None)
    migrating = zk_data.decode_controller(
        b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":5}'
    )
    assert migrating.kraft_controller_epoch == 5


def test_controller_epoch_is_plain_text():
    assert zk_data.encode_controller_epoch(17) == b"17"
    assert zk_data.decode_controller_epoch(b"17") == 17
    with pytest.raises(ZkDataError, match="/controller_epoch"):
        zk_data.decode_controller_epoch(b"seventeen")


# --------------------------------------------------------------------- broker registrations

KAFKA_3_9_REGISTRATION = (
    b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://127.0.0.1:9092"],'
    b'"jmx_port":-1,"features":{},"host":"127.0.0.1","timestamp":"1757774749541","port":9092,"version":5}'
)
MULTI_LISTENER_REGISTRATION = (
    b'{"listener_security_protocol_map":{"INSECURE":"PLAINTEXT","ENCRYPTED":"SSL","REPLICATION":"SASL_PLAINTEXT",'
    b'"AUTHENTICATED":"SASL_PLAINTEXT"},"endpoints":["INSECURE://localhost:9092","ENCRYPTED://localhost:19092",'
    b'"REPLICATION://localhost:29092","AUTHENTICATED://localhost:39092"],"jmx_port":-1,"features":{},'
    b'"host":"localhost","timestamp":"1666342423700","port":9092,"version":5}'
)


def test_decode_broker_registration_written_by_kafka_3():
    reg = zk_data.decode_broker_registration(0, KAFKA_3_9_REGISTRATION)
    assert reg.broker_id == 0
    assert reg.endpoints == (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert (reg.rack, reg.jmx_port, reg.timestamp_ms, reg.version, dict(reg.features)) == (
        None,
        -1,
        1757774749541,
        5,
        {},
    )


def test_decode_broker_registration_with_named_listeners():
    reg = zk_data.decode_broker_registration(0, MULTI_LISTENER_REGISTRATION)
    assert [(e.listener_name, e.port, e.security_protocol) for e in reg.endpoints] == [
        ("INSECURE", 9092, "PLAINTEXT"),
        ("ENCRYPTED", 19092, "SSL"),
        ("REPLICATION", 29092, "SASL_PLAINTEXT"),
        ("AUTHENTICATED", 39092, "SASL_PLAINTEXT"),
    ]
    assert reg.endpoint("REPLICATION").host == "localhost"


def test_decode_older_registrations():
    v4 = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafkabroker:9092"],'
        b'"jmx_port":9999,"host":"kafkabroker","timestamp":"1530886155628","port":9092,"version":4,"rack":"dc1"}'
    )
    reg = zk_data.decode_broker_registration(2, v4)
    assert (reg.rack, reg.jmx_port, reg.version) == ("dc1", 9999, 4)
    # Version 2 had no protocol map: listener names are protocol names.
    v2 = b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}'
    assert [e.security_protocol for e in zk_data.decode_broker_registration(3, v2).endpoints] == [
        "PLAINTEXT",
        "SSL",
    ]
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert zk_data.decode_broker_registration(4, v1).endpoints == (
        BrokerEndpoint("PLAINTEXT", "localhost", 9092),
    )


def test_encode_broker_registration_matches_kafkas_json():
    reg = BrokerRegistration(0, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),), timestamp_ms=1757774749541)
    assert zk_data.encode_broker_registration(reg) == KAFKA_3_9_REGISTRATION
    racked = BrokerRegistration(
        5,
        (
            BrokerEndpoint("INTERNAL", "10.0.0.5", 9093, "PLAINTEXT"),
            BrokerEndpoint("EXTERNAL", "::1", 19093, "SSL"),
        ),
        rack="us-east-1a",
        timestamp_ms=42,
        features={"metadata.version": (1, 14)},
    )
    obj = json.loads(zk_data.encode_broker_registration(racked))
    assert obj == {
        "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL"},
        "endpoints": ["INTERNAL://10.0.0.5:9093", "EXTERNAL://[::1]:19093"],
        "jmx_port": -1,
        "features": {"metadata.version": {"min_version": 1, "max_version": 14}},
        "host": "10.0.0.5",
        "timestamp": "42",
        "port": 9093,
        "version": 5,
        "rack": "us-east-1a",
    }
    assert zk_data.decode_broker_registration(5, zk_data.encode_broker_registration(racked)) == racked


def test_registration_without_a_plaintext_listener_has_no_legacy_host():
    reg = BrokerRegistration(1, (BrokerEndpoint("SSL", "h", 9093, "SSL"),))
    obj = json.loads(zk_data.encode_broker_registration(reg))
    assert (obj["host"], obj["port"]) == (None, -1)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"not json", "not JSON"),
        (b"[1,2]", "expected a JSON object"),
        (b'{"version":5,"endpoints":["PLAINTEXT://h:9092"]}', None),  # jmx_port and friends are optional
        (b'{"version":5,"jmx_port":-1,"endpoints":["nonsense"]}', "not LISTENER://host:port"),
        (b'{"version":5,"jmx_port":-1,"endpoints":["CUSTOM://h:1"]}', "no security protocol"),
        (b'{"version":0,"endpoints":[]}', "unsupported registration version"),
    ],
)
def test_bad_broker_registrations_name_the_znode(data, message):
    if message is None:
        assert zk_data.decode_broker_registration(9, data).endpoints[0].port == 9092
        return
    with pytest.raises(ZkDataError, match=message) as info:
        zk_data.decode_broker_registration(9, data)
    assert "/brokers/ids/9" in str(info.value)


# --------------------------------------------------------------------- topics and partition state


def test_decode_topic_written_by_kafka_3():
    data = (
        b'{"removing_replicas":{},"partitions":{"2":[2,1],"1":[1,3],"0":[3,2]},'
        b'"topic_id":"RSZ--odYRlSOPGRgukKnAQ","adding_replicas":{},"version":3}'
    )
    topic = zk_data.decode_topic_assignment("test-topic", data)
    assert topic.topic_id == zk_data.decode_uuid("RSZ--odYRlSOPGRgukKnAQ")
    assert list(topic.partitions) == [0, 1, 2]
    assert topic.partitions[0] == ReplicaAssignment((3, 2))
    assert not any(a.is_being_reassigned for a in topic.partitions.values())


def test_decode_topic_from_before_topic_ids_and_during_a_reassignment():
    old = zk_data.decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[1],"1":[2]}}')
    assert old.topic_id is None and old.partitions[1] == ReplicaAssignment((2,))
    moving = zk_data.decode_topic_assignment(
        "t",
        b'{"version":2,"partitions":{"0":[4,1,2,3]},"adding_replicas":{"0":[4]},"removing_replicas":{"0":[3]}}',
    )
    assignment = moving.partitions[0]
    assert assignment.origin_replicas == (1, 2, 3) and assignment.target_replicas == (4, 1, 2)


def test_topic_round_trip_and_exact_field_names():
    topic_id = uuid.UUID("451c8cfa-8762-4652-b88f-1460ba42a701")
    partitions = {1: ReplicaAssignment((2, 3)), 0: ReplicaAssignment((1, 2, 3), (3,), ())}
    data = zk_data.encode_topic_assignment(topic_id, partitions)
    assert json.loads(data) == {
        "removing_replicas": {},
        "partitions": {"0": [1, 2, 3], "1": [2, 3]},
        "topic_id": zk_data.encode_uuid(topic_id),
        "adding_replicas": {"0": [3]},
        "version": 3,
    }
    decoded = zk_data.decode_topic_assignment("orders", data)
    assert decoded.topic_id == topic_id and decoded.partitions == dict(sorted(partitions.items()))


def test_partition_state_as_kafka_writes_it():
    tp = TopicPartition("__consumer_offsets", 0)
    data = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    state = zk_data.decode_partition_state(tp, data, zk_version=4)
    assert state == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3, 1), zk_version=4), 1)
    assert zk_data.encode_partition_state(state) == data


def test_partition_state_carries_recovery_state_only_while_recovering():
    tp = TopicPartition("t", 0)
    recovering = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 7, (3,), LeaderRecoveryState.RECOVERING), 2)
    data = zk_data.encode_partition_state(recovering)
    assert (
        data
        == b'{"controller_epoch":2,"leader":3,"version":1,"leader_epoch":7,"isr":[3],"leader_recovery_state":1}'
    )
    assert zk_data.decode_partition_state(tp, data, 0) == recovering
    explicit_zero = (
        b'{"controller_epoch":2,"leader":3,"version":1,"leader_epoch":7,"isr":[3],"leader_recovery_state":0}'
    )
    assert zk_data.decode_partition_state(tp, explicit_zero, 0).leader_and_isr.leader_recovery_state == 0


@pytest.mark.parametrize(
    "data, message",
    [
        (b'{"controller_epoch":1,"version":1,"leader_epoch":0,"isr":[1]}', "no 'leader'"),
        (b'{"controller_epoch":1,"leader":"1","version":1,"leader_epoch":0,"isr":[1]}', "'leader' is '1'"),
        (b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":"1"}', "isr"),
        (
            b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":7}',
            "recovery",
        ),
    ],
)
def test_bad_partition_state_names_the_znode(data, message):
    with pytest.raises(ZkDataError, match=message) as info:
        zk_data.decode_partition_state(TopicPartition("t", 5), data, 0)
    assert "/brokers/topics/t/partitions/5/state" in str(info.value)


# --------------------------------------------------------------------- configs


def test_entity_config():
    assert zk_data.decode_entity_config(b'{"version":1,"config":{"flush.messages":"12345"}}') == {
        "flush.messages": "12345"
    }
    assert (
        zk_data.encode_entity_config({"retention.ms": "1000"})
        == b'{"version":1,"config":{"retention.ms":"1000"}}'
    )
    assert zk_data.decode_entity_config(b"") == {}
    assert zk_data.decode_entity_config(b'{"version":1,"config":{}}') == {}
    with pytest.raises(ZkDataError, match="strings"):
        zk_data.decode_entity_config(b'{"version":1,"config":{"a":1}}', "/config/topics/t")


def test_config_change_notification():
    data = zk_data.encode_config_change(zk_data.config_entity_path("topics", "orders"))
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert zk_data.decode_config_change(data) == "topics/orders"
    with pytest.raises(ZkDataError, match="version 1 is not supported"):
        zk_data.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"x"}')


# --------------------------------------------------------------------- admin requests and notifications


def test_legacy_reassignment_request():
    data = b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}'
    assert zk_data.decode_reassignment(data) == {TopicPartition("foo", 1): (1, 2, 3)}
    assert zk_data.encode_reassignment({TopicPartition("foo", 1): [1, 2, 3]}) == data
    # kafka-reassign-partitions' own file format also carries log_dirs; the znode reader ignores it.
    with_dirs = (
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2],"log_dirs":["any"]}]}'
    )
    assert zk_data.decode_reassignment(with_dirs) == {TopicPartition("foo", 0): (2,)}


def test_preferred_replica_election_and_isr_change():
    partitions = {TopicPartition("a", 0), TopicPartition("b", 3)}
    data = zk_data.encode_preferred_replica_election(partitions)
    assert data == b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":3}]}'
    assert zk_data.decode_preferred_replica_election(data) == partitions
    assert zk_data.decode_isr_change(zk_data.encode_isr_change(partitions)) == partitions
    with pytest.raises(ZkDataError, match="'partition'"):
        zk_data.decode_isr_change(b'{"version":1,"partitions":[{"topic":"a"}]}')


def test_log_dir_event_notification():
    data = zk_data.encode_log_dir_event(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert zk_data.decode_log_dir_event(data) == 3


def test_producer_id_block():
    data = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    block = zk_data.decode_producer_id_block(data)
    assert block == ProducerIdBlock(0, 0, 999) and block.size == zk_data.PRODUCER_ID_BLOCK_SIZE
    assert zk_data.encode_producer_id_block(block) == data
    with pytest.raises(ZkDataError, match="not integers"):
        zk_data.decode_producer_id_block(b'{"version":1,"broker":0,"block_start":"x","block_end":"9"}')


# --------------------------------------------------------------------- ACLs


def test_acl_paths():
    assert zk_data.acl_path("TOPIC", "orders") == "/kafka-acl/Topic/orders"
    assert zk_data.acl_path("TRANSACTIONAL_ID", "tx") == "/kafka-acl/TransactionalId/tx"
    assert zk_data.acl_path("CLUSTER", "kafka-cluster") == "/kafka-acl/Cluster/kafka-cluster"
    assert zk_data.acl_path("GROUP", "grp-", "PREFIXED") == "/kafka-acl-extended/prefixed/Group/grp-"
    assert zk_data.acl_change_path() == "/kafka-acl-changes/acl_changes_"
    assert zk_data.acl_change_path("PREFIXED") == "/kafka-acl-extended-changes/acl_changes_"
    with pytest.raises(ValueError, match="unknown ACL resource type"):
        zk_data.acl_path("Topic", "x")


def test_acls_as_kafka_writes_them():
    data = (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
        b'{"principal":"User:bob","permissionType":"Deny","operation":"DescribeConfigs","host":"10.0.0.1"}]}'
    )
    entries = zk_data.decode_acls(data, "/kafka-acl/Topic/orders")
    assert entries == [
        AclEntry("User:alice", "ALLOW", "READ", "*"),
        AclEntry("User:bob", "DENY", "DESCRIBE_CONFIGS", "10.0.0.1"),
    ]
    assert zk_data.encode_acls(entries) == data
    assert zk_data.decode_acls(b"") == []


def test_acl_change_notifications():
    assert zk_data.encode_acl_change("TOPIC", "orders") == b"TOPIC:orders"
    assert zk_data.decode_acl_change(b"TOPIC:orders") == ("TOPIC", "orders", "LITERAL")
    # Brokers before 2.0 wrote the resource type in Pascal case; names may contain ':'.
    assert zk_data.decode_acl_change(b"Group:a:b") == ("GROUP", "a:b", "LITERAL")
    prefixed = zk_data.encode_acl_change("TOPIC", "ord", "PREFIXED")
    assert json.loads(prefixed) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    assert zk_data.decode_acl_change(prefixed, "PREFIXED") == ("TOPIC", "ord", "PREFIXED")
    with pytest.raises(ZkDataError):
        zk_data.decode_acl_change(b"no-separator")


def test_pascal_case_conversions():
    assert zk_data.pascal_case("IDEMPOTENT_WRITE") == "IdempotentWrite"
    assert zk_data.enum_name("IdempotentWrite") == "IDEMPOTENT_WRITE"
    assert zk_data.enum_name("All") == "ALL"
    assert zk_data.enum_name("TRANSACTIONAL_ID") == "TRANSACTIONAL_ID"
