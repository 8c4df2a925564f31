"""A broker process for the HTTP-side tests, with its console on a free port."""

from __future__ import annotations

import pytest
from http_helpers import wait_serving

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="session")
def http_broker(tmp_path_factory):
    """One broker for tests/http (tests use unique topic and group names)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("http-broker") / "data")
    proc.start()
    wait_serving(proc.http_url)
    yield proc
    proc.stop()
