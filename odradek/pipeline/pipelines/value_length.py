"""Kafka Streams' introductory example, mapValues(value -> value.length()), as a Spark job.

The Kafka Streams version::

    builder.<String, String>stream("my-input-topic")
           .mapValues(value -> value.length().toString())
           .to("my-output-topic");

Each record of the input topic becomes one record of the output topic with the same key
and, as value, the length of its value in characters (UTF-8 decoded), as a decimal
string. A null value stays null. Written exactly once.
"""

from __future__ import annotations

from odradek.pipeline.pipelines.run_config import RunConfig


def start(spark, config: RunConfig, *, input_topic: str, output_topic: str) -> list:
    from pyspark.sql import functions as F

    lengths = config.source(spark, input_topic).select(
        "key", F.length(F.col("value").cast("string")).cast("string").alias("value")
    )
    writer = (
        lengths.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("topic", output_topic)
        .option("checkpointLocation", config.checkpoint_dir(f"value-length/{input_topic}-{output_topic}"))
        .queryName("value-length")
    )
    return [config.triggered(writer).start()]
