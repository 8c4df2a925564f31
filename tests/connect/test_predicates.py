"""Predicates, with and without negate, inside a transformation chain."""

import pytest

from odradek.connect.errors import ConfigException
from odradek.connect.records import SourceRecord
from odradek.connect.transforms import PREDICATES, TransformationChain

P = "org.apache.kafka.connect.transforms.predicates."


def predicate(kind, **configs):
    p = PREDICATES[P + kind]()
    p.configure(configs)
    return p


def record(topic="orders", value="v", headers=()):
    r = SourceRecord(topic=topic, value=value)
    for key in headers:
        r.headers.add_string(key, "x")
    return r


def test_predicates_alone():
    matches = predicate("TopicNameMatches", pattern="ord.*")
    assert matches.test(record("orders")) and not matches.test(record("my-orders"))  # the whole name must match
    has = predicate("HasHeaderKey", name="trace")
    assert has.test(record(headers=["trace"])) and not has.test(record(headers=["other"]))
    tombstone = predicate("RecordIsTombstone")
    assert tombstone.test(record(value=None)) and not tombstone.test(record())
    with pytest.raises(ConfigException) as bad:
        predicate("TopicNameMatches", pattern="(")
    assert bad.value.key == "pattern"
    with pytest.raises(ConfigException) as bad:
        predicate("HasHeaderKey")
    assert bad.value.key == "name"


@pytest.mark.parametrize("negate, kept", [("false", ["payments", "audit"]), ("true", ["orders", "orders-eu"])])
def test_filter_with_a_predicate_and_negate(negate, kept):
    chain = TransformationChain.from_config(
        {
            "transforms": "dropOrders",
            "transforms.dropOrders.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.dropOrders.predicate": "isOrders",
            "transforms.dropOrders.negate": negate,
            "predicates": "isOrders",
            "predicates.isOrders.type": P + "TopicNameMatches",
            "predicates.isOrders.pattern": "orders.*",
        }
    )
    topics = ["orders", "payments", "orders-eu", "audit"]
    survivors = [r.topic for r in (chain.apply(record(t)) for t in topics) if r is not None]
    assert survivors == kept


def test_tombstones_skip_a_transform_through_negate():
    chain = TransformationChain.from_config(
        {
            "transforms": "hoist",
            "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
            "transforms.hoist.field": "line",
            "transforms.hoist.predicate": "tomb",
            "transforms.hoist.negate": "true",
            "predicates": "tomb",
            "predicates.tomb.type": P + "RecordIsTombstone",
        }
    )
    assert chain.apply(record(value="x")).value == {"line": "x"}
    assert chain.apply(record(value=None)).value is None
