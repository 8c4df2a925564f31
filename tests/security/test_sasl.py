"""SASL (issue 17, step 2): PLAIN from the listener's JAAS line, SCRAM-SHA-256/512 with
credentials set through AlterUserScramCredentials, over SASL_PLAINTEXT and SASL_SSL, with
confluent-kafka, kafka-python and aiokafka; wrong passwords, exchanges out of order and
re-authentication (KIP-368)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from broker_e2e import RawClient
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from security_support import roundtrip, sasl_listeners

from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl_mechanisms import ScramClient


def sasl_conf(b, listener: str, mechanism: str, user: str, password: str, tls=None) -> dict:
    conf = {
        "bootstrap.servers": b.address(listener),
        "security.protocol": listener.upper(),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if tls is not None:
        conf["ssl.ca.location"] = str(tls.ca)
    return conf


def add_scram_user(b, user: str, password: str, mechanism=ScramMechanism.SCRAM_SHA_256) -> None:
    admin = AdminClient(sasl_conf(b, "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret"))
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())]
    )
    for f in futures.values():
        f.result(30)


def authentication_error(conf: dict):
    """The error librdkafka reports for a client with these settings (waits until it has one)."""
    errors = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors, "no error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    return errors[0]


@pytest.fixture
def sasl_broker(tls, secured_broker):
    return secured_broker(sasl_listeners(tls))


def test_plain_over_sasl_plaintext_with_confluent_kafka(sasl_broker):
    conf = sasl_conf(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    values = [f"v{i}".encode() for i in range(20)]
    assert roundtrip(conf, "plain-topic", values) == values


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_scram_over_sasl_ssl_with_confluent_kafka(sasl_broker, tls, mechanism):
    name = "SCRAM-SHA-256" if mechanism == ScramMechanism.SCRAM_SHA_256 else "SCRAM-SHA-512"
    add_scram_user(sasl_broker, "bob", "bob-secret", mechanism)
    conf = sasl_conf(sasl_broker, "SASL_SSL", name, "bob", "bob-secret", tls)
    values = [f"s{i}".encode() for i in range(20)]
    assert roundtrip(conf, "scram-" + name.lower(), values) == values


def test_scram_credentials_are_described_and_stored_salted(sasl_broker):
    add_scram_user(sasl_broker, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_512)
    admin = AdminClient(sasl_conf(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret"))
    futures = admin.describe_user_scram_credentials(["carol", "nobody"])
    carol = futures["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    with pytest.raises(KafkaException) as info:
        futures["nobody"].result(30)
    assert info.value.args[0].code() == ErrorCode.resource_not_found
    text = (sasl_broker.embedded.data_dir / "odradek-metadata.json").read_text()
    assert "carol" in text and "carol-secret" not in text
    # Deleting the credential locks carol out.
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(30)
    assert authentication_error(sasl_conf(sasl_broker, "SASL_PLAINTEXT", "SCRAM-SHA-512", "carol", "carol-secret"))


def test_describing_no_users_describes_every_user(sasl_broker):
    """confluent-kafka's describe_user_scram_credentials() sends an empty user list, which Kafka
    reads as every user (it once answered nothing)."""
    add_scram_user(sasl_broker, "dave", "dave-secret", ScramMechanism.SCRAM_SHA_256)
    add_scram_user(sasl_broker, "erin", "erin-secret", ScramMechanism.SCRAM_SHA_512)
    admin = AdminClient(sasl_conf(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret"))
    described = admin.describe_user_scram_credentials().result(30)
    mechanisms = {user: [i.mechanism for i in d.scram_credential_infos] for user, d in described.items()}
    assert mechanisms["dave"] == [ScramMechanism.SCRAM_SHA_256]
    assert mechanisms["erin"] == [ScramMechanism.SCRAM_SHA_512]


def test_alter_scram_credentials_checks_as_kafka_does(sasl_broker):
    admin = AdminClient(sasl_conf(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret"))
    cases = {
        "few": UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw"),
        "ghost": UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_256),
    }
    futures = admin.alter_user_scram_credentials(list(cases.values()))
    codes = {}
    for user, f in futures.items():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        codes[user] = info.value.args[0].code()
    assert codes == {"few": ErrorCode.unacceptable_credential, "ghost": ErrorCode.resource_not_found}


def test_wrong_password_fails_with_sasl_authentication_failed_and_the_log_keeps_the_secret(sasl_broker, caplog):
    caplog.set_level(logging.WARNING)
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        hs = raw.request(17, 1, {"mechanism": "PLAIN"})
        assert hs.error_code == ErrorCode.none and "PLAIN" in hs.mechanisms
        resp = raw.request(36, 2, {"auth_bytes": b"\x00alice\x00not-the-password"})
        assert resp.error_code == ErrorCode.sasl_authentication_failed
        assert raw.closed_by_broker()
    lines = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert lines and "alice" in lines[0]
    assert "not-the-password" not in caplog.text
    # Others are unaffected.
    conf = sasl_conf(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    assert roundtrip(conf, "after-bad-password", [b"x"]) == [b"x"]


def test_a_failed_authentication_is_answered_at_once_and_closed_after_the_delay(tls, secured_broker):
    """connection.failed.authentication.delay.ms: the error response arrives first, the
    close only after the delay (a password guesser is slowed); other clients are served."""
    delay_s = 1.5
    b = secured_broker(sasl_listeners(tls, **{"connection.failed.authentication.delay.ms": str(int(delay_s * 1000))}))
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        resp = raw.request(36, 2, {"auth_bytes": b"\x00alice\x00guess"})
        answered = time.monotonic()
        assert resp.error_code == ErrorCode.sasl_authentication_failed
        # Meanwhile the connection answers nothing more, and a good client is served.
        raw.send(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        conf = sasl_conf(b, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
        assert roundtrip(conf, "during-auth-delay", [b"x"]) == [b"x"]
        assert raw.closed_by_broker(timeout=30)
        assert time.monotonic() - answered >= delay_s * 0.9


def test_confluent_kafka_with_a_wrong_password_gets_an_authentication_error(sasl_broker):
    conf = sasl_conf(sasl_broker, "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "wrong")
    assert authentication_error(conf)


def test_a_request_before_authentication_closes_that_connection(sasl_broker):
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        raw.send(3, 1, {"topics": None})  # Metadata before SaslHandshake
        assert raw.closed_by_broker()
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        raw.send(3, 1, {"topics": None})  # Metadata instead of SaslAuthenticate
        assert raw.closed_by_broker()
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        resp = raw.request(17, 1, {"mechanism": "GSSAPI"})
        assert resp.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(resp.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert raw.closed_by_broker()
    # ApiVersions is answered before authentication and advertises the SASL APIs.
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        keys = {k.api_key for k in raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert {17, 36, 50, 51} <= keys


def test_a_scram_nonce_that_does_not_match_fails(sasl_broker):
    add_scram_user(sasl_broker, "dave", "dave-secret")
    with RawClient(sasl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        assert raw.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == ErrorCode.none
        client = ScramClient("SCRAM-SHA-256", "dave", "dave-secret")
        first = raw.request(36, 2, {"auth_bytes": client.first()})
        assert first.error_code == ErrorCode.none
        final = client.step(first.auth_bytes)
        forged = final.replace(b"r=", b"r=X", 1)
        resp = raw.request(36, 2, {"auth_bytes": forged})
        assert resp.error_code == ErrorCode.sasl_authentication_failed and "nonce" in resp.error_message
        assert raw.closed_by_broker()


def test_session_lifetime_and_expiry(tls, secured_broker):
    b = secured_broker(sasl_listeners(tls, **{"connections.max.reauth.ms": "1500"}))
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        raw.request(17, 1, {"mechanism": "PLAIN"})
        resp = raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        assert resp.error_code == ErrorCode.none and resp.session_lifetime.total_seconds() == 1.5
        assert raw.request(3, 1, {"topics": None}).brokers  # authenticated: served
        # Re-authenticating in time keeps the connection.
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        assert raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"}).error_code == ErrorCode.none
        time.sleep(1.6)  # past the session's end on purpose
        raw.send(3, 1, {"topics": None})
        assert raw.closed_by_broker()
    # librdkafka re-authenticates by itself and keeps producing across several lifetimes.
    conf = sasl_conf(b, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    p = Producer({**conf, "linger.ms": 0})
    delivered = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        p.produce("reauth", b"x", on_delivery=lambda err, m: delivered.append(err))
        p.flush(10)
    assert delivered and all(e is None for e in delivered)


def test_kafka_python_plain_and_scram(sasl_broker):
    from kafka import KafkaConsumer, KafkaProducer

    add_scram_user(sasl_broker, "erin", "erin-secret", ScramMechanism.SCRAM_SHA_512)
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-512", "erin", "erin-secret")):
        common = {
            "bootstrap_servers": sasl_broker.address("SASL_PLAINTEXT"),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        topic = "kp-" + mechanism.lower()
        producer = KafkaProducer(**common)
        producer.send(topic, b"hello").get(30)
        producer.close()
        consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000, **common)
        assert next(iter(consumer)).value == b"hello"
        consumer.close()


def test_aiokafka_plain_and_scram_over_sasl_ssl(sasl_broker, tls):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    add_scram_user(sasl_broker, "frank", "frank-secret")

    async def run(mechanism, user, password):
        common = {
            "bootstrap_servers": sasl_broker.address("SASL_SSL"),
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(tls.ca)),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        topic = "aio-" + mechanism.lower()
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"hi")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        return msg.value

    assert asyncio.run(run("PLAIN", "alice", "alice-secret")) == b"hi"
    assert asyncio.run(run("SCRAM-SHA-256", "frank", "frank-secret")) == b"hi"
