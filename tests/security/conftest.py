"""Fixtures of the security tests: PEM files made for the test, and brokers with secured listeners."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))  # broker_e2e's RawClient
from certs import make_tls_files
from security_support import SecuredBroker

from odradek.testing.embedded import EmbeddedBroker


@pytest.fixture
def tls(tmp_path):
    return make_tls_files(tmp_path / "tls")


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

