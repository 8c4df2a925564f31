"""What clients conclude from our ApiVersions: kafka-python infers the Kafka release from the
highest versions it sees (4.2: ListOffsets v11), librdkafka enables features API by API.
Odradek advertises Kafka 4.2's versions for every API it implements (the exceptions are listed,
with reasons, in kafka_4_2_api_versions.tsv), so both conclude what is true."""

from __future__ import annotations

import logging
import re

from kafka import KafkaConsumer
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from odradek.broker import handlers
from odradek.protocol.messages import api_name


def test_kafka_python_infers_kafka_4_2(broker):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert consumer.config["api_version"] == (4, 2)
    finally:
        consumer.close()


# Behind Kafka 4.2 on purpose: transactions v2 (KIP-890 part 2; see kafka_4_2_api_versions.tsv).
BEHIND_4_2 = {"end_txn", "txn_offset_commit"}


def test_every_api_we_implement_reaches_kafka_4_2s_versions():
    """Falling behind 4.2 on an API we have would make the inference above untrue."""
    ours = {k: (s.min_version, s.max_version) for k, s in handlers.load_all().items()}
    behind = {
        api_name(key): (ours[key][1], their_max)
        for key, (_, their_max) in BROKER_API_VERSIONS[(4, 2)].items()
        if key in ours and ours[key][1] < their_max
    }
    assert set(behind) == BEHIND_4_2, behind


def test_librdkafka_enables_the_features_of_a_modern_broker(broker):
    from confluent_kafka import Producer

    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("librdkafka-features")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    prod = Producer({"bootstrap.servers": broker.bootstrap_servers, "debug": "feature", "logger": logger})
    prod.list_topics(timeout=10)
    prod.poll(0.5)
    enabled = {m.group(1) for line in lines if (m := re.search(r"Enabling feature (\w+)", line))}
    assert {"MsgVer2", "ApiVersion", "IdempotentProducer", "ZSTD", "BrokerGroupCoordinator"} <= enabled, (
        enabled
    )
