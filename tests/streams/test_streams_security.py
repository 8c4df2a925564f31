"""A Streams app against a broker that only speaks SASL_SSL: Kafka Streams' client security keys
reach every client the app makes (the admin calls creating its changelog topic, the data
source's reader and writers, the interactive-query store); wrong credentials fail start() in
one line."""

from __future__ import annotations

import struct
import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from support import wait_until

from odradek.protocol.errors import SaslAuthenticationFailedError
from odradek.streams import KafkaStreams, Materialized, Produced, Serdes, State, StreamsBuilder
from odradek.testing.embedded import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from certs import make_tls_files  # noqa: E402
from security_support import SecuredBroker, sasl_listeners  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker whose only client listener is SASL_SSL (SASL_PLAINTEXT is for its own replication)."""
    tls = make_tls_files(tmp_path_factory.mktemp("tls"))
    embedded = EmbeddedBroker(overrides=sasl_listeners(tls)).start()
    yield SecuredBroker(embedded), tls
    embedded.stop()


def _client(secured, password: str = "alice-secret") -> dict:
    broker, tls = secured
    return {
        "bootstrap.servers": broker.address("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def _word_count(source: str, target: str):
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .flat_map_values(lambda line: line.split())
        .group_by(lambda _key, word: word)
        .count(Materialized.as_("counts"))
        .to_stream()
        .to(target, Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    return builder.build()


def _config(secured, app_id: str, tmp_path, **client) -> dict:
    return {
        **_client(secured),
        **client,
        "application.id": app_id,
        "default.key.serde": Serdes.String(),
        "default.value.serde": Serdes.String(),
        "commit.interval.ms": 200,
        "state.dir": str(tmp_path / "state"),
    }


def test_word_count_over_sasl_ssl(spark, secured, topic_name, tmp_path):
    source, target = f"{topic_name}-lines", f"{topic_name}-counts"
    lines = [f"red green {'blue ' * (i % 4)}" for i in range(40)]
    producer = Producer({**_client(secured), "linger.ms": 5})
    for line in lines:
        producer.produce(source, line.encode())
    assert producer.flush(30) == 0
    expected = Counter(word for line in lines for word in line.split())

    streams = KafkaStreams(_word_count(source, target), _config(secured, f"{topic_name}-app", tmp_path))
    streams.start()
    consumer = Consumer({**_client(secured), "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest"})
    consumer.subscribe([target])
    counts: dict[str, int] = {}

    def poll():
        assert streams.state() is State.RUNNING, streams.exception
        for msg in consumer.consume(100, 0.5):
            if not msg.error():
                counts[msg.key().decode()] = struct.unpack(">q", msg.value())[0]

    try:
        wait_until(lambda: counts == expected, 420, "the word counts over SASL_SSL", step=poll)
        # The store reads its changelog topic through the same security settings.
        store = streams.store("counts")
        assert {e.key: e.value for e in store.all()} == expected
    finally:
        consumer.close()
        assert streams.close(60)


def test_wrong_password_fails_start_in_one_line(secured, topic_name, tmp_path):
    source = f"{topic_name}-lines"
    producer = Producer({**_client(secured), "linger.ms": 0})
    producer.produce(source, b"x")
    assert producer.flush(30) == 0
    config = _config(secured, f"{topic_name}-app", tmp_path, **{"sasl.password": "not-alice-secret"})
    streams = KafkaStreams(_word_count(source, f"{topic_name}-out"), config)
    with pytest.raises(SaslAuthenticationFailedError) as failure:
        streams.start()
    message = str(failure.value)
    assert "\n" not in message, message
    assert f"{topic_name}-app cannot authenticate" in message and "sasl.password" in message, message
    assert "not-alice-secret" not in message  # no secret in the error
    assert streams.state() is State.ERROR


def _properties_file(secured, path: Path, password: str = "alice-secret") -> str:
    """The client keys in a properties file, as Kafka's reset tool takes them (--config-file)."""
    client = _client(secured, password)
    path.write_text("".join(f"{k}={v}\n" for k, v in client.items() if k != "bootstrap.servers"))
    return str(path)


def test_reset_over_sasl_ssl_with_a_config_file(secured, topic_name, tmp_path):
    from click.testing import CliRunner
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.cli.streams_reset import reset

    app, source = f"{topic_name}-app", f"{topic_name}-lines"
    changelog = f"{app}-counts-changelog"
    admin = AdminClient(_client(secured))
    for future in admin.create_topics([NewTopic(source, 2, 1), NewTopic(changelog, 1, 1)]).values():
        future.result(30)
    producer = Producer({**_client(secured), "linger.ms": 0})
    for i in range(6):
        producer.produce(source, b"x", partition=i % 2)
    assert producer.flush(30) == 0
    group = Consumer({**_client(secured), "group.id": app, "enable.auto.commit": False})
    where = [TopicPartition(source, 0, 3), TopicPartition(source, 1, 2)]
    group.commit(offsets=where, asynchronous=False)  # where a stopped app left its group
    checkpoint = tmp_path / "state" / app / "offsets"
    checkpoint.mkdir(parents=True)
    broker, _tls = secured
    args = ["-b", broker.address("SASL_SSL"), "--application-id", app, "--input-topics", source,
            "--state-dir", str(tmp_path / "state")]  # fmt: skip

    refused = CliRunner().invoke(
        reset, [*args, "--config-file", _properties_file(secured, tmp_path / "bad.properties", "wrong")]
    )
    assert refused.exit_code != 0 and "wrong" not in refused.output, refused.output
    assert "sasl" in refused.output.lower(), refused.output  # the hint names what to fix
    assert checkpoint.exists()

    done = CliRunner().invoke(
        reset, [*args, "--config-file", _properties_file(secured, tmp_path / "client.properties")]
    )
    assert done.exit_code == 0, done.output
    committed = group.committed([TopicPartition(source, 0), TopicPartition(source, 1)], timeout=30)
    group.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 0), (1, 0)]
    assert changelog not in admin.list_topics(timeout=30).topics
    assert not checkpoint.exists()
