"""Website activity tracking: page views per page per minute, and the top pages.

Events are JSON page views published to one topic per activity type (``page-views``)::

    {"event_id": "…", "user": "u17", "page": "/products/3", "action": "view", "ts": 1767225600000}

``ts`` is the event time in milliseconds. Two streaming queries read them:

* **per minute** — views per page per 1-minute event-time window, with a watermark
  (default 1 minute) so late events within it still count and each window is emitted
  once, when the watermark passes its end (append mode). Written, exactly once, to the
  output topic with the page as key and
  ``{"window_start", "window_end", "page", "views"}`` as value.
* **top pages** — all-time views per page (complete mode); each micro-batch writes the
  top N to a compacted topic keyed by rank (``"001"``, ``"002"``, …) with
  ``{"rank", "page", "views"}``: the table's latest value per key is the current top N.
  Update mode is not available to Python sinks, so this goes through ``foreachBatch``
  with an exactly-once batch write (``sinkId=top``).

``generate`` publishes such events: pages follow a Zipf-like popularity, users are
uniform; timestamps are now, or ``start_ms + i * step_ms`` for reproducible runs.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator

from odradek.pipeline.pipelines.run_config import RunConfig

EVENT_SCHEMA = "event_id string, user string, page string, action string, ts long"


def events(
    count: int | None = None,
    *,
    seed: int | None = None,
    pages: int = 50,
    users: int = 1000,
    start_ms: int | None = None,
    step_ms: int = 0,
) -> Iterator[dict]:
    """Page-view events; ``count`` None means forever."""
    rng = random.Random(seed)
    names = [f"/page/{i}" for i in range(pages)]
    weights = [1 / (i + 1) for i in range(pages)]
    i = 0
    while count is None or i < count:
        ts = int(time.time() * 1000) if start_ms is None else start_ms + i * step_ms
        yield {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "user": f"u{rng.randrange(users)}",
            "page": rng.choices(names, weights)[0],
            "action": "view",
            "ts": ts,
        }
        i += 1


def generate(
    bootstrap_servers: str,
    topic: str,
    *,
    rate: float,
    count: int | None = None,
    seed: int | None = None,
    pages: int = 50,
    users: int = 1000,
    start_ms: int | None = None,
    step_ms: int = 0,
    on_progress=None,
    stop=None,
) -> int:
    """Publish events at ``rate`` per second (0: as fast as possible); returns how many.
    Stops early once ``stop`` (a ``threading.Event``) is set."""
    from odradek.pipeline.publish import Publisher

    sent = 0
    started = time.monotonic()
    with Publisher(bootstrap_servers, topic, batch_bytes=256 << 10) as out:
        for event in events(count, seed=seed, pages=pages, users=users, start_ms=start_ms, step_ms=step_ms):
            out.send(json.dumps(event, separators=(",", ":")).encode(), key=event["user"].encode())
            sent += 1
            if stop is not None and stop.is_set():
                break
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0.05:
                    out.flush()
                    time.sleep(ahead)
                    if on_progress is not None:
                        on_progress(sent)
    return sent


def start(
    spark,
    config: RunConfig,
    *,
    input_topic: str = "page-views",
    output_topic: str = "page-views-per-minute",
    top_topic: str = "page-views-top",
    top_n: int = 10,
    window: str = "1 minute",
    watermark: str = "1 minute",
) -> list:
    from pyspark.sql import functions as F

    views = (
        config.source(spark, input_topic)
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .where(
            F.col("page").isNotNull()
            & F.col("ts").isNotNull()
            & (F.coalesce(F.col("action"), F.lit("view")) == "view")
        )
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    per_minute = (
        views.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), "page")
        .count()
        .select(
            F.col("page").alias("key"),
            F.to_json(
                F.struct(
                    F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                    F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                    "page",
                    F.col("count").alias("views"),
                )
            ).alias("value"),
        )
    )
    q_minute = config.triggered(
        per_minute.writeStream.format("odradek")
        .outputMode("append")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("topic", output_topic)
        .option("checkpointLocation", config.checkpoint_dir("page-views/per-minute"))
        .queryName("page-views-per-minute")
    ).start()

    totals = views.groupBy("page").count()
    bootstrap = config.bootstrap_servers

    def write_top(batch_df, batch_id: int) -> None:
        top = batch_df.orderBy(F.desc("count"), F.asc("page")).limit(top_n).collect()
        rows = [
            (f"{rank:03d}", json.dumps({"rank": rank, "page": row["page"], "views": row["count"]}))
            for rank, row in enumerate(top, 1)
        ]
        if not rows:
            return
        (
            batch_df.sparkSession.createDataFrame(rows, "key string, value string")
            .coalesce(1)
            .write.format("odradek")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", top_topic)
            .option("exactlyOnce", "true")
            .option("sinkId", "top")
            .save()
        )

    q_top = config.triggered(
        totals.writeStream.outputMode("complete")
        .foreachBatch(write_top)
        .option("checkpointLocation", config.checkpoint_dir("page-views/top"))
        .queryName("page-views-top")
    ).start()
    return [q_minute, q_top]
