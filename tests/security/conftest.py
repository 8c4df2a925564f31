"""Fixtures of the security tests: PEM files made for the test, and brokers with secured listeners."""

from __future__ import annotations

import pytest
from certs import KEY_PASSWORD, make_tls_files

from odradek.testing.embedded import EmbeddedBroker


@pytest.fixture
def tls(tmp_path):
    return make_tls_files(tmp_path / "tls")


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

    def __init__(self, broker: EmbeddedBroker):
        self.embedded = broker

    def address(self, listener: str) -> str:
        host, port = self.embedded.broker.network.bound[listener.upper()]
        return f"{host}:{port}"

    def log_text(self) -> str:
        return self.embedded.log_text()


@pytest.fixture
def secured_broker():
    """``make(overrides)`` → a started ``SecuredBroker``; stopped after the test."""
    started = []

    def make(overrides: dict) -> SecuredBroker:
        b = EmbeddedBroker(overrides=overrides).start()
        started.append(b)
        return SecuredBroker(b)

    yield make
    for b in started:
        b.stop()
