"""Periodic loading into an offline system: a topic to Parquet by date.

Each run exports the records that arrived since the last run and stops: a streaming
query with ``Trigger.AvailableNow`` whose checkpoint is the memory of how far it got,
writing through Spark's file sink, which commits each micro-batch's files in its
``_spark_metadata`` log. A run that dies half-way leaves no visible partial output, and
the next run continues from the last committed batch, so every record lands in the
Parquet table exactly once (read it with ``spark.read.parquet(path)``, which follows the
log).

Columns: ``key`` and ``value`` (strings, UTF-8 decoded; ``--binary`` keeps bytes),
``topic``, ``partition``, ``offset``, ``timestamp`` and ``date`` (``yyyy-MM-dd`` of the
record's timestamp, UTC), the partition column.
"""

from __future__ import annotations

from odradek.pipeline.pipelines.run_config import RunConfig


def start(
    spark,
    config: RunConfig,
    *,
    input_topic: str,
    output_path: str,
    binary: bool = False,
    max_records_per_batch: int | None = None,
) -> list:
    from pyspark.sql import functions as F

    if max_records_per_batch:
        config.source_options.setdefault("maxOffsetsPerTrigger", str(max_records_per_batch))
    records = config.source(spark, input_topic)
    cast = (lambda c: F.col(c)) if binary else (lambda c: F.col(c).cast("string"))
    table = records.select(
        cast("key").alias("key"),
        cast("value").alias("value"),
        "topic",
        "partition",
        "offset",
        "timestamp",
        F.date_format("timestamp", "yyyy-MM-dd").alias("date"),
    )
    writer = (
        table.writeStream.format("parquet")
        .option("path", output_path)
        .option("checkpointLocation", config.checkpoint_dir(f"offline-load/{input_topic}"))
        .partitionBy("date")
        .queryName(f"offline-load-{input_topic}")
    )
    return [config.triggered(writer).start()]
