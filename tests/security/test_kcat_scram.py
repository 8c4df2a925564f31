"""Debian's kcat with SASL/SCRAM (issue 30, item 10).

Debian 12's kcat 1.7.1 links librdkafka 2.0.2, whose SCRAM client-final message repeats the
client nonce (``r=<client nonce><client nonce><server part>``; librdkafka fixed it in 2.6.1,
confluentinc/librdkafka#4895). Odradek's server-first message is Kafka's (``r=<client
nonce><server part>``, RFC 5802) and, like Kafka's current ScramSaslServer, it compares the
final nonce exactly, so that kcat is refused with the reason docs/security.md gives; PLAIN
works with it. The same kcat binary running on a newer librdkafka (the one confluent-kafka's
wheel ships) produces and consumes with SCRAM-SHA-256 and -512, which shows the fault is the
old library's, not the broker's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import confluent_kafka
import pytest
from security_support import sasl_listeners

from odradek.client.blocking import Admin

KCAT = "/usr/bin/kcat"
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture
def broker(tls, secured_broker):
    b = secured_broker(sasl_listeners(tls))
    admin_conf = {
        "bootstrap.servers": b.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }
    with Admin(admin_conf) as admin:
        admin.alter_user_scram_credentials(upsert=[("kay", m, "kay-secret") for m in MECHANISMS])
    return b


@pytest.fixture
def newer_librdkafka(tmp_path) -> dict:
    """An environment in which kcat loads the librdkafka of confluent-kafka's wheel."""
    libs = sorted((Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs").glob("librdkafka-*.so.1"))
    assert libs, "confluent-kafka's wheel ships its librdkafka in confluent_kafka.libs"
    (tmp_path / "librdkafka.so.1").symlink_to(libs[0])
    return {"LD_LIBRARY_PATH": str(tmp_path)}


def kcat(b, mechanism: str, user: str, password: str, *args, input: bytes | None = None, env=None):
    cmd = [
        KCAT,
        "-b", b.address("SASL_PLAINTEXT"),
        "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", f"sasl.mechanism={mechanism}",
        "-X", f"sasl.username={user}",
        "-X", f"sasl.password={password}",
        *args,
    ]  # fmt: skip
    return subprocess.run(cmd, input=input, capture_output=True, timeout=60, env=env)


def librdkafka_version(env=None) -> str:
    out = subprocess.run([KCAT, "-V"], capture_output=True, timeout=10, env=env).stdout.decode()
    return next(line for line in out.splitlines() if "librdkafka" in line)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_debians_kcat_is_refused_scram_for_its_nonce_and_plain_works(broker, mechanism):
    assert "2.0.2" in librdkafka_version()  # the kcat this test is about
    r = kcat(broker, mechanism, "kay", "kay-secret", "-P", "-t", "refused", input=b"x\n")
    assert r.returncode != 0
    assert b"Invalid SCRAM client-final message: the nonce does not match the server's" in r.stderr
    r = kcat(broker, "PLAIN", "alice", "alice-secret", "-P", "-t", "plain-ok", input=b"p1\np2\n")
    assert r.returncode == 0, r.stderr
    r = kcat(broker, "PLAIN", "alice", "alice-secret", "-C", "-t", "plain-ok", "-o", "beginning", "-e", "-q")
    assert r.stdout.splitlines() == [b"p1", b"p2"], r.stderr


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_same_kcat_on_librdkafka_2_6_1_or_later_produces_and_consumes_with_scram(
    broker, newer_librdkafka, mechanism
):
    version = librdkafka_version(newer_librdkafka)
    assert "2.0.2" not in version, version
    topic = "kcat-" + mechanism.lower()
    lines = [f"{mechanism}-{i}".encode() for i in range(5)]
    r = kcat(broker, mechanism, "kay", "kay-secret", "-P", "-t", topic, input=b"\n".join(lines) + b"\n", env=newer_librdkafka)
    assert r.returncode == 0, r.stderr
    r = kcat(broker, mechanism, "kay", "kay-secret", "-C", "-t", topic, "-o", "beginning", "-e", "-q", env=newer_librdkafka)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines
