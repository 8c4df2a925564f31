"""A connector's transformation chain from its config, and the validation the REST API reports."""

import pytest

from odradek.connect.data import Schema, SchemaBuilder, Struct
from odradek.connect.errors import ConfigException
from odradek.connect.records import SinkRecord
from odradek.connect.transforms import TransformationChain, validate_transforms

T = "org.apache.kafka.connect.transforms."
CONFIG = {
    "connector.class": "FileStreamSink",
    "transforms": "route, mask ,key,stamp",
    "transforms.route.type": T + "RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "copy-$1",
    "transforms.mask.type": "MaskField$Value",  # the simple name works too
    "transforms.mask.fields": "secret",
    "transforms.key.type": T + "ValueToKey",
    "transforms.key.fields": "id",
    "transforms.stamp.type": T + "InsertField$Value",
    "transforms.stamp.topic.field": "from",
}
SCHEMA = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("secret", Schema.STRING_SCHEMA).build()


def test_chain_applies_the_stages_in_order():
    chain = TransformationChain.from_config(CONFIG)
    assert [s.alias for s in chain.stages] == ["route", "mask", "key", "stamp"]
    value = Struct(SCHEMA).put("id", 5).put("secret", "hunter2")
    out = chain.apply(SinkRecord(topic="users", kafka_partition=0, value_schema=SCHEMA, value=value, kafka_offset=9))
    assert out.topic == "copy-users" and out.original_topic == "users"
    assert out.key.get("id") == 5
    assert out.value.get("secret") == "" and out.value.get("from") == "copy-users"
    chain.close()
    assert TransformationChain.from_config({}).apply(SinkRecord(topic="t", value=1)).value == 1


@pytest.mark.parametrize(
    "changes, key, words",
    [
        ({"transforms.route.type": None}, "transforms.route.type", "Missing required configuration"),
        ({"transforms.route.type": "com.example.Nope"}, "transforms.route.type", "could not be found"),
        ({"transforms.route.regex": None}, "transforms.route.regex", "Missing required"),
        ({"transforms.mask.fields": None}, "transforms.mask.fields", "Missing required"),
        ({"transforms.route.predicate": "nope"}, "transforms.route.predicate", "not listed in predicates"),
        ({"transforms.route.negate": "true"}, "transforms.route.negate", "with a predicate"),
        ({"transforms": "route,route"}, "transforms", "Duplicate alias"),
    ],
)
def test_bad_configs_name_the_full_key(changes, key, words):
    config = {k: v for k, v in {**CONFIG, **changes}.items() if v is not None}
    with pytest.raises(ConfigException) as bad:
        TransformationChain.from_config(config)
    assert bad.value.key == key and words in str(bad.value)
    assert any(k == key and words in message for k, message in validate_transforms(config))


def test_validation_lists_every_problem_at_once():
    config = dict(CONFIG)
    del config["transforms.route.regex"]
    config["transforms.key.type"] = "Nope"
    config["predicates"] = "p"
    config["predicates.p.type"] = T + "predicates.HasHeaderKey"
    problems = dict(validate_transforms(config))
    assert set(problems) == {"transforms.route.regex", "transforms.key.type", "predicates.p.name"}
    assert validate_transforms(CONFIG) == []


def test_kafkas_documented_example_hoists_lines_and_inserts_the_source():
    # The transforms example of Kafka's Connect documentation, applied to the quickstart's file lines.
    from odradek.connect.converters import JsonConverter
    from odradek.connect.records import SourceRecord

    chain = TransformationChain.from_config(
        {
            "transforms": "MakeMap, InsertSource",
            "transforms.MakeMap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
            "transforms.MakeMap.field": "line",
            "transforms.InsertSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.InsertSource.static.field": "data_source",
            "transforms.InsertSource.static.value": "test-file-source",
        }
    )
    line = SourceRecord(topic="connect-test", value_schema=Schema.STRING_SCHEMA, value="foo",
                        source_partition={"filename": "test.txt"}, source_offset={"position": 4})
    out = chain.apply(line)
    plain, enveloped = JsonConverter(), JsonConverter()
    plain.configure({"schemas.enable": "false"}, False)
    assert plain.from_connect_data(out.topic, out.value_schema, out.value) == (
        b'{"line":"foo","data_source":"test-file-source"}'
    )
    assert enveloped.from_connect_data(out.topic, out.value_schema, out.value) == (
        b'{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"line"},'
        b'{"type":"string","optional":true,"field":"data_source"}],"optional":false},'
        b'"payload":{"line":"foo","data_source":"test-file-source"}}'
    )
    assert out.source_offset == {"position": 4}  # what the worker stores stays the connector's
