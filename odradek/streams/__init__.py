"""Kafka Streams' DSL in Python, compiled to Spark Structured Streaming over the ``odradek``
data source (docs/streams.md).

    builder = StreamsBuilder()
    builder.stream("my-input-topic").map_values(lambda v: str(len(v))).to("my-output-topic")
    streams = KafkaStreams(builder.build(), {"application.id": "app", "bootstrap.servers": "…",
                                             "default.key.serde": Serdes.String(),
                                             "default.value.serde": Serdes.String()})
    streams.start()

PySpark is imported only when a topology is compiled (``KafkaStreams.start``, the test driver).
"""

from __future__ import annotations

from odradek.streams.dsl import (
    BranchedKStream,
    KeyValue,
    KGroupedStream,
    KStream,
    KTable,
    StreamsBuilder,
    TopologyException,
)
from odradek.streams.dsl_options import (
    Branched,
    BufferConfig,
    Consumed,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    Suppressed,
    TimeWindows,
)
from odradek.streams.interactive_queries import InvalidStateStoreException, ReadOnlyKeyValueStore, StoreEntry
from odradek.streams.kafka_streams import (
    KafkaStreams,
    MissingSourceTopicException,
    State,
    StreamsUncaughtExceptionHandler,
)
from odradek.streams.serdes import Serde, Serdes
from odradek.streams.stage import StreamsException
from odradek.streams.streams_config import ConfigException, StreamsConfig
from odradek.streams.test_driver import TopologyTestDriver
from odradek.streams.topology import Topology, TopologyDescription
from odradek.streams.windowed_queries import ReadOnlySessionStore, ReadOnlyWindowStore

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "ConfigException",
    "Consumed",
    "Grouped",
    "InvalidStateStoreException",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KStream",
    "KTable",
    "KafkaStreams",
    "KeyValue",
    "Materialized",
    "MissingSourceTopicException",
    "Named",
    "Produced",
    "ReadOnlyKeyValueStore",
    "ReadOnlySessionStore",
    "ReadOnlyWindowStore",
    "Repartitioned",
    "Serde",
    "Serdes",
    "SessionWindows",
    "SlidingWindows",
    "State",
    "StoreEntry",
    "StreamJoined",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsException",
    "StreamsUncaughtExceptionHandler",
    "Suppressed",
    "TimeWindows",
    "Topology",
    "TopologyDescription",
    "TopologyException",
    "TopologyTestDriver",
]
