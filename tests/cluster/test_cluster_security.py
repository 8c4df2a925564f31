"""Security in a ZooKeeper-mode cluster (issue 17): three brokers with Kafka's ACL authorizer
and two SASL_PLAINTEXT listeners, clients on SCRAM-SHA-512 and the brokers between them on
INTERNAL with SCRAM-SHA-256 as the super user ``broker`` (made in ZooKeeper before they
start, as kafka-configs --zookeeper does). Users,
ACLs and quotas changed through one broker apply on the others (ZooKeeper's /config/users,
/kafka-acl, /config/clients with their change notifications), and a restarted broker reads
them back; a user without ClusterAction cannot steer replicas."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from odradek.client.structs import NewTopic
from odradek.cluster.controller_channel import BrokerLink
from odradek.cluster.zk_security_store import write_scram_credentials
from odradek.net.connection_security import ConnectionSecurity
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker.controlled_shutdown_schema import ControlledShutdownRequest
from odradek.protocol.inter_broker.leader_and_isr_schema import LeaderAndIsrRequest
from odradek.protocol.inter_broker.stop_replica_schema import StopReplicaRequest
from odradek.protocol.inter_broker.update_metadata_schema import UpdateMetadataRequest
from odradek.protocol.messages import build_request
from odradek.protocol.sasl_mechanisms import ScramCredential
from odradek.testing.process import free_port
from tests.cluster.control_support import ZkReader, cluster_on
from tests.security.certs import KEY_PASSWORD, make_tls_files
from tests.support import wait_until

CLIENT_SCRAM, BROKER_SCRAM = "SCRAM-SHA-512", "SCRAM-SHA-256"
TOPIC, WRITE, DESCRIBE, ALLOW, LITERAL = 2, 4, 8, 3, 3  # Kafka's ACL codes
LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"
# Clients on the first listener (SCRAM-SHA-512); the brokers between them on INTERNAL
# (SCRAM-SHA-256 only), so a broker reaching another through the wrong listener fails.
SECURED = {
    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": CLIENT_SCRAM,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{LOGIN};",
    "listener.name.internal.sasl.enabled.mechanisms": BROKER_SCRAM,
    "listener.name.internal.scram-sha-256.sasl.jaas.config": f'{LOGIN} username="broker" password="broker-secret";',
    "inter.broker.listener.name": "INTERNAL",
    "sasl.mechanism.inter.broker.protocol": BROKER_SCRAM,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:broker;User:admin",
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 300,
}


def sasl(user: str, password: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": CLIENT_SCRAM, "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def cluster(zookeeper):
    cluster = cluster_on(zookeeper, 3, overrides=SECURED, client_settings=sasl("admin", "admin-secret"))
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{free_port()}"
    # before the brokers start: they need "broker" to reach each other (kafka-configs --zookeeper)
    made = subprocess.run(
        [sys.executable, "-m", "odradek", "users", "create", "broker", "-m", BROKER_SCRAM, "--password-stdin",
         "--zookeeper", cluster.zookeeper_connect],
        input="broker-secret", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    credential = ScramCredential.from_password(CLIENT_SCRAM, "admin-secret").to_text()
    asyncio.run(write_scram_credentials(cluster.zookeeper_connect, "admin", {CLIENT_SCRAM: credential}))
    with cluster:
        yield cluster


def _link(cluster, broker_id: int, user: str, client_id: str = "security-test") -> BrokerLink:
    """A connection to exactly this broker, authenticated as ``user`` (password ``<user>-secret``)."""
    b = cluster.brokers[broker_id]
    security = ConnectionSecurity("SASL_PLAINTEXT", mechanism=CLIENT_SCRAM, username=user, password=f"{user}-secret")
    return BrokerLink(b.host, b.port, broker_id, client_id, 10, security)


def send(cluster, broker_id: int, user: str, api_key: int, version: int, body, client_id: str = "security-test"):
    """One request to exactly this broker, authenticated as ``user``."""
    entity = build_request(api_key, version, body) if isinstance(body, dict) else body

    async def go():
        link = _link(cluster, broker_id, user, client_id)
        try:
            return await link.request(api_key, version, entity)
        finally:
            link.close()

    return asyncio.run(go())


def logs_in(cluster, broker_id: int, user: str) -> bool:
    try:
        send(cluster, broker_id, user, 3, 9, _metadata([]))
        return True
    except Exception:
        return False


def _upsert(user: str) -> dict:
    """A SCRAM-SHA-512 credential of ``user`` (password ``<user>-secret``), salted here."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", f"{user}-secret".encode(), salt, 4096)
    return {"name": user, "mechanism": 2, "iterations": 4096, "salt": salt, "salted_password": salted}


def add_user(cluster, user: str, via: int) -> None:
    """AlterUserScramCredentials on broker ``via``."""
    answer = send(cluster, via, "admin", 51, 0, {"deletions": [], "upsertions": [_upsert(user)]})
    assert [r.error_code for r in answer.results] == [ErrorCode.none]


def _acl(user: str, topic: str, operation: int) -> dict:
    return {"resource_type": TOPIC, "resource_name": topic, "resource_pattern_type": LITERAL,
            "principal": f"User:{user}", "host": "*", "operation": operation, "permission_type": ALLOW}  # fmt: skip


def add_acl(cluster, via: int, user: str, topic: str, operation: int) -> None:
    answer = send(cluster, via, "admin", 30, 3, {"creations": [_acl(user, topic, operation)]})
    assert [r.error_code for r in answer.results] == [ErrorCode.none]


def _metadata(topics: list[str]) -> dict:
    return {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}  # fmt: skip


def topic_error(cluster, broker_id: int, user: str, topic: str) -> int:
    (t,) = send(cluster, broker_id, user, 3, 9, _metadata([topic])).topics
    return int(t.error_code)


def topic_on_broker_3(cluster, name: str) -> None:
    cluster._admin_client().create_topics([NewTopic(name, replica_assignments={0: [3]})])
    cluster.wait_for(lambda md: name in md.topics and md.topics[name][0].leader == 3, what=f"{name} led by broker 3")


def throttled_on_broker_3(cluster, user: str, client_id: str, topic: str, timeout: float = 60) -> list[tuple[int, int]]:
    """Produce as ``client_id`` to broker 3 until it reports a throttle: [(broker id, ms)]."""
    throttles: list[tuple[int, int]] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.brokers[3].bootstrap_servers,
            **sasl(user, f"{user}-secret"),
            "client.id": client_id,
            "linger.ms": 0,
            "throttle_cb": lambda event: throttles.append((event.broker_id, event.throttle_time)),
        }
    )
    deadline = time.monotonic() + timeout
    while not any(ms > 0 for _, ms in throttles) and time.monotonic() < deadline:
        producer.produce(topic, b"q" * 10_000)
        producer.poll(0.2)
    producer.flush(30)
    return throttles


def test_a_user_created_through_one_broker_logs_in_on_another(cluster):
    add_user(cluster, "alice", via=1)
    with ZkReader(cluster) as zk:
        credential = zk.json("/config/users/alice")["config"][CLIENT_SCRAM]
    assert credential.startswith("salt=") and ",stored_key=" in credential and credential.endswith(",iterations=4096")
    wait_until(lambda: logs_in(cluster, 3, "alice"), 30, "alice to log in on broker 3")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[3].bootstrap_servers, **sasl("alice", "alice-secret")})
    assert admin.list_topics(timeout=30).brokers.keys() == {1, 2, 3}  # confluent-kafka logs in too
    assert not logs_in(cluster, 3, "nobody")


def test_a_user_created_through_one_broker_can_be_deleted_through_another_at_once(cluster):
    """The deletion reaches broker 2 right after broker 1 answered the creation, over a
    connection already open, before broker 2 can have had the notification: it still finds
    the credential (read from ZooKeeper, as Kafka's brokers do)."""

    async def create_then_delete():
        links = [_link(cluster, b, "admin") for b in (1, 2)]
        try:
            for link in links:  # logged in before the race starts
                await link.request(3, 9, build_request(3, 9, _metadata([])))
            created = await links[0].request(51, 0, build_request(51, 0, {"deletions": [], "upsertions": [_upsert("erin")]}))
            deletion = {"deletions": [{"name": "erin", "mechanism": 2}], "upsertions": []}
            deleted = await links[1].request(51, 0, build_request(51, 0, deletion))
            return created, deleted
        finally:
            for link in links:
                link.close()

    created, deleted = asyncio.run(create_then_delete())
    assert [r.error_code for r in created.results] == [ErrorCode.none]
    assert [(r.user, r.error_code) for r in deleted.results] == [("erin", ErrorCode.none)]
    with ZkReader(cluster) as zk:
        assert CLIENT_SCRAM not in zk.json("/config/users/erin")["config"]
    wait_until(lambda: not logs_in(cluster, 3, "erin"), 30, "erin to be refused on broker 3")


def test_an_acl_added_on_one_broker_applies_on_another_and_acks_all_replicates(cluster):
    cluster.create_topic("orders", 1, 3, {"min.insync.replicas": 3})
    add_user(cluster, "bob", via=2)
    wait_until(lambda: logs_in(cluster, 3, "bob"), 30, "bob to log in on broker 3")
    assert topic_error(cluster, 3, "bob", "orders") == ErrorCode.topic_authorization_failed

    add_acl(cluster, 1, "bob", "orders", WRITE)
    with ZkReader(cluster) as zk:
        assert zk.json("/kafka-acl/Topic/orders") == {
            "version": 1, "acls": [{"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}]
        }  # fmt: skip
        assert zk.children("/kafka-acl-changes")
    wait_until(lambda: topic_error(cluster, 3, "bob", "orders") == 0, 30, "broker 3 to allow bob")

    # acks=all with min.insync.replicas=3: the followers (as User:broker) fetch, authorised
    delivered = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, **sasl("bob", "bob-secret"), "acks": "all"})
    for i in range(10):
        producer.produce("orders", f"m{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(60) == 0
    assert delivered == [None] * 10
    assert sorted(cluster.metadata(["orders"]).topics["orders"][0].isr) == [1, 2, 3]

    removed = send(cluster, 2, "admin", 31, 3, {"filters": [
        {"resource_type_filter": TOPIC, "resource_name_filter": "orders", "pattern_type_filter": LITERAL,
         "principal_filter": "User:bob", "host_filter": "*", "operation": WRITE, "permission_type": ALLOW}]})  # fmt: skip
    assert len(removed.filter_results[0].matching_acls) == 1
    wait_until(lambda: topic_error(cluster, 3, "bob", "orders") == ErrorCode.topic_authorization_failed, 30, "broker 3 to deny bob again")
    with ZkReader(cluster) as zk:
        assert not zk.exists("/kafka-acl/Topic/orders")


def test_controller_requests_from_a_user_without_cluster_action_are_refused(cluster):
    add_user(cluster, "mallory", via=1)
    wait_until(lambda: logs_in(cluster, 2, "mallory"), 30, "mallory to log in on broker 2")
    requests = [
        (4, 7, LeaderAndIsrRequest(controller_id=1, controller_epoch=99, topic_states=(), live_leaders=())),
        (5, 4, StopReplicaRequest(controller_id=1, controller_epoch=99, topic_states=())),
        (6, 8, UpdateMetadataRequest(controller_id=1, controller_epoch=99, topic_states=(), live_brokers=())),
        (7, 3, ControlledShutdownRequest(broker_id=2)),
    ]
    for api_key, version, request in requests:
        answer = send(cluster, 2, "mallory", api_key, version, request)
        assert answer.error_code == ErrorCode.cluster_authorization_failed, type(request).__name__
    assert sorted(cluster.metadata([]).brokers) == [1, 2, 3]  # nothing changed


def test_a_quota_set_on_one_broker_throttles_on_another(cluster):
    topic_on_broker_3(cluster, "quota-t")
    add_user(cluster, "carol", via=1)
    add_acl(cluster, 1, "carol", "quota-t", WRITE)
    entry = {"entity": [{"entity_type": "client-id", "entity_name": "slow"}],
             "ops": [{"key": "producer_byte_rate", "value": 2000.0, "remove": False}]}  # fmt: skip
    answer = send(cluster, 1, "admin", 49, 1, {"entries": [entry], "validate_only": False})
    assert answer.entries[0].error_code == ErrorCode.none
    with ZkReader(cluster) as zk:  # AlterClientQuotas answers once it is written, as CreateAcls does
        assert zk.json("/config/clients/slow") == {"version": 1, "config": {"producer_byte_rate": "2000"}}
    wait_until(lambda: logs_in(cluster, 3, "carol") and topic_error(cluster, 3, "carol", "quota-t") == 0, 30, "carol on broker 3")
    throttles = throttled_on_broker_3(cluster, "carol", "slow", "quota-t")
    assert any(broker == 3 and ms > 0 for broker, ms in throttles), throttles


def test_a_restarted_broker_reads_users_acls_and_quotas_back_from_zookeeper(cluster):
    add_user(cluster, "dave", via=1)
    add_acl(cluster, 2, "dave", "quota-t", WRITE)
    entry = {"entity": [{"entity_type": "user", "entity_name": "dave"}],
             "ops": [{"key": "producer_byte_rate", "value": 2000.0, "remove": False}]}  # fmt: skip
    assert send(cluster, 1, "admin", 49, 1, {"entries": [entry], "validate_only": False}).entries[0].error_code == 0
    with ZkReader(cluster) as zk:
        wait_until(lambda: "producer_byte_rate" in zk.json("/config/users/dave")["config"], 30, "dave's quota in ZooKeeper")

    assert cluster.stop(3) == 0
    cluster.start_broker(3)
    cluster.wait_until_ready()
    cluster.wait_for(lambda md: md.topics["quota-t"][0].leader == 3, what="broker 3 to lead quota-t again")
    wait_until(lambda: topic_error(cluster, 3, "admin", "quota-t") == 0, 30, "broker 3's metadata to have quota-t")
    assert logs_in(cluster, 3, "dave")  # read at start: no notification needed
    assert topic_error(cluster, 3, "dave", "quota-t") == 0
    assert topic_error(cluster, 3, "dave", "orders") == ErrorCode.topic_authorization_failed
    throttles = throttled_on_broker_3(cluster, "dave", "fast-client", "quota-t")
    assert any(broker == 3 and ms > 0 for broker, ms in throttles), throttles


def _share_coordinator(cluster, group: str, topic_id, partition: int) -> int:
    """The broker that keeps the share state of (group, topic, partition): FindCoordinator v6
    with key type 2 (share) and the key ``group:topicId:partition``."""
    def ask() -> int | None:  # None while __share_group_state is being made (on first use)
        answer = send(cluster, 1, "admin", 10, 6, {"key_type": 2, "coordinator_keys": [f"{group}:{topic_id}:{partition}"]})
        (coordinator,) = answer.coordinators
        if coordinator.error_code == ErrorCode.coordinator_not_available:
            return None
        assert coordinator.error_code == ErrorCode.none, coordinator
        return coordinator.node_id

    return wait_until(ask, 60, "a share coordinator")


def test_share_state_kept_by_another_broker_goes_over_the_secured_inter_broker_listener(cluster):
    """The share-partition leader (broker 3) reaches the share coordinator on another broker as
    the brokers reach each other (INTERNAL, SCRAM-SHA-256): acknowledgements are saved there."""
    topic_on_broker_3(cluster, "share-secured")
    metadata = _metadata(["share-secured"])
    metadata["topics"][0]["topic_id"] = uuid.UUID(int=0)
    (described,) = send(cluster, 3, "admin", 3, 12, metadata).topics
    topic_id = described.topic_id
    group = next(g for g in (f"sg-{i}" for i in range(500)) if _share_coordinator(cluster, g, topic_id, 0) != 3)
    coordinator = _share_coordinator(cluster, group, topic_id, 0)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, **sasl("admin", "admin-secret")})
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, **sasl("admin", "admin-secret"),
                              "group.id": group})  # fmt: skip
    consumer.subscribe(["share-secured"])
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            if not got:  # share.auto.offset.reset=latest: produce until the group's start is set
                for i in range(10):
                    producer.produce("share-secured", value=b"v%d" % i)
                producer.flush(10)
            got += [m.value() for m in consumer.poll(1.0) or [] if m.error() is None]
        assert len(got) >= 10, f"the share consumer read {len(got)} records"
        consumer.commit_sync()
    finally:
        consumer.close()

    def start_offset() -> int:
        body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}]}
        (result,) = send(cluster, coordinator, "admin", 87, 0, body).results
        (p,) = result.partitions
        assert p.error_code == ErrorCode.none, p
        return p.start_offset

    wait_until(lambda: start_offset() >= len(got), 30, f"the acknowledgements saved on broker {coordinator}")


def test_brokers_replicate_over_sasl_ssl_with_plain(zookeeper, tmp_path):
    """The inter-broker listener is SASL_SSL with PLAIN: the brokers check each other's
    certificate (host name included, Kafka's default) and log in as ``broker``."""
    tls = make_tls_files(tmp_path / "tls")
    overrides = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="broker" password="broker-secret" user_broker="broker-secret";'
        ),
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
    }
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "broker",
              "sasl.password": "broker-secret", "ssl.ca.location": str(tls.ca)}  # fmt: skip
    with_tls = cluster_on(zookeeper, 2, overrides=overrides, client_settings=client)
    for b in with_tls.brokers.values():
        b.overrides["listeners"] = f"SASL_SSL://127.0.0.1:{b.port}"
    with with_tls:
        with_tls.create_topic("replicated", 1, 2, {"min.insync.replicas": 2})
        delivered = []
        producer = Producer({**with_tls.client_config(), "acks": "all"})
        for i in range(5):
            producer.produce("replicated", f"m{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(60) == 0
        assert delivered == [None] * 5
        assert sorted(with_tls.metadata(["replicated"]).topics["replicated"][0].isr) == [1, 2]


def test_brokers_started_before_their_user_exists_join_up_once_it_is_made(zookeeper):
    """The operator forgot the brokers' SCRAM user: the brokers start and register but cannot
    log in to each other (the controller retries, saying why); once the user is made in
    ZooKeeper, every broker reads it from /config/changes and the cluster comes together."""
    late = cluster_on(zookeeper, 3, overrides=SECURED, client_settings=sasl("admin", "admin-secret"))
    for b in late.brokers.values():
        b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{free_port()}"
    credential = ScramCredential.from_password(CLIENT_SCRAM, "admin-secret").to_text()
    asyncio.run(write_scram_credentials(late.zookeeper_connect, "admin", {CLIENT_SCRAM: credential}))
    started: list[BaseException | None] = []
    starting = threading.Thread(target=lambda: started.append(_start(late)))
    starting.start()
    try:
        with ZkReader(late) as zk:
            wait_until(lambda: zk.exists("/brokers/ids") and len(zk.children("/brokers/ids")) == 3, 60, "3 brokers registered")
        wait_until(lambda: any("refused the login" in late.log_text(b) for b in late.brokers), 60, "the controller to say why")
        credential = ScramCredential.from_password(BROKER_SCRAM, "broker-secret").to_text()
        asyncio.run(write_scram_credentials(late.zookeeper_connect, "broker", {BROKER_SCRAM: credential}))
        starting.join(90)
        assert started == [None], started
        for b in late.brokers:  # the controller's UpdateMetadata reached every broker
            wait_until(lambda b=b: len(send(late, b, "admin", 3, 9, _metadata([])).brokers) == 3, 30, f"broker {b}'s metadata")
        late.create_topic("together", 1, 3)
    finally:
        starting.join(90)
        late.close()


def _start(cluster) -> BaseException | None:
    try:
        cluster.start()
        return None
    except BaseException as exc:  # reported by the test's thread
        return exc
