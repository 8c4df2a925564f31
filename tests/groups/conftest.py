"""Brokers for the group tests: one tuned for speed (short initial rebalance delay, short
sessions allowed), and one reached through a GateProxy that can stop a client at any step."""

from __future__ import annotations

import uuid
from typing import NamedTuple

import pytest
from gate_proxy import GateProxy
from group_raw import RawClient

from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess, free_port

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


class Gated(NamedTuple):
    broker: BrokerProcess
    proxy: GateProxy

    @property
    def bootstrap(self) -> str:
        """Clients bootstrap through the proxy (and the broker advertises it)."""
        return f"127.0.0.1:{self.proxy.port}"

    def create_topic(self, partitions: int = 2) -> str:
        topic = f"gated-{uuid.uuid4().hex[:8]}"
        with RawClient(self.broker) as raw:
            body = {
                "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}],
                "timeout": 10000,
            }
            assert raw.request(19, 5, body).topics[0].error_code == ErrorCode.none
        return topic


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """A broker that advertises a GateProxy, so every client connection passes through it."""
    proxy_port = free_port()
    broker = BrokerProcess(
        tmp_path_factory.mktemp("gated") / "data",
        overrides={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
            "group.initial.rebalance.delay.ms": 1500,  # holds a first JoinGroup with an id in the broker
            "group.min.session.timeout.ms": 500,
        },
    ).start()
    proxy = GateProxy(proxy_port).start(broker.host, broker.port)
    with RawClient(broker) as raw:  # __consumer_offsets exists before the first client asks
        assert raw.request(10, 3, {"key": "warm-up", "key_type": 0}).error_code == ErrorCode.none
    yield Gated(broker, proxy)
    proxy.stop()
    broker.stop()
    log = broker.log_text()
    assert "Traceback" not in log, f"the gated broker logged a traceback:\n{log[-4000:]}"
