"""Interactive queries on a session store (ReadOnlySessionStore) read from a changelog topic on a
real broker, written in Kafka's session-store key layout (key, end, start; a merged-away session
deleted by a tombstone). The time-window store is queried on a running app in windowed_app.py."""

from __future__ import annotations

import struct

from pipeline_kafka import create_topic, produce

from odradek.streams import Serdes
from odradek.streams.windowed import SessionWindowedSerde
from odradek.streams.windowed_queries import ReadOnlySessionStore, open_store


def session_key(key: str, start: int, end: int) -> bytes:
    return key.encode() + struct.pack(">qq", end, start)


def test_session_store_answers_live_sessions(broker, topic_name):
    bootstrap = broker.bootstrap_servers
    changelog = f"{topic_name}-app-sessions-changelog"
    create_topic(bootstrap, changelog, 2)
    long = struct.Struct(">q").pack
    produce(
        bootstrap,
        changelog,
        [
            {"key": session_key("a", 1_000, 1_000), "value": long(1), "partition": 0},
            {"key": session_key("a", 4_000, 5_000), "value": long(2), "partition": 0},
            {"key": session_key("b", 2_000, 2_000), "value": long(1), "partition": 1},
            # a record at 3 s merges a's two sessions: the old ones deleted, the merged one written
            {"key": session_key("a", 1_000, 1_000), "value": None, "partition": 0},
            {"key": session_key("a", 4_000, 5_000), "value": None, "partition": 0},
            {"key": session_key("a", 1_000, 5_000), "value": long(4), "partition": 0},
            {"key": session_key("a", 20_000, 20_000), "value": long(1), "partition": 0},
        ],
    )
    store = open_store(
        "sessions", changelog, SessionWindowedSerde(Serdes.String()), Serdes.Long(),
        {"kafka.bootstrap.servers": bootstrap}, read_committed=False,
    )  # fmt: skip
    assert isinstance(store, ReadOnlySessionStore)

    def sessions(found):
        return [(e.key.key, e.key.window.start, e.key.window.end, e.value) for e in found]

    assert sessions(store.fetch("a")) == [("a", 1_000, 5_000, 4), ("a", 20_000, 20_000, 1)]
    assert sessions(store.fetch("b")) == [("b", 2_000, 2_000, 1)]
    assert sessions(store.fetch("absent")) == []
    assert store.fetch_session("a", 1_000, 5_000) == 4
    assert store.fetch_session("a", 4_000, 5_000) is None  # merged away
    # Sessions ending at or after 6 s and starting at or before 25 s: only the late one.
    assert sessions(store.find_sessions("a", 6_000, 25_000)) == [("a", 20_000, 20_000, 1)]
    assert sessions(store.find_sessions("a", 5_000, 25_000)) == [
        ("a", 1_000, 5_000, 4),
        ("a", 20_000, 20_000, 1),
    ]
    # A later call catches up with what the changelog got since.
    produce(bootstrap, changelog, [{"key": session_key("b", 2_000, 2_000), "value": None, "partition": 1}])
    assert sessions(store.fetch("b")) == []
