"""Authentication and authorisation failures as a user meets them (issue 30, items 7-9): the
`odradek` command run as a child process against a SASL_PLAINTEXT/SCRAM broker with ACLs on
and auto-creation off, and Odradek's Python client. Each failure is told at once with what
to do; a run is bounded at 20 s, so the old behaviour (waiting out a 15 s or 60 s timeout and
then blaming the network or the metadata) fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from security_support import sasl_listeners

from odradek.client.blocking import Admin, Consumer, Producer
from odradek.client.client_errors import SecurityMismatchError
from odradek.protocol.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import run_odradek  # noqa: E402

BOUND_S = 20  # each run: generous for a loaded machine, well under the old timeouts


@pytest.fixture
def acl_broker(tls, secured_broker):
    """SASL_PLAINTEXT and SASL_SSL; the ACL authorizer with super user admin (PLAIN); SCRAM
    user sam with no ACLs; topic orders; auto.create.topics.enable=false."""
    b = secured_broker(
        sasl_listeners(
            tls,
            **{
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
            },
        )
    )
    with Admin(_conf(b, "PLAIN", "admin", "admin-secret")) as admin:
        admin.alter_user_scram_credentials(upsert=[("sam", "SCRAM-SHA-256", "sam-secret")])
        admin.create_topics(["orders"])
    return b


def _conf(b, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": b.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _properties(path: Path, conf: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers"))
    return path


@pytest.fixture
def sam(acl_broker, tmp_path) -> list:
    """`-b ADDRESS --command-config sam.properties`."""
    props = _properties(tmp_path / "sam.properties", _conf(acl_broker, "SCRAM-SHA-256", "sam", "sam-secret"))
    return ["-b", acl_broker.address("SASL_PLAINTEXT"), "--command-config", props]


@pytest.fixture
def admin_args(acl_broker, tmp_path) -> list:
    props = _properties(tmp_path / "admin.properties", _conf(acl_broker, "PLAIN", "admin", "admin-secret"))
    return ["-b", acl_broker.address("SASL_PLAINTEXT"), "--command-config", props]


def odradek(*args, input=None):
    return run_odradek(*args, input=input, timeout=BOUND_S)


def test_topics_list_without_command_config_on_a_sasl_listener_says_security_mismatch(acl_broker):
    r = odradek("topics", "list", "-b", acl_broker.address("SASL_PLAINTEXT"))
    assert r.code == 1, r
    assert "its listener requires SASL authentication" in r.err, r
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in r.err, r
    assert "security.protocol=SASL_PLAINTEXT" in r.err and "--command-config" in r.err, r
    assert "check that the broker is up" not in r.err, r


def test_a_plaintext_client_on_a_tls_listener_says_security_mismatch(acl_broker):
    r = odradek("topics", "list", "-b", acl_broker.address("SASL_SSL"))
    assert r.code == 1, r
    assert "its listener speaks TLS" in r.err, r
    assert "security.protocol=SSL (or SASL_SSL)" in r.err and "--command-config" in r.err, r


def test_a_sasl_client_on_a_plaintext_listener_says_the_listener_does_not_use_sasl(secured_broker, tmp_path):
    b = secured_broker({"listeners": "PLAINTEXT://127.0.0.1:0"})
    props = _properties(
        tmp_path / "c.properties",
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"},
    )
    r = odradek("topics", "list", "-b", b.address("PLAINTEXT"), "--command-config", props)
    assert r.code == 1, r
    assert "does not use SASL on this listener" in r.err and "security.protocol=PLAINTEXT" in r.err, r


def test_produce_without_an_acl_names_the_acl_that_grants_it_and_that_acl_works(acl_broker, sam, admin_args):
    r = odradek("produce", "orders", *sam, input="hi\n")
    assert r.code == 1, r
    assert "User:sam is not authorized to Write topic 'orders' (TOPIC_AUTHORIZATION_FAILED)" in r.err, r
    grant = "odradek acls add --allow-principal User:sam --operation Write --topic orders"
    assert grant in r.err, r
    # The line it gives, run by an admin, is the fix.
    g = odradek(*grant.split()[1:], *admin_args)
    assert g.code == 0, g
    r = odradek("produce", "orders", *sam, input="hi\n")
    assert r.code == 0, r


def test_consume_of_a_topic_hidden_by_acls_says_not_authorized_not_missing(acl_broker, sam):
    r = odradek("consume", "orders", "--from-beginning", "--max-messages", "1", *sam)
    assert r.code == 1, r
    assert "does not exist" not in r.err, r
    assert "User:sam is not authorized to Read topic 'orders' (TOPIC_AUTHORIZATION_FAILED)" in r.err, r
    assert "odradek acls add --allow-principal User:sam --operation Read --topic orders" in r.err, r
    # Authorisation comes first, as in Kafka: a missing topic sam may not describe is a
    # denial too (whether a topic exists stays hidden from who may not describe it).
    r = odradek("consume", "nosuch", "--max-messages", "1", *sam)
    assert "User:sam is not authorized to Read topic 'nosuch'" in r.err, r


def test_produce_with_a_wrong_password_says_authentication_failed(acl_broker, tmp_path):
    props = _properties(tmp_path / "bad.properties", _conf(acl_broker, "SCRAM-SHA-256", "sam", "not-it"))
    r = odradek("produce", "orders", "-b", acl_broker.address("SASL_PLAINTEXT"), "--command-config", props, input="hi\n")
    assert r.code == 1, r
    assert "SASL_AUTHENTICATION_FAILED" in r.err and "sasl.password" in r.err, r
    assert "timed out" not in r.err, r


def test_produce_to_a_missing_topic_with_auto_create_off_says_so(acl_broker, admin_args):
    r = odradek("produce", "nosuchtopic", *admin_args, input="hi\n")
    assert r.code == 1, r
    assert "topic 'nosuchtopic' does not exist" in r.err and "auto.create.topics.enable=false" in r.err, r
    assert "odradek topics create nosuchtopic" in r.err, r


# -- the Python client: the error class at once (max.block.ms and the API timeout stay 60 s) --


def _poll_until_it_raises(consumer) -> None:
    """Poll (a subscribed consumer) until poll raises; pytest's timeout bounds the wait."""
    while True:
        consumer.poll(500)


@pytest.mark.timeout(BOUND_S)
def test_python_producer_and_consumer_with_a_wrong_password_raise_sasl_authentication_failed(acl_broker):
    conf = _conf(acl_broker, "SCRAM-SHA-256", "sam", "not-it")
    with Producer({**conf, "max.block.ms": 60000}) as p:
        with pytest.raises(SaslAuthenticationFailedError):
            p.send("orders", b"x")
    with Consumer({**conf, "group.id": "g"}) as c:
        c.subscribe(["orders"])
        with pytest.raises(SaslAuthenticationFailedError):
            _poll_until_it_raises(c)


@pytest.mark.timeout(BOUND_S)
def test_python_producer_and_consumer_without_an_acl_raise_topic_authorization_failed(acl_broker):
    conf = _conf(acl_broker, "SCRAM-SHA-256", "sam", "sam-secret")
    with Producer({**conf, "max.block.ms": 60000}) as p:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("orders", b"x")
    with Consumer({**conf, "group.id": "g", "default.api.timeout.ms": 60000}) as c:
        with pytest.raises(TopicAuthorizationFailedError):
            c.partitions_for_topic("orders")
    with Consumer({**conf, "group.id": "g"}) as c:
        c.subscribe(["orders"])
        with pytest.raises(TopicAuthorizationFailedError, match="orders"):
            _poll_until_it_raises(c)


@pytest.mark.timeout(BOUND_S)
def test_python_admin_without_sasl_on_a_sasl_listener_raises_security_mismatch(acl_broker):
    with Admin({"bootstrap.servers": acl_broker.address("SASL_PLAINTEXT"), "default.api.timeout.ms": 60000}) as admin:
        with pytest.raises(SecurityMismatchError, match="requires SASL"):
            admin.list_topics()
