"""Converter bytes through a real broker: written by confluent-kafka, printed by `odradek consume`,
read back by the converters to the values written."""

import json
import subprocess
import sys

import confluent_kafka

from odradek.connect.converters import JsonConverter, SimpleHeaderConverter, StringConverter
from odradek.connect.data import Schema, SchemaBuilder, Struct

SCHEMA = SchemaBuilder.struct().name("Line").field("n", Schema.INT32_SCHEMA).field("text", Schema.STRING_SCHEMA).build()


def test_json_converter_records_read_back_by_odradek_consume(broker, topic_name):
    values, keys, headers = JsonConverter(), StringConverter(), SimpleHeaderConverter()
    values.configure({}, False)
    keys.configure({}, True)
    written = [Struct(SCHEMA).put("n", i).put("text", f"line {i}") for i in range(3)]
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for struct in written:
        producer.produce(
            topic_name,
            key=keys.from_connect_data(topic_name, Schema.STRING_SCHEMA, f"k{struct.get('n')}"),
            value=values.from_connect_data(topic_name, SCHEMA, struct),
            headers=[("n", headers.from_connect_header(topic_name, "n", Schema.INT32_SCHEMA, struct.get("n")))],
        )
    assert producer.flush(10) == 0
    printed = subprocess.run(
        [sys.executable, "-m", "odradek", "consume", topic_name, "--bootstrap-server", broker.bootstrap_servers,
         "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000", "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    records = [json.loads(line) for line in printed.stdout.splitlines() if line.strip()]
    assert [r["value"] for r in records] == [
        '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"n"},'
        '{"type":"string","optional":false,"field":"text"}],"optional":false,"name":"Line"},'
        f'"payload":{{"n":{i},"text":"line {i}"}}}}'
        for i in range(3)
    ]
    back = [values.to_connect_data(topic_name, r["value"].encode()) for r in records]
    assert [b.value for b in back] == written and all(b.schema == SCHEMA for b in back)
    assert [keys.to_connect_data(topic_name, r["key"].encode()).value for r in records] == ["k0", "k1", "k2"]
    for i, r in enumerate(records):
        assert r["headers"] == [{"key": "n", "value": str(i)}]
        parsed = headers.to_connect_header(topic_name, "n", r["headers"][0]["value"].encode())
        assert (parsed.schema, parsed.value) == (Schema.INT8_SCHEMA, i)  # the schema is inferred, as in Kafka
