"""Website activity tracking as a Streams topology: page views per page per minute, and the top pages.

Events are JSON page views (``odradek pipeline generate page-views``), their event time in ``ts``
(ms), which the source's timestamp extractor makes the records' timestamps::

    {"event_id": "…", "user": "u17", "page": "/products/3", "action": "view", "ts": 1767225600000}

Two results, as Kafka Streams code would write them::

    views   = builder.stream(input, Consumed.with_(ByteArray, PageViewSerde, timestamp_extractor=event_time))
                     .filter(lambda user, view: view is not None)    # a view with a page and a ts
    by_page = views.map(lambda user, view: (view["page"], view["page"])).group_by_key(...)

    # views per page per window, once per window, after the grace period
    (by_page.windowed_by(TimeWindows.of_size_and_grace(window, grace))
            .count(Named.as_("per-minute"), Materialized.as_("views-per-minute"))
            .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
            .to_stream().map(lambda window, views: (window.key, {"window_start", "window_end", "page", "views"}))
            .to(output))

    # the all-time top N (Kafka's TopArticlesExample): the counts per page re-grouped to one key
    (by_page.count(Named.as_("all-time"), Materialized.as_("views-per-page"))
            .group_by(lambda page, views: ("top", [page, views]))
            .aggregate(list, add_to_top, subtract_from_top, Named.as_("top-pages"))
            .to_stream().flat_map(ranks)                          # "001" -> {"rank", "page", "views"}
            .to(top_topic))

A window's count reaches ``output`` once stream time (the newest event time seen) has passed the
window's end plus the grace period; events later than that are dropped from the window (and
logged), but still count in the all-time table. ``top_topic`` is compacted, keyed by rank: its
latest value per rank is the current top N (a rank beyond the number of pages seen so far gets a
tombstone). Written exactly once (``processing.guarantee=exactly_once_v2``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from odradek.pipeline.pipelines.run_config import RunConfig, interval_ms
from odradek.streams.apps import run_exactly_once
from odradek.streams.serdes import Serde


class PageViewSerde(Serde):
    """A page view's JSON; reads anything that is not a view with a page and an integer ``ts``
    (the event time, ms) as None, so the topology skips it, as the SQL pipeline's from_json did."""

    kafka_class_name = "odradek.streams.apps.page_views.PageViewSerde"

    def serialize(self, topic, view):
        return None if view is None else json.dumps(view, separators=(",", ":")).encode()

    def deserialize(self, topic, data):
        try:
            view = json.loads(data) if data is not None else None
        except ValueError:
            return None
        if not isinstance(view, dict):
            return None
        page, ts = view.get("page"), view.get("ts")
        if not isinstance(page, str) or type(ts) is not int or (view.get("action") or "view") != "view":
            return None
        return view


def event_time(record, partition_time: int) -> int:
    """The timestamp extractor: a view's ``ts``; a record that is no view keeps its own (and is
    filtered out after)."""
    return record.value["ts"] if record.value is not None else record.timestamp


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window_json(window, views: int) -> str:
    return json.dumps(
        {
            "window_start": _iso(window.window.start),
            "window_end": _iso(window.window.end),
            "page": window.key,
            "views": views,
        },
        separators=(",", ":"),
    )


def _ranked(entries: list) -> list:
    return sorted(entries, key=lambda entry: (-entry[1], entry[0]))


def topology(
    input_topic: str,
    output_topic: str,
    top_topic: str,
    *,
    top_n: int = 10,
    window_ms: int = 60_000,
    grace_ms: int = 60_000,
):
    from odradek.streams import (
        BufferConfig,
        Consumed,
        Grouped,
        Materialized,
        Named,
        Produced,
        Serdes,
        StreamsBuilder,
        Suppressed,
        TimeWindows,
    )

    strings = Produced(key_serde=Serdes.String(), value_serde=Serdes.String())
    builder = StreamsBuilder()
    views = builder.stream(
        input_topic, Consumed.with_(Serdes.ByteArray(), PageViewSerde(), timestamp_extractor=event_time)
    ).filter(lambda user, view: view is not None)
    by_page = views.map(lambda user, view: (view["page"], view["page"])).group_by_key(
        Grouped.with_(Serdes.String(), Serdes.String())
    )

    (
        by_page.windowed_by(TimeWindows.of_size_and_grace(window_ms, grace_ms))
        .count(Named.as_("per-minute"), Materialized.as_("views-per-minute"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, views: (window.key, _window_json(window, views)))
        .to(output_topic, strings)
    )

    # The top N only: a page's count only grows, so the new top N is among the old top N and the
    # pages whose counts changed, each of which comes to the adder with its new count.
    def add_to_top(_key, entry, top):
        return _ranked([e for e in top if e[0] != entry[0]] + [entry])[:top_n]

    def subtract_from_top(_key, entry, top):
        return [e for e in top if e != entry]

    def ranks(_key, top):
        top = top or []
        records = [
            (f"{rank:03d}", json.dumps({"rank": rank, "page": page, "views": views}))
            for rank, (page, views) in enumerate(top, 1)
        ]
        return records + [(f"{rank:03d}", None) for rank in range(len(top) + 1, top_n + 1)]

    (
        by_page.count(Named.as_("all-time"), Materialized.as_("views-per-page"))
        .group_by(lambda page, views: ("top", [page, views]), Grouped.with_(Serdes.String(), Serdes.JSON()))
        .aggregate(
            list,
            add_to_top,
            subtract_from_top,
            Named.as_("top-pages"),
            Materialized.as_("top-pages").with_value_serde(Serdes.JSON()),
        )
        .to_stream()
        .flat_map(ranks)
        .to(top_topic, strings)
    )
    return builder.build()


def application_id(input_topic: str, output_topic: str) -> str:
    return f"page-views-{input_topic}-{output_topic}"


def start(
    spark,
    config: RunConfig,
    *,
    input_topic: str = "page-views",
    output_topic: str = "page-views-per-minute",
    top_topic: str = "page-views-top",
    top_n: int = 10,
    window: str = "1 minute",
    grace: str = "1 minute",
) -> list:
    """``odradek pipeline run page-views``: the topology on ``spark``, exactly once; its
    checkpoints under ``<checkpoint>/page-views/<application.id>/``."""
    return run_exactly_once(
        spark,
        config,
        topology(
            input_topic,
            output_topic,
            top_topic,
            top_n=top_n,
            window_ms=interval_ms(window),
            grace_ms=interval_ms(grace),
        ),
        "page-views",
        application_id(input_topic, output_topic),
    )
