"""A broker process for the HTTP-side tests, with its console on a free port."""

from __future__ import annotations

import pytest
from http_helpers import wait_serving

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="session")
def http_broker(tmp_path_factory):
    """One broker for tests/http (tests use unique topic and group names)."""
    # Tests write records stamped 2023, past the 7-day retention: keep the retention check from
    # deleting them under a test (this broker lives as long as its xdist worker).
    proc = BrokerProcess(
        tmp_path_factory.mktemp("http-broker") / "data", overrides={"log.retention.check.interval.ms": "3600000"}
    )
    proc.start()
    wait_serving(proc.http_url)
    yield proc
    proc.stop()
