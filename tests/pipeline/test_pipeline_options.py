"""Options as Spark's Kafka source spells them, offset JSON, range splitting and rate limits."""

from __future__ import annotations

import pytest

from odradek.pipeline.options import OptionError, read_options, source_schema, write_options  # noqa: E402
from odradek.pipeline.reader import RangePartition  # noqa: E402
from odradek.pipeline.source import offsets_from_json, offsets_to_json, rate_limit, split_ranges  # noqa: E402

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_options_are_case_insensitive_and_default_like_spark():
    opts = read_options({**BASE, "SUBSCRIBE": "a, b", "includeheaders": "TRUE"}, streaming=True)
    assert opts.subscription.topics == ("a", "b")
    assert opts.include_headers
    assert opts.starting.kind == "latest"  # streaming default
    assert opts.fail_on_data_loss
    batch = read_options({**BASE, "subscribe": "a"}, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"


def test_exactly_one_subscription_option():
    with pytest.raises(OptionError, match="exactly one"):
        read_options(BASE, streaming=False)
    with pytest.raises(OptionError, match="exactly one"):
        read_options({**BASE, "subscribe": "a", "assign": '{"a": [0]}'}, streaming=False)
    opts = read_options({**BASE, "assign": '{"a": [1, 0], "b": [2]}'}, streaming=False)
    assert opts.subscription.assignment == (("a", 0), ("a", 1), ("b", 2))
    with pytest.raises(OptionError, match="regular expression"):
        read_options({**BASE, "subscribePattern": "("}, streaming=False)


def test_bootstrap_servers_required():
    with pytest.raises(OptionError, match="bootstrap"):
        read_options({"subscribe": "a"}, streaming=False)
    assert (
        read_options({"bootstrap.servers": "h:1", "subscribe": "a"}, streaming=False).bootstrap_servers
        == "h:1"
    )


def test_offset_specs():
    opts = read_options(
        {
            **BASE,
            "subscribe": "t",
            "startingOffsets": '{"t": {"0": 5, "1": -2}}',
            "endingOffsets": '{"t": {"0": -1}}',
        },
        streaming=False,
    )
    assert opts.starting.kind == "offsets" and opts.starting.per_partition == {("t", 0): 5, ("t", 1): -2}
    assert opts.ending.per_partition == {("t", 0): -1}
    with pytest.raises(OptionError):
        read_options({**BASE, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, streaming=False)
    with pytest.raises(OptionError):
        read_options({**BASE, "subscribe": "t", "endingOffsets": "earliest"}, streaming=False)
    with pytest.raises(OptionError, match="batch"):
        read_options({**BASE, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    ts = read_options(
        {**BASE, "subscribe": "t", "startingTimestamp": "1000", "startingOffsets": "latest"}, streaming=True
    )
    assert ts.starting.kind == "timestamp" and ts.starting.timestamp == 1000
    by = read_options(
        {**BASE, "subscribe": "t", "startingOffsetsByTimestamp": '{"t": {"0": 7}}'}, streaming=True
    )
    assert by.starting.kind == "timestamps" and by.starting.per_partition == {("t", 0): 7}


def test_schema_matches_sparks_kafka_source():
    names = [f.name for f in source_schema(False).fields]
    assert names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert source_schema(True).fields[-1].name == "headers"


def test_write_options():
    opts = write_options({**BASE, "topic": "out"}, streaming=True)
    assert opts.exactly_once and opts.acks == -1
    assert not write_options({**BASE, "topic": "out"}, streaming=False).exactly_once
    with pytest.raises(OptionError, match="acks"):
        write_options({**BASE, "kafka.acks": "1"}, streaming=True)
    assert write_options({**BASE, "kafka.acks": "1", "exactlyOnce": "false"}, streaming=True).acks == 1
    assert write_options({**BASE, "kafka.compression.type": "zstd"}, streaming=False).compression == 4


def test_offsets_json_is_ordered_by_topic_and_partition_number():
    data = offsets_to_json({("b", 10): 1, ("b", 2): 3, ("a", 0): 0})
    assert list(data) == ["a", "b"] and list(data["b"]) == ["2", "10"]
    assert offsets_from_json(data) == {("b", 10): 1, ("b", 2): 3, ("a", 0): 0}


def test_split_ranges():
    ranges = [RangePartition("t", 0, 0, 10), RangePartition("t", 1, 5, 5), RangePartition("t", 2, 0, 3)]
    out = split_ranges(ranges, max_records=4, min_partitions=None)
    assert [(r.partition, r.start, r.end) for r in out] == [(0, 0, 4), (0, 4, 8), (0, 8, 10), (2, 0, 3)]
    out = split_ranges([RangePartition("t", 0, 0, 100)], max_records=1000, min_partitions=4)
    assert [(r.start, r.end) for r in out] == [(0, 25), (25, 50), (50, 75), (75, 100)]


def test_rate_limit_spreads_by_backlog_and_spends_the_whole_budget():
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 0}
    end = rate_limit(start, latest, 100)
    assert sum(end[tp] - start.get(tp, 0) for tp in end) == 100
    assert end[("t", 0)] == 75 and end[("t", 1)] == 125 and end[("t", 2)] == 0
    assert rate_limit(start, latest, 10_000) == latest
    one = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1}, 1)
    assert sum(one.values()) == 1


def test_security_options_travel_without_their_kafka_prefix_and_are_checked_at_once():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9093", "subscribe": "t", "topic": "t"}
    secured = {
        **base,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";',
    }
    expected = (
        ("sasl.jaas.config", secured["kafka.sasl.jaas.config"]),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("security.protocol", "SASL_PLAINTEXT"),
    )
    assert read_options(secured, streaming=True).security == expected
    assert write_options(secured, streaming=False).security == expected
    assert read_options(base, streaming=True).security == ()
    with pytest.raises(OptionError, match="sasl.username and sasl.password"):
        read_options({**base, "kafka.security.protocol": "SASL_SSL"}, streaming=True)
    with pytest.raises(OptionError, match="ssl.bogus"):
        write_options({**base, "kafka.ssl.bogus": "x"}, streaming=True)
