"""Shared fixtures: a real broker process on 127.0.0.1, and unique topic names."""

from __future__ import annotations

import re
import uuid

import pytest

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One broker for the whole session (tests use unique topic names)."""
    # Many tests write records with fixed historical timestamps (2023); time-based retention
    # (7 days, checked every 5 minutes) would delete them mid-session, so this broker checks
    # hourly (a broker-only key: topic configs still describe as defaults). Retention itself
    # is tested on brokers of its own.
    proc = BrokerProcess(
        tmp_path_factory.mktemp("broker") / "data", overrides={"log.retention.check.interval.ms": "3600000"}
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test's own, for restarts, crashes and special configs."""
    procs = []

    def make(**overrides) -> BrokerProcess:
        proc = BrokerProcess(tmp_path / f"data{len(procs)}", overrides=overrides)
        procs.append(proc)
        return proc.start()

    yield make
    for proc in procs:
        proc.kill()


@pytest.fixture
def topic_name(request):
    """A unique, legal Kafka topic name (only [a-zA-Z0-9._-]) derived from the test's name."""
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name[:40])
    return f"t-{stem}-{uuid.uuid4().hex[:8]}"
