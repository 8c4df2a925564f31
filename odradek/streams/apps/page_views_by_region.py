"""Page views per region, Kafka's PageViewRegion example as a Streams topology: a stream of page
views keyed by user joined with a table of each user's region, counted by region.

    views   = builder.stream(views_topic)                  # user -> page
    regions = builder.table(regions_topic)                 # user -> region (latest; null deletes)
    (views.join(regions, lambda page, region: region)      # a view counts for the user's region
          .select_key(lambda user, region: region)         #   as it is at the view's time
          .group_by_key(Grouped.with_(Serdes.String(), Serdes.String()))
          .count(Materialized.as_("views-per-region"))
          .to_stream()
          .to(output_topic, Produced(Serdes.String(), Serdes.Long())))

A region change counts the user's later views only; a view of a user with no region counts
nowhere. The counts reach ``output_topic`` as Kafka's 8-byte longs, keyed by region.
"""

from __future__ import annotations

from odradek.streams.apps import run_exactly_once


def topology(views_topic: str, regions_topic: str, output_topic: str):
    from odradek.streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder

    strings = Consumed(Serdes.String(), Serdes.String())
    builder = StreamsBuilder()
    views = builder.stream(views_topic, strings)
    regions = builder.table(regions_topic, strings)
    (
        views.join(regions, lambda page, region: region)
        .select_key(lambda user, region: region)
        .group_by_key(Grouped.with_(Serdes.String(), Serdes.String()))  # the repartition topic's serdes
        .count(Materialized.as_("views-per-region"))
        .to_stream()
        .to(output_topic, Produced(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def start(spark, config, *, views_topic: str, regions_topic: str, output_topic: str) -> list:
    """``odradek pipeline run page-views-by-region``: the topology on ``spark``, exactly once."""
    return run_exactly_once(
        spark,
        config,
        topology(views_topic, regions_topic, output_topic),
        "page-views-by-region",
        f"page-views-by-region-{views_topic}-{output_topic}",
    )
