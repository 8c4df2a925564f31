"""Helpers of the security tests: listener settings and a handle on a broker with named listeners."""

from __future__ import annotations

import time

from certs import KEY_PASSWORD
from confluent_kafka import Consumer, Producer


def ssl_settings(tls, prefix: str = "") -> dict[str, str]:
    return {
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": str(tls.broker_keystore),
        f"{prefix}ssl.key.password": KEY_PASSWORD,
        f"{prefix}ssl.truststore.type": "PEM",
        f"{prefix}ssl.truststore.location": str(tls.ca),
    }


class SecuredBroker:
    """An embedded broker with named listeners; ``address(name)`` is one listener's host:port."""

    def __init__(self, broker):
        self.embedded = broker

    def address(self, listener: str) -> str:
        host, port = self.embedded.broker.network.bound[listener.upper()]
        return f"{host}:{port}"

    def endpoint(self, listener: str):
        """Something with ``host``, ``port`` and ``log_text()`` for broker_e2e.RawClient."""
        host, port = self.embedded.broker.network.bound[listener.upper()]
        return _Endpoint(host, port)

    def log_text(self) -> str:
        return self.embedded.log_text()


class _Endpoint:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def log_text(self) -> str:
        return ""


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def sasl_listeners(tls, **extra) -> dict[str, str]:
    """SASL_PLAINTEXT (PLAIN and SCRAM) and SASL_SSL (SCRAM) listeners."""
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        **ssl_settings(tls),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
        settings[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = SCRAM_JAAS
        settings[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS
    settings.update(extra)
    return settings


def roundtrip(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` with confluent-kafka and read them back through a new group."""
    p = Producer({**conf, "linger.ms": 0})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got
