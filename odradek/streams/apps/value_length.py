"""Kafka Streams' introductory example, mapValues(value -> value.length()), as a Streams topology.

The Kafka Streams version::

    builder.<String, String>stream("my-input-topic")
           .mapValues(value -> value.length().toString())
           .to("my-output-topic");

and here, with ``odradek.streams`` (run by Spark)::

    builder.stream(input_topic, Consumed(Serdes.ByteArray(), Serdes.String()))
           .map_values(lambda v: None if v is None else str(len(v)))
           .to(output_topic, Produced(Serdes.ByteArray(), Serdes.String()))

Each record of the input topic becomes one record of the output topic with the same key
and, as value, the length of its value in characters (UTF-8 decoded), as a decimal
string. A null value stays null. Written exactly once (``processing.guarantee=exactly_once_v2``).
"""

from __future__ import annotations

from odradek.pipeline.pipelines.run_config import RunConfig
from odradek.streams.apps import run_exactly_once


def topology(input_topic: str, output_topic: str):
    from odradek.streams import Consumed, Produced, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    builder.stream(input_topic, Consumed(Serdes.ByteArray(), Serdes.String())).map_values(
        lambda v: None if v is None else str(len(v))
    ).to(output_topic, Produced(Serdes.ByteArray(), Serdes.String()))
    return builder.build()


def start(spark, config: RunConfig, *, input_topic: str, output_topic: str) -> list:
    return run_exactly_once(
        spark,
        config,
        topology(input_topic, output_topic),
        "value-length",
        f"value-length-{input_topic}-{output_topic}",
    )
