"""The dynamic levels of a broker's configuration without a broker: precedence, sources,
read-only flags, what may be altered and what is kept in the metadata store."""

from __future__ import annotations

import json

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.config_entries import (
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.cluster.metadata_image import BrokerInfo
from odradek.cluster.store import DEFAULT_BROKER_ENTITY, METADATA_FILE, LocalMetadataStore
from odradek.config_def import ConfigSource
from odradek.protocol import errors


def test_per_broker_over_cluster_default_over_static():
    static = BrokerConfig({"message.max.bytes": "1000", "log.retention.hours": "24"})
    cfg = static.with_dynamic(
        {"message.max.bytes": "2000", "log.retention.ms": "60000"}, {"message.max.bytes": "3000"}
    )
    assert (
        cfg.get("message.max.bytes") == 3000
        and cfg.source("message.max.bytes") == ConfigSource.DYNAMIC_BROKER_CONFIG
    )
    assert (
        cfg.log_retention_ms == 60000
        and cfg.source("log.retention.ms") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    assert cfg.source("log.retention.hours") == ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.static is static and cfg.static.get("message.max.bytes") == 1000

    entries = {e.name: e for e in broker_config_entries(cfg)}
    assert [(s.value, s.source) for s in entries["message.max.bytes"].synonyms] == [
        ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("1000", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    assert not entries["message.max.bytes"].read_only and entries["log.dirs"].read_only
    assert entries["log.retention.hours"].read_only  # only the first synonym is dynamic, as in Kafka

    topic = {e.name: e for e in topic_config_entries({}, cfg)}
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].source) == (
        "3000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert [(e.name, e.value) for e in default_broker_config_entries(cfg)] == [
        ("log.retention.ms", "60000"),
        ("message.max.bytes", "2000"),
    ]


@pytest.fixture
def dynamic(tmp_path):
    store = LocalMetadataStore(tmp_path, "c", BrokerInfo(0, "h", 1))
    return DynamicBrokerConfig(BrokerConfig({"num.io.threads": "8"}), 0, store)


def test_alter_checks_keys_values_and_thread_counts(dynamic):
    with pytest.raises(errors.InvalidRequestError, match="Cannot update these configs dynamically: log.dirs"):
        dynamic.alter("0", {"log.dirs": "/x"})
    with pytest.raises(errors.InvalidRequestError, match="Unknown broker configs: no.such.key"):
        dynamic.alter("0", {"no.such.key": "1"})
    with pytest.raises(errors.InvalidRequestError, match="log.retention.ms"):
        dynamic.alter("0", {"log.retention.ms": "soon"})
    with pytest.raises(errors.InvalidRequestError, match="double the current value 8"):
        dynamic.alter(DEFAULT_BROKER_ENTITY, {"num.io.threads": "17"})
    with pytest.raises(errors.InvalidRequestError, match="expected 0, but received 3"):
        dynamic.entity("3")
    assert dynamic.entity("") == DEFAULT_BROKER_ENTITY
    dynamic.alter("0", {"num.io.threads": "16"}, validate_only=True)
    assert dynamic.configs_of("0") == {} and dynamic.current.get("num.io.threads") == 8


def test_changes_are_stored_heard_and_reloaded(dynamic, tmp_path):
    heard = []
    dynamic.on_change(
        lambda old, new: heard.append((old.get("message.max.bytes"), new.get("message.max.bytes")))
    )
    dynamic.alter(DEFAULT_BROKER_ENTITY, {"message.max.bytes": "5000"})
    dynamic.alter("0", {"message.max.bytes": "6000"})
    assert heard == [(1048588, 5000), (5000, 6000)]
    data = json.loads((tmp_path / METADATA_FILE).read_text())
    assert data["broker_configs"] == {
        "<default>": {"message.max.bytes": "5000"},
        "0": {"message.max.bytes": "6000"},
    }

    # A key stored by another version that no longer checks is dropped with an error, not fatal.
    data["broker_configs"]["0"]["log.dirs"] = "/x"
    (tmp_path / METADATA_FILE).write_text(json.dumps(data))
    store = LocalMetadataStore(tmp_path, "c", BrokerInfo(0, "h", 1))
    again = DynamicBrokerConfig(BrokerConfig({}), 0, store)
    assert again.current.get("message.max.bytes") == 6000 and again.current.get("log.dirs") is None
    assert again.configs_of("0") == {"message.max.bytes": "6000"}  # so incremental changes still work
    again.alter("0", {})
    assert again.current.get("message.max.bytes") == 5000
