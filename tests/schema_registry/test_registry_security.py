"""A registry on a secured broker: HTTPS, HTTP basic authentication against the broker's
PLAIN and SCRAM users, writes decided by the broker's ACLs (403/40301 when refused), with
confluent-kafka's SchemaRegistryClient (basic.auth.user.info, ssl.ca.location) unchanged;
and `odradek schema-registry` as its own process talking to a SASL broker, checking
passwords and ACLs with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_support import CONTENT_TYPE, RegistryProcess
from support import wait_until

from odradek.testing.process import BrokerProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from certs import KEY_PASSWORD, make_tls_files  # noqa: E402

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def status(url: str, **kwargs) -> int | None:
    """The HTTP status of a GET, None while nothing answers."""
    try:
        return requests.get(url, timeout=5, **kwargs).status_code
    except requests.ConnectionError:
        return None


class Secured:
    def __init__(self, broker: BrokerProcess, registry_url: str, tls):
        self.broker, self.url, self.tls = broker, registry_url, tls

    def kafka(self, user: str, password: str, mechanism: str = "PLAIN") -> dict:
        return {
            "bootstrap.servers": self.broker.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }

    def client(self, user_info: str | None) -> SchemaRegistryClient:
        conf = {"url": self.url, "ssl.ca.location": str(self.tls.ca)}
        if user_info is not None:
            conf["basic.auth.user.info"] = user_info
        return SchemaRegistryClient(conf)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A SASL broker with an authorizer (admin is a super user) and its registry on https."""
    tmp = tmp_path_factory.mktemp("secured-registry")
    tls = make_tls_files(tmp / "tls")
    url = f"https://127.0.0.1:{free_port()}"
    port = free_port()
    broker = BrokerProcess(
        tmp / "data",
        port=port,
        overrides={
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "schema.registry.listeners": url,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
        },
    ).start()
    here = Secured(broker, url, tls)
    try:
        wait_until(
            lambda: status(f"{url}/subjects", auth=("admin", "admin-secret"), verify=str(tls.ca)) == 200,
            60,
            "the registry beside the secured broker to read its topic",
        )
        admin = AdminClient(here.kafka("admin", "admin-secret"))
        for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")]
        ).values():
            f.result(30)
        # alice may write to every topic (and so subject) whose name starts with "orders".
        binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
        for f in admin.create_acls([binding]).values():
            f.result(30)
        yield here
    finally:
        broker.stop()
    assert "Traceback" not in broker.log_text()


def test_confluent_client_over_https_with_basic_auth_registers_and_round_trips(secured, tmp_path):
    alice = secured.client("alice:alice-secret")
    schema_id = alice.register_schema("orders-value", Schema(ORDER, "AVRO"))
    assert alice.get_latest_version("orders-value").schema_id == schema_id
    # Records produced over SASL with the Avro serializer decode with a fresh client.
    ctx = SerializationContext("orders", MessageField.VALUE)
    producer = Producer(secured.kafka("admin", "admin-secret"))
    serializer = AvroSerializer(alice, ORDER, conf={"auto.register.schemas": False, "use.latest.version": True})
    producer.produce("orders", value=serializer({"id": 7}, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer({**secured.kafka("admin", "admin-secret"), "group.id": "g-sec", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    try:
        msg = wait_until(lambda: (m := consumer.poll(1)) is not None and not m.error() and m, 30, "the record")
    finally:
        consumer.close()
    assert AvroDeserializer(secured.client("bob:bob-secret"))(msg.value(), ctx) == {"id": 7}


def test_missing_or_wrong_credentials_get_401_and_scram_users_log_in(secured):
    ca = str(secured.tls.ca)
    bare = requests.get(f"{secured.url}/subjects", verify=ca, timeout=10)
    assert bare.status_code == 401 and bare.json()["error_code"] == 401
    assert bare.headers["WWW-Authenticate"].startswith("Basic realm=")
    for user, password in [("alice", "wrong"), ("bob", "alice-secret"), ("nobody", "x")]:
        resp = requests.get(f"{secured.url}/subjects", auth=(user, password), verify=ca, timeout=10)
        assert resp.status_code == 401, (user, resp.text)
    with pytest.raises(SchemaRegistryError) as refused:
        secured.client("alice:wrong").get_subjects()
    assert refused.value.http_status_code == 401
    assert requests.get(f"{secured.url}/subjects", auth=("bob", "bob-secret"), verify=ca, timeout=10).status_code == 200
    # Plain HTTP to the TLS listener does not get an answer.
    with pytest.raises(requests.ConnectionError):
        requests.get(secured.url.replace("https://", "http://") + "/subjects", timeout=10)


def test_principals_without_write_permission_are_read_only(secured):
    alice, bob = secured.client("alice:alice-secret"), secured.client("bob:bob-secret")
    first = alice.register_schema("orders-key", Schema(ORDER, "AVRO"))
    # bob has no ACL: he reads everything, writes nothing (Confluent's 403 body, code 40301).
    assert bob.get_latest_version("orders-key").schema_id == first
    for write in (
        lambda: bob.register_schema("orders-key", Schema(ORDER.replace("Order", "Other"), "AVRO")),
        lambda: bob.delete_subject("orders-key"),
        lambda: bob.set_compatibility("orders-key", "NONE"),
        lambda: alice.register_schema("payments-value", Schema(ORDER, "AVRO")),  # outside alice's prefix
        lambda: alice.set_compatibility(level="NONE"),  # the global level: Alter on the cluster
    ):
        with pytest.raises(SchemaRegistryError) as refused:
            write()
        assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    # A lookup and a compatibility check are reads.
    assert bob.lookup_schema("orders-key", Schema(ORDER, "AVRO")).version == 1
    assert bob.test_compatibility("orders-key", Schema(ORDER, "AVRO")) is True
    # Nothing refused was stored; the super user may do everything.
    admin = secured.client("admin:admin-secret")
    assert "payments-value" not in admin.get_subjects()
    assert admin.get_versions("orders-key") == [1]
    admin.set_compatibility(level="FULL")
    assert admin.get_compatibility() == "FULL"
    admin.set_compatibility(level="BACKWARD")


def test_the_standalone_registry_talks_to_a_sasl_broker_and_checks_passwords_with_it(secured, tmp_path):
    tls = secured.tls
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";'
    port = free_port()
    proc = RegistryProcess(
        secured.broker.bootstrap_servers,
        tmp_path / "standalone.log",
        "_schemas-standalone",
        **{
            "listeners": f"https://127.0.0.1:{port}",
            "kafkastore.security.protocol": "SASL_PLAINTEXT",
            "kafkastore.sasl.mechanism": "PLAIN",
            "kafkastore.sasl.jaas.config": jaas,
            "authentication.method": "BASIC",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.keystore.password": "ignored-by-a-pem-store",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca),
        },
    )
    proc.url = f"https://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "odradek", "schema-registry"]
    for key, value in proc.settings.items():
        cmd += ["--override", f"{key}={value}"]
    import subprocess

    proc.proc = subprocess.Popen(cmd, stdout=open(proc.log_path, "wb"), stderr=subprocess.STDOUT)
    try:
        ca = str(tls.ca)
        wait_until(
            lambda: status(f"{proc.url}/subjects", auth=("alice", "alice-secret"), verify=ca) == 200,
            60,
            "the standalone registry to read its topic through SASL",
        )
        assert requests.get(f"{proc.url}/subjects", auth=("alice", "nope"), verify=ca, timeout=10).status_code == 401
        assert requests.get(f"{proc.url}/subjects", verify=ca, timeout=10).status_code == 401
        client = SchemaRegistryClient({"url": proc.url, "basic.auth.user.info": "alice:alice-secret", "ssl.ca.location": ca})
        assert client.register_schema("orders-standalone-value", Schema(ORDER, "AVRO")) >= 1
        # The brokers' ACLs decide here too: alice's prefix is "orders".
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema("payments-value", Schema(ORDER, "AVRO"))
        assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
        resp = requests.get(f"{proc.url}/subjects", auth=("alice", "alice-secret"), verify=ca, timeout=10,
                            headers={"Accept": CONTENT_TYPE})  # fmt: skip
        assert resp.json() == ["orders-standalone-value"]
    finally:
        proc.stop()
    assert "Traceback" not in proc.log_text()


def test_odradek_schemas_logs_in_with_the_user_in_the_url(secured):
    import os
    import subprocess

    def schemas(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "odradek", "schemas", *args], capture_output=True, text=True, timeout=60,
            env={**os.environ, "SSL_CERT_FILE": str(secured.tls.ca), **env},
        )  # fmt: skip

    secured.client("admin:admin-secret").register_schema("orders-value", Schema(ORDER, "AVRO"))
    host = secured.url.removeprefix("https://")
    listed = schemas("list", "--url", f"https://alice:alice-secret@{host}")
    assert listed.returncode == 0, listed.stderr
    assert "orders-value" in listed.stdout
    by_env = schemas("list", "--url", secured.url, ODRADEK_SCHEMA_REGISTRY_USER_INFO="bob:bob-secret")
    assert by_env.returncode == 0 and "orders-value" in by_env.stdout, by_env.stderr
    refused = schemas("list", "--url", secured.url)
    assert refused.returncode == 1
    assert "error 401" in refused.stderr and "https://user:password@host:port" in refused.stderr


def test_the_console_reads_the_secured_registry_with_the_browsers_credentials(secured):
    secured.client("admin:admin-secret").register_schema("orders-value", Schema(ORDER, "AVRO"))
    console = secured.broker.http_url
    bare = requests.get(f"{console}/v1/schemas/subjects", timeout=10)
    assert bare.status_code == 401 and bare.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert "Unauthorized" in bare.json()["error"]
    listed = requests.get(f"{console}/v1/schemas/subjects", auth=("bob", "bob-secret"), timeout=10)
    assert listed.status_code == 200 and "orders-value" in listed.json()
