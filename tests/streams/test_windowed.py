"""Windowed keys are written as Kafka's TimeWindowedSerializer (key + 8-byte start) and
SessionWindowedSerializer (key + 8-byte end + 8-byte start) write them, and read back."""

from __future__ import annotations

import pytest

from odradek.client.client_errors import SerializationError
from odradek.streams.serdes import Serdes
from odradek.streams.windowed import Window, Windowed, WindowedSerdes

T = "counts"


def test_time_windowed_layout_is_key_then_start():
    serde = WindowedSerdes.time_windowed_serde_from(Serdes.String(), 60_000)
    key = Windowed("alice", Window(120_000, 180_000))
    data = serde.serialize(T, key)
    assert data == b"alice" + (120_000).to_bytes(8, "big")
    back = serde.deserialize(T, data)
    assert (back.key, back.window.start, back.window.end) == ("alice", 120_000, 180_000)
    assert back == key


def test_session_windowed_layout_is_key_then_end_then_start():
    serde = WindowedSerdes.session_windowed_serde_from(Serdes.Long())
    key = Windowed(7, Window(1_000, 4_500))
    data = serde.serialize(T, key)
    assert data == (7).to_bytes(8, "big") + (4_500).to_bytes(8, "big") + (1_000).to_bytes(8, "big")
    assert serde.deserialize(T, data) == key


def test_class_names_and_nulls_are_kafkas():
    serde = WindowedSerdes.time_windowed_serde_from(
        "org.apache.kafka.common.serialization.Serdes$StringSerde", 10
    )
    assert serde.inner == Serdes.String()
    assert serde.kafka_class_name == "org.apache.kafka.streams.kstream.WindowedSerdes$TimeWindowedSerde"
    assert serde.serialize(T, None) is None and serde.deserialize(T, None) is None
    session = WindowedSerdes.session_windowed_serde_from(Serdes.String())
    assert session.serialize(T, None) is None and session.deserialize(T, None) is None
    assert str(Windowed("k", Window(0, 5))) == "[k@0/5]"


def test_short_or_bad_windows_are_refused_with_a_reason():
    with pytest.raises(SerializationError, match="at least 8 bytes"):
        WindowedSerdes.time_windowed_serde_from(Serdes.String(), 10).deserialize(T, b"abc")
    with pytest.raises(SerializationError, match="at least 16 bytes"):
        WindowedSerdes.session_windowed_serde_from(Serdes.String()).deserialize(T, b"\0" * 15)
    with pytest.raises(ValueError, match="start <= end"):
        Window(10, 5)
    with pytest.raises(ValueError, match="must not be negative"):
        WindowedSerdes.time_windowed_serde_from(Serdes.String(), -1)
    # 0 is a sliding window of time difference 0: [t, t]
    assert WindowedSerdes.time_windowed_serde_from(Serdes.String(), 0).deserialize(T, b"k" + (7).to_bytes(8, "big")).window.end == 7
