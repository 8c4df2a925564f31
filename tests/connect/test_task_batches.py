"""A task's records go through converters a whole batch at a time; when one record of a batch
fails, the batch is done again record by record so that errors.tolerance and the dead letter
queue apply to that record alone (no broker: the plumbing as the worker builds it)."""

import pytest
from connect_support import task_plumbing

from odradek.client.structs import ConsumerRecord
from odradek.connect.data import Schema
from odradek.connect.error_handling import ToleranceExceeded
from odradek.connect.records import Headers, SinkRecord, SourceRecord, TimestampType
from odradek.connect.worker_tasks import WorkerSourceTask

JSON = "org.apache.kafka.connect.json.JsonConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
PLAIN_JSON = {"value.converter": JSON, "value.converter.schemas.enable": "false"}
DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
       "errors.deadletterqueue.context.headers.enable": "true"}


def consumed(values, headers=()):
    return [ConsumerRecord("orders", 2, 40 + i, 1_700_000_000_000 + i, 0, None, v, headers)
            for i, v in enumerate(values)]


def test_a_clean_batch_gives_the_records_the_one_by_one_path_gives(tmp_path):
    plumbing = task_plumbing(tmp_path, PLAIN_JSON, JSON)
    records = consumed([b'{"n": 1}', b'"two"', b"3"], headers=[("trace", b"abc")])
    batch = plumbing.sink_convert_all(records)
    one_by_one = [plumbing.sink_convert(r, None, plumbing.errors) for r in records]
    assert batch == one_by_one
    assert [r.value for r in batch] == [{"n": 1}, "two", 3]
    first = batch[0]
    assert (first.topic, first.kafka_partition, first.kafka_offset, first.timestamp) == ("orders", 2, 40, 1_700_000_000_000)
    assert first.timestamp_type is TimestampType.CREATE_TIME
    assert (first.original_topic, first.original_kafka_partition, first.original_kafka_offset) == ("orders", 2, 40)
    assert first.headers.last_with_name("trace").value == "abc"
    assert first.headers is not batch[1].headers  # each record its own headers, as a transform may change them


def test_a_poison_record_in_a_batch_alone_goes_to_the_dead_letter_queue(tmp_path):
    plumbing = task_plumbing(tmp_path, {**DLQ, **PLAIN_JSON}, JSON)
    batch = plumbing.sink_convert_all(consumed([b'"a"', b"{poison", b'"c"']))
    assert [r.value for r in batch] == ["a", "c"]
    assert [r.kafka_offset for r in batch] == [40, 42]
    [(topic, _key, value, headers)] = plumbing.dlq
    assert (topic, value) == ("dlq", b"{poison")
    context = dict(headers)
    assert context["__connect.errors.offset"] == b"41"
    assert context["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert plumbing.errors.total_errors == 1


def test_a_poison_record_fails_the_task_without_tolerance(tmp_path):
    plumbing = task_plumbing(tmp_path, PLAIN_JSON, JSON)
    with pytest.raises(ToleranceExceeded, match="VALUE_CONVERTER"):
        plumbing.sink_convert_all(consumed([b'"a"', b"{poison"]))


def test_a_source_batch_skips_only_the_record_its_converter_refuses(tmp_path):
    plumbing = task_plumbing(tmp_path, {"errors.tolerance": "all"}, BYTES)
    records = [SourceRecord("out", None, None, None, Schema.BYTES_SCHEMA, b"one", headers=Headers().add_string("h", "x")),
               SourceRecord("out", None, None, None, Schema.STRING_SCHEMA, "not bytes"),
               SourceRecord("out", None, None, None, Schema.BYTES_SCHEMA, b"three")]
    converted = plumbing.source_convert_all(records)
    assert [(topic, value) for _, topic, _, value, _ in converted] == [("out", b"one"), (None, None), ("out", b"three")]
    assert converted[0][4] == [("h", b"x")]
    assert [r for r, *_ in converted] == records


def test_with_a_transform_each_record_goes_through_it(tmp_path):
    route = {"transforms": "r", "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
             "transforms.r.regex": "orders", "transforms.r.replacement": "copied"}
    plumbing = task_plumbing(tmp_path, {**route, **PLAIN_JSON}, JSON)
    batch = plumbing.sink_convert_all(consumed([b'"a"', b'"b"']))
    assert [(r.topic, r.original_topic, r.value) for r in batch] == [("copied", "orders", "a"), ("copied", "orders", "b")]


def test_source_offsets_keep_the_latest_of_each_partition(tmp_path):
    runner = WorkerSourceTask("c", 0, None, {}, task_plumbing(tmp_path, {}, BYTES), lambda r: None)
    runner.offsets = {}
    a, b = {"file": "a"}, {"file": "b"}
    records = [SourceRecord("t", source_partition=p, source_offset={"position": n})
               for p, n in ((a, 1), (a, 2), (b, 7), (dict(a), 3), (None, 9))]
    runner._track_offsets(records)
    assert sorted(runner.offsets.values(), key=lambda e: e[0]["file"]) == [(a, {"position": 3}), (b, {"position": 7})]


def test_sink_record_read_is_the_dataclass_record():
    built = SinkRecord("t", 1, None, b"k", Schema.STRING_SCHEMA, "v", 5, Headers(), kafka_offset=9,
                       timestamp_type=TimestampType.LOG_APPEND_TIME)
    read = SinkRecord.read("t", 1, 9, None, b"k", Schema.STRING_SCHEMA, "v", 5, TimestampType.LOG_APPEND_TIME, Headers())
    assert read == built and vars(read) == vars(built)


STRING = "org.apache.kafka.connect.storage.StringConverter"


def test_a_string_batch_gives_the_records_the_one_by_one_path_gives(tmp_path):
    plumbing = task_plumbing(tmp_path, {}, STRING)
    records = [ConsumerRecord("orders", 0, 7, 5, 1, b"k", "é".encode()), ConsumerRecord("orders", 1, 3, 6, 0, None, None)]
    batch = plumbing.sink_convert_all(records)
    assert batch == [plumbing.sink_convert(r, None, plumbing.errors) for r in records]
    assert [(r.key, r.value, r.value_schema, r.timestamp_type) for r in batch] == [
        ("k", "é", Schema.OPTIONAL_STRING_SCHEMA, TimestampType.LOG_APPEND_TIME),
        (None, None, Schema.OPTIONAL_STRING_SCHEMA, TimestampType.CREATE_TIME)]


def test_a_batch_of_two_topics_converts_each_record_for_its_own_topic(tmp_path):
    plumbing = task_plumbing(tmp_path, {}, STRING)
    records = [ConsumerRecord(topic, 0, 1, 5, 0, None, b"v") for topic in ("a", "b", "a")]
    assert [r.topic for r in plumbing.sink_convert_all(records)] == ["a", "b", "a"]
    polled = [SourceRecord(topic, None, None, None, Schema.STRING_SCHEMA, topic) for topic in ("x", "y")]
    assert [(topic, value) for _, topic, _, value, _ in plumbing.source_convert_all(polled)] == [("x", b"x"), ("y", b"y")]


def test_a_string_source_batch_encodes_values_of_every_type(tmp_path):
    plumbing = task_plumbing(tmp_path, {}, STRING)
    polled = [SourceRecord("out", None, Schema.STRING_SCHEMA, "key", Schema.STRING_SCHEMA, "ünï"),
              SourceRecord("out", None, None, None, Schema.INT32_SCHEMA, 42),
              SourceRecord("out", None, None, None, None, None, headers=Headers().add_string("h", "x"))]
    assert [(key, value, headers) for _, _, key, value, headers in plumbing.source_convert_all(polled)] == [
        (b"key", "ünï".encode(), None), (None, b"42", None), (None, None, [("h", b"x")])]


def test_a_string_batch_with_undecodable_bytes_sends_that_record_alone_to_the_dead_letter_queue(tmp_path):
    plumbing = task_plumbing(tmp_path, DLQ, STRING)
    batch = plumbing.sink_convert_all([ConsumerRecord("orders", 0, i, 5, 0, None, v)
                                       for i, v in enumerate([b"a", b"\xff\xfe", b"c"])])
    assert [r.value for r in batch] == ["a", "c"]
    [(topic, _key, value, _headers)] = plumbing.dlq
    assert (topic, value) == ("dlq", b"\xff\xfe")

