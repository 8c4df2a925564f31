"""A broker tuned for fast group tests: short initial rebalance delay, short sessions allowed."""

from __future__ import annotations

import pytest

from odradek.testing.process import BrokerProcess

GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": 200,
    "group.min.session.timeout.ms": 500,
    "group.max.size": 8,
}


@pytest.fixture(scope="session")
def group_broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("group-broker") / "data", overrides=GROUP_OVERRIDES)
    proc.start()
    yield proc
    proc.stop()
    log = proc.log_text()
    assert "Traceback" not in log, f"the group broker logged a traceback:\n{log[-4000:]}"
