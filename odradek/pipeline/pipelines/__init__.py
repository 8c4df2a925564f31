"""The ready pipelines, each a function ``start(spark, config) -> [StreamingQuery, ...]``.

* ``page-views`` — website activity tracking: views per page per event-time minute
  (with a grace period for late events) to one topic, and a top-N pages table to a compacted
  topic, written with odradek.streams;
* ``offline-load`` — periodic loading into an offline system: a topic's new records to
  Parquet partitioned by date, resuming where the last run stopped;
* ``page-views-by-region`` — Kafka's PageViewRegion: page views joined with each user's region
  (a table), counted by region, written with odradek.streams;
* ``value-length`` — Kafka Streams' introductory example ``mapValues(value -> value.length())``, written with odradek.streams (odradek/streams/apps).
"""

from __future__ import annotations

PIPELINES = {
    "page-views": "odradek.streams.apps.page_views",  # a Streams topology
    "offline-load": "odradek.pipeline.pipelines.offline_load",
    "value-length": "odradek.streams.apps.value_length",  # a Streams topology
    "page-views-by-region": "odradek.streams.apps.page_views_by_region",  # a Streams topology
}
