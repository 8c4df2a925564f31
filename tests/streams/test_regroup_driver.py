"""KTable.group_by on the table of an aggregation (Kafka's TopArticlesExample pattern), in the
TopologyTestDriver: clicks counted per page, the counts re-grouped by their parity, summed with an
adder and a subtractor and counted, through the repartition topic named as Kafka names it. As a
page's count grows it moves between the groups (and out of them, past a filter); after every batch
the groups' latest values are checked against a replay of the same clicks in the test."""

from __future__ import annotations

from collections import Counter

import pytest

from odradek.streams import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
)

pytestmark = pytest.mark.timeout(400)

S, L = Serdes.String(), Serdes.Long()
CAP = 5  # pages clicked more than CAP times leave the groups (a filter on the counts' table)


def topology():
    # Defined here, not at module level: Spark's workers unpickle it, and cannot import this module.
    def parity(count: int) -> str:
        return "odd" if count % 2 else "even"

    builder = StreamsBuilder()
    counts = (
        builder.stream("clicks", Consumed(S, S)).group_by_key().count(Materialized.as_("clicks-per-page"))
    )
    by_parity = counts.filter(lambda page, n: n <= CAP).group_by(
        lambda page, n: (parity(n), n), Grouped.with_(S, L)
    )
    sums = by_parity.reduce(lambda a, b: a + b, lambda a, b: a - b, Materialized.as_("clicks-by-parity"))
    sums.to_stream().to("parity-clicks", Produced(key_serde=S, value_serde=L))
    return builder.build()


def test_regrouped_counts_follow_keys_between_groups(spark):
    topo = topology()
    assert topo.repartition_topics() == ["clicks-by-parity-repartition"]
    assert "KTABLE-SELECT-" in str(topo.describe())
    config = {"application.id": "regroup-agg", "default.key.serde": S, "default.value.serde": S}
    batches = [  # /b moves from odd to even, /a out past CAP, /c stays, /d arrives
        ["/a", "/b", "/a", "/c", "/a"],
        ["/a", "/b", "/d", "/a", "/a"],
    ]
    driver = TopologyTestDriver(topo, config, spark=spark)
    try:
        clicks = driver.create_input_topic("clicks", S, S)
        out = driver.create_output_topic("parity-clicks", S, L)
        totals: Counter[str] = Counter()
        latest: dict[str, int] = {}
        seen: set[str] = set()
        for batch in batches:
            clicks.pipe_key_value_list([(page, "click") for page in batch])
            totals.update(batch)
            # Independent: each group's sum of the counts now in it (a group once seen stays, at 0).
            model: Counter[str] = Counter()
            for n in totals.values():
                if n <= CAP:
                    model["odd" if n % 2 else "even"] += n
            seen |= set(model)
            latest.update(out.read_key_values_to_map())
            assert latest == {group: model[group] for group in seen}, batch
        assert totals["/a"] > CAP  # /a left the groups: its last count was subtracted
    finally:
        driver.close()
