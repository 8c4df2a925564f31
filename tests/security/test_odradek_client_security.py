"""Odradek's own client and CLI over TLS and SASL (issue 17, step 2): security.protocol,
sasl.* and ssl.* from Kafka-style properties (``--command-config``), and `odradek users`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from security_support import sasl_listeners

from odradek.client.blocking import Admin, Consumer, Producer
from odradek.client.client_errors import ConfigError
from odradek.protocol.errors import SaslAuthenticationFailedError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import run_odradek  # noqa: E402


@pytest.fixture
def sasl_broker(tls, secured_broker):
    return secured_broker(sasl_listeners(tls))


def admin_config(b, tls) -> dict:
    return {
        "bootstrap.servers": b.address("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";',
    }


def test_odradek_client_produces_and_consumes_with_scram_over_sasl_ssl(sasl_broker, tls):
    with Admin(admin_config(sasl_broker, tls)) as admin:
        admin.alter_user_scram_credentials(upsert=[("gina", "SCRAM-SHA-512", "gina-secret")])
        assert [c.mechanism for c in admin.describe_user_scram_credentials(["gina"])["gina"]] == ["SCRAM-SHA-512"]
    conf = {
        "bootstrap.servers": sasl_broker.address("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "gina",
        "sasl.password": "gina-secret",
    }
    with Producer(conf) as p:
        for i in range(10):
            p.send("odradek-scram", f"m{i}".encode())
        p.flush()
    with Consumer({**conf, "auto.offset.reset": "earliest", "group.id": "og"}) as c:
        c.subscribe(["odradek-scram"])
        got = []
        for _ in range(50):
            got += [r.value for r in c.poll(500)]
            if len(got) >= 10:
                break
    assert got == [f"m{i}".encode() for i in range(10)]


@pytest.mark.timeout(30)
def test_odradek_client_with_a_wrong_password_says_authentication_failed(sasl_broker, tls):
    """At once, as Kafka's AdminClient: the API timeout (60 s) is not waited out."""
    conf = {**admin_config(sasl_broker, tls), "sasl.jaas.config": None, "sasl.username": "admin", "sasl.password": "nope"}
    conf = {k: v for k, v in conf.items() if v is not None}
    with Admin({**conf, "default.api.timeout.ms": 60000}) as admin:
        with pytest.raises(SaslAuthenticationFailedError):
            admin.list_topics()


def test_sasl_without_credentials_is_a_config_error():
    with pytest.raises(ConfigError, match="sasl.username"):
        Admin({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT"})


def test_odradek_users_and_produce_through_command_config(sasl_broker, tls, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={tls.ca}\n"
        "ssl.truststore.type=PEM\n"
        "sasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";\n'
    )
    common = ["-b", sasl_broker.address("SASL_SSL"), "--command-config", props]
    r = run_odradek("users", "create", "hank", "--mechanism", "SCRAM-SHA-256", "--password-stdin", *common, input="hank-secret\n")
    assert r.code == 0, r
    r = run_odradek("users", "list", "-o", "json", *common)
    assert r.code == 0, r
    assert {"user": "hank", "mechanism": "SCRAM-SHA-256", "iterations": 4096} in r.json()
    assert "hank-secret" not in r.out
    hank = tmp_path / "hank.properties"
    hank.write_text(
        f"security.protocol=SASL_SSL\nssl.ca.location={tls.ca}\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.username=hank\nsasl.password=hank-secret\n"
    )
    hank_args = ["-b", sasl_broker.address("SASL_SSL"), "--command-config", hank]
    r = run_odradek("produce", "hank-topic", *hank_args, input="a\nb\n")
    assert r.code == 0, r
    r = run_odradek("consume", "hank-topic", "--from-beginning", "--max-messages", "2", *hank_args)
    assert r.code == 0, r
    assert r.lines() == ["a", "b"]
    r = run_odradek("users", "delete", "hank", *common)
    assert r.code == 0, r
    r = run_odradek("users", "list", "-o", "json", *common)
    assert all(u["user"] != "hank" for u in r.json())


def test_the_first_scram_admin_of_a_single_node_is_written_into_its_data_dir(tmp_path):
    """No PLAIN users in a JAAS line, SCRAM only, ACLs on: the admin is written into the
    stopped broker's data dir, then administers the running broker; --data-dir refuses
    while the broker holds the dir."""
    from odradek.testing.embedded import EmbeddedBroker

    data = tmp_path / "data"
    r = run_odradek(
        "users", "create", "admin", "-m", "SCRAM-SHA-512", "--password-stdin", "--data-dir", data, input="admin-secret\n"
    )
    assert r.code == 0, r
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with EmbeddedBroker(data_dir=data, overrides=settings) as b:
        address = f"{b.host}:{b.broker.network.bound['SASL_PLAINTEXT'][1]}"
        props = tmp_path / "admin.properties"
        props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=admin-secret\n")
        admin = ["-b", address, "--command-config", props]
        r = run_odradek("topics", "create", "first", *admin)
        assert r.code == 0, r
        r = run_odradek("users", "create", "ann", "-m", "SCRAM-SHA-512", "--password-stdin", *admin, input="ann-secret\n")
        assert r.code == 0, r
        assert {u["user"] for u in run_odradek("users", "list", "-o", "json", *admin).json()} == {"admin", "ann"}
        r = run_odradek("users", "create", "x", "--password-stdin", "--data-dir", data, input="x\n")
        assert r.code == 1 and "in use" in r.err and "stop the broker first" in r.err, r
