"""`odradek produce` read back by confluent-kafka; `odradek consume` prints what confluent-kafka wrote."""

from __future__ import annotations

import json
import time

import pytest
from cli_helpers import ck_committed, ck_consume_all, ck_produce, run_odradek


def test_produce_lines_are_consumed_by_confluent(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "1").code == 0
    r = odradek("produce", topic_name, input="alpha\nbeta\r\ngamma\n")
    assert r.code == 0, r
    assert f"Produced 3 records to {topic_name}" in r.err
    got = ck_consume_all(broker.bootstrap_servers, topic_name, 3)
    assert [(m.key(), m.value()) for m in got] == [(None, b"alpha"), (None, b"beta"), (None, b"gamma")]


def test_produce_keys_headers_partition_from_file(odradek, broker, topic_name, tmp_path):
    assert odradek("topics", "create", topic_name, "-p", "3").code == 0
    f = tmp_path / "in.txt"
    f.write_text("k1:v1\nk2:v2\n")
    r = odradek(
        "produce",
        "--topic",
        topic_name,
        "--file",
        f,
        "--key-separator",
        ":",
        "--partition",
        "2",
        "--header",
        "src=cli",
        "-o",
        "json",
    )
    assert r.code == 0, r
    assert r.json() == {
        "topic": topic_name,
        "records": 2,
        "partitions": {"2": {"first_offset": 0, "last_offset": 1}},
    }
    # Kafka's reader properties and in-line headers
    r = odradek(
        "produce",
        topic_name,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--partition",
        "1",
        "--compression-type",
        "gzip",
        input="h1:x,h2:y\tk3\tv3\n",
    )
    assert r.code == 0, r
    got = ck_consume_all(broker.bootstrap_servers, topic_name, 3)
    by_value = {m.value(): m for m in got}
    assert by_value[b"v1"].key() == b"k1" and by_value[b"v1"].partition() == 2
    assert by_value[b"v1"].headers() == [("src", b"cli")]
    assert by_value[b"v3"].key() == b"k3" and by_value[b"v3"].partition() == 1
    assert by_value[b"v3"].headers() == [("h1", b"x"), ("h2", b"y")]


def test_produce_errors(odradek, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    bad_line = odradek("produce", topic_name, "--key-separator", ":", input="no separator here\n")
    assert bad_line.code == 1 and "line 1" in bad_line.err and "key separator" in bad_line.err
    bad_partition = odradek("produce", topic_name, "--partition", "7", input="x\n")
    assert (
        bad_partition.code == 1
        and "no partition 7" in bad_partition.err
        and "--partition 0..1" in bad_partition.err
    )
    bad_prop = odradek("produce", topic_name, "--property", "parse.kye=true", input="x\n")
    assert bad_prop.code == 2 and "parse.kye" in bad_prop.err


def test_consume_prints_confluent_records(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "1").code == 0
    ck_produce(
        broker.bootstrap_servers,
        topic_name,
        [(b"a", b"one", [("h", b"1")]), (None, b"two"), (b"c", b"three")],
    )
    plain = odradek("consume", topic_name, "--from-beginning", "--exit-at-end")
    assert plain.code == 0, plain
    assert plain.lines() == ["one", "two", "three"]
    assert "Processed a total of 3 messages" in plain.err
    keyed = odradek("consume", topic_name, "--from-beginning", "--max-messages", "2", "--print-key")
    assert keyed.lines() == ["a\tone", "null\ttwo"]
    fmt = odradek(
        "consume",
        topic_name,
        "-e",
        "--from-beginning",
        "--format",
        "{partition}:{offset} {key}={value} [{headers}]",
    )
    assert fmt.lines() == ["0:0 a=one [h:1]", "0:1 null=two [NO_HEADERS]", "0:2 c=three [NO_HEADERS]"]
    kafka_props = odradek(
        "consume",
        "--topic",
        topic_name,
        "--from-beginning",
        "-e",
        "--property",
        "print.offset=true",
        "--property",
        "print.key=true",
    )
    assert kafka_props.lines()[0] == "Offset:0\ta\tone"
    as_json = odradek("consume", topic_name, "-e", "--from-beginning", "-o", "json")
    records = [json.loads(line) for line in as_json.lines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "a", "one"),
        (1, None, "two"),
        (2, "c", "three"),
    ]
    assert records[0]["headers"] == [{"key": "h", "value": "1"}]
    assert records[0]["timestamp_type"] == "CreateTime" and records[0]["timestamp"] > 0


def test_consume_partition_offset_and_timestamp(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    ck_produce(
        broker.bootstrap_servers, topic_name, [(None, f"p1-{i}".encode()) for i in range(3)], partition=1
    )
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"late")], partition=1)
    at = odradek("consume", topic_name, "--partition", "1", "--offset", "1", "--max-messages", "1")
    assert at.lines() == ["p1-1"], at
    since = odradek("consume", topic_name, "--from-timestamp", str(cut_ms), "-e")
    assert since.lines() == ["late"], since
    empty = odradek("consume", topic_name, "--partition", "0", "--from-beginning", "-e")
    assert empty.code == 0 and empty.out == ""
    idle = odradek("consume", topic_name, "--timeout-ms", "300")
    assert idle.code == 0 and "Processed a total of 0 messages" in idle.err
    missing = odradek("consume", topic_name + "-missing", "-e")
    assert missing.code == 1 and "does not exist" in missing.err
    bad = odradek("consume", topic_name, "--partition", "5", "-e")
    assert bad.code == 1 and "no partition 5" in bad.err


def test_consume_with_group_commits_what_it_printed(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "1").code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, f"m{i}".encode()) for i in range(5)])
    group = f"g-{topic_name}"
    first = odradek("consume", topic_name, "--group", group, "--from-beginning", "--max-messages", "2")
    assert first.code == 0, first
    assert first.lines() == ["m0", "m1"]
    assert ck_committed(broker.bootstrap_servers, group, topic_name, [0]) == {0: 2}
    rest = odradek("consume", topic_name, "--group", group, "--exit-at-end")
    assert rest.lines() == ["m2", "m3", "m4"], rest
    assert ck_committed(broker.bootstrap_servers, group, topic_name, [0]) == {0: 5}


def test_produce_then_consume_round_trip_through_the_cli(odradek, topic_name):
    lines = [f"key-{i}\tvalue-{i}" for i in range(50)]
    r = odradek("produce", topic_name, "-K", input="\n".join(lines) + "\n")  # auto-created topic
    assert r.code == 0, r
    back = odradek("consume", topic_name, "--from-beginning", "-e", "-K")
    assert back.code == 0, back
    assert sorted(back.lines()) == sorted(lines)


@pytest.mark.odradek_broker(overrides={"auto.create.topics.enable": "false"})
def test_produce_to_a_missing_topic_says_how_to_create_it(odradek_broker):
    r = run_odradek(
        "produce",
        "absent",
        "-b",
        odradek_broker.bootstrap_servers,
        "--producer-property",
        "max.block.ms=1500",
        input="x\n",
    )
    assert r.code == 1, r
    assert "topic 'absent' does not exist" in r.err and "odradek topics create absent" in r.err
