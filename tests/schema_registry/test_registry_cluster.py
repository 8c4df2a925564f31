"""The registry beside a 3-broker cluster: ``_schemas`` is created with three replicas
(``kafkastore.topic.replication.factor``'s default), so kill -9 of
the broker leading it loses no schema, the registry keeps registering through the new
leader, and an instance started afterwards reads every id back from the topic."""

from __future__ import annotations

import json

import pytest
from registry_support import RegistryProcess

from odradek.testing.embedded_cluster import EmbeddedCluster

SCHEMAS_TOPIC = "_schemas"


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "n", "type": "long"}]})


@pytest.fixture
def cluster(tmp_path):
    overrides = {"min.insync.replicas": 2}  # the brokers' default.replication.factor stays 1
    with EmbeddedCluster(3, overrides=overrides, data_dir=tmp_path / "cluster") as running:
        yield running


def test_ids_survive_killing_the_broker_that_leads_the_schemas_topic(cluster, tmp_path):
    registries = []

    def start_registry() -> RegistryProcess:
        registry = RegistryProcess(
            cluster.bootstrap_servers, tmp_path / f"registry{len(registries)}.log", SCHEMAS_TOPIC
        )
        registries.append(registry)
        return registry.start()

    try:
        first = start_registry()
        registered = {f"before-{i}": schema(f"Before{i}") for i in range(10)}
        ids = {s: first.ok("POST", f"/subjects/{s}/versions", {"schema": text})["id"] for s, text in registered.items()}
        placement = cluster.metadata([SCHEMAS_TOPIC]).topics[SCHEMAS_TOPIC][0]
        assert len(placement.replicas) == 3 and len(placement.isr) == 3, placement

        cluster.kill(placement.leader)
        after = {f"after-{i}": schema(f"After{i}") for i in range(10)}
        for subject, text in after.items():  # each answer comes once its record is on the new leader
            ids[subject] = first.ok("POST", f"/subjects/{subject}/versions", {"schema": text})["id"]
        registered |= after
        moved = cluster.metadata([SCHEMAS_TOPIC]).topics[SCHEMAS_TOPIC][0]
        assert moved.leader not in (-1, placement.leader), moved
        assert sorted(ids.values()) == list(range(1, 21)), "ids dense and distinct across the failover"

        fresh = start_registry()  # reads _schemas from the start, from the surviving replicas
        for instance in (first, fresh):
            for subject, text in registered.items():
                shown = instance.ok("GET", f"/schemas/ids/{ids[subject]}")
                assert json.loads(shown["schema"]) == json.loads(text), (instance.url, subject)
                assert instance.ok("GET", f"/subjects/{subject}/versions/1")["id"] == ids[subject]
    finally:
        for registry in registries:
            registry.stop()
            assert "Traceback" not in registry.log_text(), registry.log_text()[-4000:]
