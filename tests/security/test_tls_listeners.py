"""TLS listeners (issue 17, step 1): several named listeners, PEM key stores with an encrypted
PKCS#8 key, ssl.client.auth with the principal from the client certificate, and each client
told the address of the listener it came through. Real clients: confluent-kafka, kafka-python,
kcat; certificates made in the test."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess

import pytest
from certs import KEY_PASSWORD
from confluent_kafka import Consumer
from security_support import roundtrip, ssl_settings

from odradek.broker.config import BrokerConfig
from odradek.broker.security.tls_context import PrincipalMapper
from odradek.config_def import ConfigError


def two_listeners(tls, **extra) -> dict:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        **ssl_settings(tls, "listener.name.secure."),
        **extra,
    }


def test_confluent_kafka_over_an_ssl_listener_beside_plaintext(tls, secured_broker):
    b = secured_broker(two_listeners(tls))
    values = [f"secret-{i}".encode() for i in range(50)]
    config = {
        "bootstrap.servers": b.address("SECURE"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca),
    }
    assert roundtrip(config, "over-tls", values) == values
    # The plaintext listener serves the same data.
    plain = {"bootstrap.servers": b.address("PLAINTEXT")}
    c = Consumer({**plain, "group.id": "plain-reader", "auto.offset.reset": "earliest"})
    c.subscribe(["over-tls"])
    got = []
    for _ in range(100):
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value())
        if len(got) == len(values):
            break
    c.close()
    assert got == values


def test_metadata_gives_each_client_the_listener_it_came_through(tls, secured_broker):
    from kafka import KafkaAdminClient

    b = secured_broker(two_listeners(tls))
    admin = KafkaAdminClient(
        bootstrap_servers=b.address("SECURE"),
        security_protocol="SSL",
        ssl_cafile=str(tls.ca),
        ssl_check_hostname=True,
    )
    try:
        nodes = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert [f"{n['host']}:{n['port']}" for n in nodes] == [b.address("SECURE")]


def test_kcat_over_ssl(tls, secured_broker):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail("kcat is not installed (the brief says it is)")
    b = secured_broker(two_listeners(tls))
    args = [kcat, "-b", b.address("SECURE"), "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls.ca}"]
    done = subprocess.run(
        [*args, "-P", "-t", "kcat-tls"], input=b"one\ntwo\nthree\n", capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*args, "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"one", b"two", b"three"]


def test_required_client_auth_refuses_a_client_without_a_certificate(tls, secured_broker):
    b = secured_broker(two_listeners(tls, **{"listener.name.secure.ssl.client.auth": "required"}))
    host, port = b.address("SECURE").split(":")
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"\x00\x00\x00\x00")  # TLS 1.3 reports the refusal on the first read
                if not s.recv(1):
                    raise ConnectionError("closed")
    # With a certificate the same client is served.
    config = {
        "bootstrap.servers": b.address("SECURE"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca),
        "ssl.certificate.location": str(tls.client_cert),
        "ssl.key.location": str(tls.client_key),
    }
    assert roundtrip(config, "mtls", [b"hello"]) == [b"hello"]


def test_client_certificate_principal_reaches_requests(tls, secured_broker):
    rules = "RULE:^CN=([^,]*),OU=Users.*$/$1/U,DEFAULT"
    b = secured_broker(
        two_listeners(
            tls,
            **{
                "listener.name.secure.ssl.client.auth": "required",
                "ssl.principal.mapping.rules": rules,
            },
        )
    )
    seen = []
    net = b.embedded.broker.network
    original = net.registry[3].handler

    def spy(broker, request):
        seen.append((request.listener, request.principal))
        return original(broker, request)

    net.registry[3] = net.registry[3]._replace(handler=spy)
    host, port = b.address("SECURE").split(":")
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=b.address("SECURE"),
        security_protocol="SSL",
        ssl_cafile=str(tls.ca),
        ssl_certfile=str(tls.client_cert),
        ssl_keyfile=str(tls.client_key),
    )
    try:
        consumer.topics()
    finally:
        consumer.close()
    assert ("SECURE", "User:ALICE") in seen


def test_principal_mapping_rules_as_kafka_applies_them():
    m = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT")
    assert m.name("CN=kafka-svc,OU=ServiceUsers,O=Org,C=US") == "kafka-svc"
    assert m.name("CN=Adam,OU=Admins,O=Org,C=US") == "adam@admins"
    assert m.name("CN=nobody,C=US") == "CN=nobody,C=US"
    assert PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x") is None
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalMapper("RULE:no-slashes")


@pytest.mark.parametrize(
    "change, key, fragment",
    [
        ({"listener.name.secure.ssl.key.password": "wrong"}, "listener.name.secure.ssl.keystore.location", "ssl.key.password"),
        ({"listener.name.secure.ssl.keystore.type": "JKS"}, "listener.name.secure.ssl.keystore.type", "PEM"),
        ({"listener.name.secure.ssl.enabled.protocols": "TLSv1.1"}, "listener.name.secure.ssl.enabled.protocols", "TLSv1.1"),
        ({"listener.name.secure.ssl.protocol": "TLSv1.2", "listener.name.secure.ssl.enabled.protocols": "TLSv1.3"}, "listener.name.secure.ssl.protocol", "older than every protocol"),
        ({"listener.name.secure.ssl.protocol": "SSLv3"}, "listener.name.secure.ssl.protocol", "SSLv3"),
        ({"listener.name.secure.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "listener.name.secure.ssl.cipher.suites", "TLS 1.3"),
        ({"listener.name.secure.ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "listener.name.secure.ssl.cipher.suites", "TLS_NO_SUCH_SUITE"),
        ({"ssl.client.auth": "required", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:PLAINTEXT"}, "ssl.client.auth", "TLS listener"),
    ],
)
def test_a_tls_setting_that_cannot_be_served_stops_the_start_naming_its_key(tls, change, key, fragment):
    cfg = BrokerConfig(two_listeners(tls, **change))
    with pytest.raises(ConfigError) as info:
        cfg.check_security()
    assert info.value.key == key and fragment in str(info.value)


def test_cipher_suites_and_protocols_are_enforced(tls, secured_broker):
    b = secured_broker(
        two_listeners(
            tls,
            **{
                "listener.name.secure.ssl.enabled.protocols": "TLSv1.2",
                "listener.name.secure.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            },
        )
    )
    host, port = b.address("SECURE").split(":")

    def handshake(ctx):
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                return s.version(), s.cipher()[0]

    ctx = ssl.create_default_context(cafile=str(tls.ca))
    assert handshake(ctx) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
    only13 = ssl.create_default_context(cafile=str(tls.ca))
    only13.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises(ssl.SSLError):
        handshake(only13)
    other = ssl.create_default_context(cafile=str(tls.ca))
    other.maximum_version = ssl.TLSVersion.TLSv1_2
    other.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with pytest.raises(ssl.SSLError):
        handshake(other)


def test_ssl_protocol_tlsv1_2_keeps_tls_1_3_off(tls, secured_broker):
    b = secured_broker(two_listeners(tls, **{"listener.name.secure.ssl.protocol": "TLSv1.2"}))
    host, port = b.address("SECURE").split(":")

    def version(ctx):
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                return s.version()

    assert version(ssl.create_default_context(cafile=str(tls.ca))) == "TLSv1.2"
    only13 = ssl.create_default_context(cafile=str(tls.ca))
    only13.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises(ssl.SSLError):
        version(only13)
    # The default (TLSv1.3) caps nothing: a client that can gets TLS 1.3.
    plain = secured_broker(two_listeners(tls))
    host, port = plain.address("SECURE").split(":")
    assert version(ssl.create_default_context(cafile=str(tls.ca))) == "TLSv1.3"
    config = {"bootstrap.servers": b.address("SECURE"), "security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    assert roundtrip(config, "over-tls-1-2", [b"x"]) == [b"x"]


def test_inline_pem_keystore(tls, secured_broker):
    text = tls.broker_keystore.read_text()
    key_start = text.index("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    b = secured_broker(
        {
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": text[:key_start],
            "ssl.keystore.key": text[key_start:],
            "ssl.key.password": KEY_PASSWORD,
        }
    )
    config = {"bootstrap.servers": b.address("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    assert roundtrip(config, "inline", [b"x"]) == [b"x"]


def test_a_garbage_tls_handshake_closes_that_connection_only(tls, secured_broker):
    b = secured_broker(two_listeners(tls))
    host, port = b.address("SECURE").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x16\x03\x01\x00\x05garbage-that-is-not-a-client-hello" * 20)
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except ConnectionError:
            pass
    config = {"bootstrap.servers": b.address("SECURE"), "security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    assert roundtrip(config, "after-garbage", [b"ok"]) == [b"ok"]


def test_large_fetch_answers_are_streamed_whole_over_tls(tls, secured_broker):
    """Fetch answers of many megabytes go out over TLS a chunk at a time (no sendfile there),
    and the consumer gets every byte produced, in order."""
    b = secured_broker(two_listeners(tls))
    values = [i.to_bytes(4, "big") * 25_000 for i in range(120)]  # 12 MB of distinct 100 kB records
    config = {
        "bootstrap.servers": b.address("SECURE"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca),
        "fetch.max.bytes": 16 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
    }
    assert roundtrip(config, "big-over-tls", values) == values


def test_a_tls_peer_resetting_mid_fetch_is_an_ordinary_disconnect(tls, secured_broker, caplog):
    """A TLS consumer that resets its connection while a large answer is going out: no
    traceback or asyncio error in the broker's log, and the broker serves on."""
    import struct

    from broker_e2e import fetch_body

    from odradek.protocol.messages import build_request, encode_request

    caplog.set_level("INFO")
    b = secured_broker(two_listeners(tls))
    config = {"bootstrap.servers": b.address("SECURE"), "security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    values = [i.to_bytes(4, "big") * 25_000 for i in range(40)]
    assert roundtrip(config, "reset-over-tls", values) == values
    host, port = b.address("SECURE").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls.ca))
    body = fetch_body("reset-over-tls", 0, 0, max_bytes=8 << 20)
    request = encode_request(1, 12, 1, "resetter", build_request(1, 12, body))
    for _ in range(3):
        raw = socket.create_connection((host, int(port)), timeout=10)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(request)
            assert s.recv(1000)  # the answer has started
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
    assert roundtrip(config, "after-resets", [b"still serving"]) == [b"still serving"]
    noisy = [r for r in caplog.records if r.exc_info or r.levelname in ("ERROR", "CRITICAL")]
    assert not noisy, [r.getMessage() for r in noisy]
