"""The embedded broker (odradek.testing) and its pytest fixtures, proven with confluent-kafka."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.testing import EmbeddedBroker


def _roundtrip(bootstrap: str, topic: str, n: int = 10, group: str | None = None) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(15) == 0
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            got.append(m.value())
        c.commit(asynchronous=False)
        return got
    finally:
        c.close()


def test_fixture_serves_confluent_producer_and_consumer_group(odradek_broker):
    got = _roundtrip(odradek_broker.bootstrap_servers, "orders")  # auto-created
    assert got == [f"v{i}".encode() for i in range(10)]
    # A group forms at once, not after Kafka's 3 s initial rebalance delay.
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    resource = ConfigResource("BROKER", str(odradek_broker.node_id))
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["group.initial.rebalance.delay.ms"].value == "0"


def test_admin_topics_and_create_topic_helper(odradek_broker):
    admin = AdminClient(odradek_broker.client_config())
    fs = admin.create_topics([NewTopic("payments", num_partitions=3, replication_factor=1)])
    fs["payments"].result(10)
    odradek_broker.create_topic("audit", partitions=2, config={"cleanup.policy": "compact"})
    md = admin.list_topics(timeout=10)
    assert len(md.topics["payments"].partitions) == 3
    assert len(md.topics["audit"].partitions) == 2


@pytest.mark.odradek_broker(overrides={"num.partitions": 4})
def test_marker_passes_broker_overrides(odradek_broker):
    _roundtrip(odradek_broker.bootstrap_servers, "auto", n=1)
    md = AdminClient(odradek_broker.client_config()).list_topics(timeout=10)
    assert len(md.topics["auto"].partitions) == 4


def test_session_fixture_is_shared(odradek_broker_session, request):
    again = request.getfixturevalue("odradek_broker_session")
    assert again is odradek_broker_session
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    assert _roundtrip(odradek_broker_session.bootstrap_servers, topic, n=3) == [b"v0", b"v1", b"v2"]


def test_factory_makes_independent_brokers(odradek_broker_factory):
    a = odradek_broker_factory()
    b = odradek_broker_factory(overrides={"num.partitions": 2})
    assert a.bootstrap_servers != b.bootstrap_servers
    _roundtrip(a.bootstrap_servers, "only-on-a", n=1)
    topics_b = AdminClient(b.client_config()).list_topics(timeout=10).topics
    assert "only-on-a" not in topics_b


def test_context_manager_serves_and_cleans_up():
    with EmbeddedBroker() as broker:
        data_dir = broker.data_dir
        assert data_dir.is_dir()
        assert _roundtrip(broker.bootstrap_servers, "t", n=2) == [b"v0", b"v1"]
    assert not data_dir.exists()
    with pytest.raises(RuntimeError, match="not running"):
        broker.bootstrap_servers  # noqa: B018


def test_restart_keeps_data_and_port(tmp_path):
    broker = EmbeddedBroker(data_dir=tmp_path / "data").start()
    try:
        _roundtrip(broker.bootstrap_servers, "durable", n=5, group="keep")
        before = broker.bootstrap_servers
        broker.restart()
        assert broker.bootstrap_servers == before
        c = Consumer({"bootstrap.servers": before, "group.id": "keep", "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["durable"])
            p = Producer({"bootstrap.servers": before})
            p.produce("durable", value=b"after-restart")
            p.flush(10)
            got = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
            assert got == [b"after-restart"]  # the group's committed offsets survived
        finally:
            c.close()
    finally:
        broker.stop()
    assert (tmp_path / "data").is_dir()  # a given data_dir is kept


def test_process_mode():
    with EmbeddedBroker(mode="process", overrides={"num.partitions": 2}) as broker:
        assert broker.running
        _roundtrip(broker.bootstrap_servers, "proc", n=3)
        md = AdminClient(broker.client_config()).list_topics(timeout=10)
        assert len(md.topics["proc"].partitions) == 2
        broker.create_topic("made-by-helper", partitions=3)
        md = AdminClient(broker.client_config()).list_topics(timeout=10)
        assert len(md.topics["made-by-helper"].partitions) == 3
    assert not broker.running


def test_bad_override_fails_with_the_key_named():
    with pytest.raises(Exception, match="log.retention.bogus"):
        EmbeddedBroker(overrides={"log.retention.bogus": 1}).start()


def test_plugin_is_registered_through_the_entry_point(tmp_path):
    """A project with odradek installed gets the fixture without a conftest: the README's example runs."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Testing your own code against Odradek", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "def test_round_trip(odradek_broker)" in example
    (tmp_path / "test_user_code.py").write_text(example)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_user_code.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
