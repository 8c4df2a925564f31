"""What the registry writes to its topic: Confluent's key and value JSON, in a compacted topic."""

from __future__ import annotations

import json

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.schema_registry import schema_records as rec
from odradek.schema_registry.registry_state import RegistryState

SCHEMA = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})


def _records(bootstrap: str, topic: str) -> list[tuple[dict, dict | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        while len(out) < high:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            out.append((json.loads(msg.key()), None if msg.value() is None else json.loads(msg.value())))
        return out
    finally:
        consumer.close()


def test_records_are_confluents_and_the_topic_is_compacted_with_one_partition(broker, registry):
    topic = registry.settings["kafkastore.topic"]
    registry.ok("POST", "/subjects/s/versions", {"schema": SCHEMA})
    registry.ok("PUT", "/config/s", {"compatibility": "FULL"})
    registry.ok("PUT", "/mode/s", {"mode": "READONLY"})
    registry.ok("DELETE", "/mode/s")
    registry.ok("DELETE", "/subjects/s")
    registry.ok("DELETE", "/subjects/s?permanent=true")
    assert _records(broker.bootstrap_servers, topic) == [
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
         {"subject": "s", "version": 1, "id": 1, "schema": json.dumps(json.loads(SCHEMA), separators=(",", ":")), "deleted": False}),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, {"mode": "READONLY"}),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, None),
        ({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}, {"subject": "s", "version": 1}),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, None),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, None),
    ]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    meta = admin.list_topics(topic, timeout=10)
    assert len(meta.topics[topic].partitions) == 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


def test_the_view_applies_records_a_confluent_registry_wrote():
    """Records as Confluent's registry writes them (AVRO without schemaType, a JSON schema with
    references, a DELETE_SUBJECT, a tombstone, a NOOP, and a key of a kind we do not know)."""
    state = RegistryState()
    state.apply(rec.noop_key(), None)
    state.apply(b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":1}',
                b'{"subject":"a","version":1,"id":7,"schema":"\\"string\\"","deleted":false}')
    state.apply(b'{"keytype":"SCHEMA","subject":"a","version":2,"magic":1}',
                b'{"subject":"a","version":2,"id":9,"schemaType":"JSON","schema":"{}",'
                b'"references":[{"name":"r","subject":"b","version":1}],"deleted":false}')
    state.apply(b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"full"}')
    state.apply(b'{"keytype":"KEK","name":"x","magic":0}', b'{}')
    state.apply(b'not json', b'{}')
    assert [sv.id for sv in state.subject_versions("a")] == [7, 9]
    assert state.subject_versions("a")[1].references[0].subject == "b"
    assert state.configs == {None: "FULL"}
    state.apply(rec.delete_subject_key("a"), rec.delete_subject_value("a", 1))
    assert [sv.version for sv in state.subject_versions("a")] == [2]
    state.apply(rec.schema_key("a", 1), None)
    assert 7 not in state.by_id and state.max_id == 9
    assert state.subjects_of_id(9) == [("a", 2)]


def test_writes_queued_together_share_one_batch_and_a_cancelled_caller_leaves_the_rest_written(broker):
    import asyncio
    import uuid

    from odradek.schema_registry.schemas_topic import SchemasTopic

    async def scenario():
        store = SchemasTopic({"bootstrap_servers": broker.bootstrap_servers}, f"_schemas-{uuid.uuid4().hex[:8]}", 30)
        await store.start()
        try:
            keys = [rec.config_key(f"s{i}") for i in range(5)]
            writers = [asyncio.ensure_future(store.write(key, rec.config_value("FULL"))) for key in keys]
            await asyncio.sleep(0)  # every write queued before the first batch goes out
            writers[2].cancel()  # its caller gave up; the record and the others' answers stand
            results = await asyncio.gather(*writers, return_exceptions=True)
            assert isinstance(results[2], asyncio.CancelledError)
            assert [r for i, r in enumerate(results) if i != 2] == [None] * 4
            assert store.state.configs == {f"s{i}": "FULL" for i in range(5)}
            await store.write(rec.config_key(None), rec.config_value("NONE"))  # the writer still writes
            assert store.state.configs[None] == "NONE" and store.position == 6
        finally:
            await store.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
