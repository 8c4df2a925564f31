"""The DSL's joins and table re-grouping: the nodes they add to the graph, named as Kafka Streams
names them (``KStreamImpl``, ``KStreamImplJoin``, ``KTableImpl``, ``KGroupedTableImpl``), so
``describe()`` prints what Kafka prints. ``dsl.py`` hands its calls here; ``compile_joins.py``
and ``table_grouping.py`` turn the nodes into Spark.

- KStream–KStream (``join``, ``left_join``, ``outer_join`` with ``JoinWindows``): two
  ``KSTREAM-WINDOWED-`` nodes, ``KSTREAM-JOINTHIS-``/``KSTREAM-JOINOTHER-`` (``OUTERTHIS``/
  ``OUTEROTHER`` on a side whose partner may be missing), each reading the other's window store,
  and a ``KSTREAM-MERGE-`` node (op ``stream_join``) that carries the join.
- KStream–KTable: one ``KSTREAM-JOIN-``/``KSTREAM-LEFTJOIN-`` node reading the table's store.
- KTable–KTable: ``KTABLE-JOINTHIS-``/``KTABLE-JOINOTHER-`` and a ``KTABLE-MERGE-`` (op
  ``table_join``).
- ``KTable.group_by``: ``KTABLE-SELECT-`` (op ``table_select``), the repartition topic
  ``<store>-repartition`` and ``KTABLE-AGGREGATE-``/``KTABLE-REDUCE-`` (op ``table_aggregate``).

A stream whose key changed is repartitioned before a join, through ``<node>-repartition``, as
Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.streams.dsl_options import Grouped, Joined, JoinWindows, Materialized, Named, StreamJoined
from odradek.streams.topology import Node, Store, TopologyException

# dsl.py imports this module, so its classes (KStream, KTable, StreamsBuilder) are not imported
# here: they arrive as the objects' own types.
KStream = KTable = StreamsBuilder = Any

# Ops the compiler builds in the flow (their inputs read by compile_joins, not through parents).
JOIN_OPS = {"stream_join", "stream_table_join", "table_join", "table_select"}
TABLE_AGGREGATES = {"table_aggregate"}
_HOW = ("inner", "left", "outer")


def _join_store(builder: StreamsBuilder, name: str) -> str:
    """A join's window store (Spark keeps the state: no changelog topic is written)."""
    builder._stores[name] = Store(name, logged=False)
    return name


def _co_partitioned(stream: KStream) -> Node:
    """The stream's node, behind a repartition topic when its key changed (Kafka's repartitionForJoin)."""
    if not stream._key_changed:
        return stream._node
    return stream._builder._repartition(stream._node, f"{stream._node.name}-repartition", None)


def stream_stream_join(
    this: KStream,
    other: KStream,
    joiner: Callable,
    with_key: bool,
    windows: JoinWindows,
    stream_joined: StreamJoined | None,
    how: str,
) -> KStream:
    if not isinstance(windows, JoinWindows):
        raise TopologyException(
            "a KStream-KStream join needs JoinWindows (JoinWindows.of_time_difference_with_no_grace(ms) "
            "or of_time_difference_and_grace(ms, ms))"
        )
    builder = this._builder
    stream_joined = stream_joined or StreamJoined()
    left, right = _co_partitioned(this), _co_partitioned(other)
    this_windowed = builder._new_name("KSTREAM-WINDOWED-")
    other_windowed = builder._new_name("KSTREAM-WINDOWED-")
    outer_this, outer_other = how == "outer", how in ("left", "outer")
    this_name = builder._new_name("KSTREAM-OUTERTHIS-" if outer_this else "KSTREAM-JOINTHIS-")
    other_name = builder._new_name("KSTREAM-OUTEROTHER-" if outer_other else "KSTREAM-JOINOTHER-")
    this_store = _join_store(builder, f"{this_name}-store")
    other_store = _join_store(builder, f"{other_name}-store")
    shared = []
    if how != "inner":  # Kafka >= 3.1 buffers records without a partner until their window closes
        shared = [_join_store(builder, f"KSTREAM-OUTERSHARED-{this_name[-10:]}-store")]
    merge_name = builder._new_name("KSTREAM-MERGE-")
    if stream_joined.name:  # Kafka's StreamJoined.with_name: named processors, indices still taken
        base = stream_joined.name
        this_windowed, other_windowed = f"{base}-this-windowed", f"{base}-other-windowed"
        this_join = f"{base}-outer-this-join" if outer_this else f"{base}-this-join"
        other_join = f"{base}-outer-other-join" if outer_other else f"{base}-other-join"
        merge_name = f"{base}-merge"
    else:
        this_join, other_join = this_name, other_name
    windowed_this = builder._add(this_windowed, "processor", "join_part", [left])
    windowed_this.stores = [this_store]
    windowed_other = builder._add(other_windowed, "processor", "join_part", [right])
    windowed_other.stores = [other_store]
    join_this = builder._add(this_join, "processor", "join_part", [windowed_this])
    join_this.stores = sorted([other_store, *shared])
    join_other = builder._add(other_join, "processor", "join_part", [windowed_other])
    join_other.stores = sorted([this_store, *shared])
    merge = builder._add(
        merge_name,
        "processor",
        "stream_join",
        [join_this, join_other],
        left=left,
        right=right,
        joiner=joiner,
        with_key=with_key,
        how=how,
        windows=windows,
        key_serde=stream_joined.key_serde,
        value_serde=stream_joined.value_serde,
        other_value_serde=stream_joined.other_value_serde,
    )
    return type(this)(builder, merge, key_changed=False)


def stream_table_join(
    this: KStream, table: KTable, joiner: Callable, with_key: bool, joined: Joined | None, how: str
) -> KStream:
    if how == "outer":
        raise TopologyException("a KStream-KTable join is join or left_join (Kafka has no outer one)")
    builder = this._builder
    joined = joined or Joined()
    stream_node = _co_partitioned(this)
    name = joined.name or builder._new_name("KSTREAM-LEFTJOIN-" if how == "left" else "KSTREAM-JOIN-")
    node = builder._add(
        name,
        "processor",
        "stream_table_join",
        [stream_node],
        table=table._node,
        joiner=joiner,
        with_key=with_key,
        how=how,
        key_serde=joined.key_serde,
        value_serde=joined.value_serde,
        other_value_serde=joined.other_value_serde,
    )
    node.stores = table_stores(table._node)
    return type(this)(builder, node, key_changed=False)


def table_stores(node: Node) -> list[str]:
    """The state stores a lookup into this table reads (its own, else its parents')."""
    if node.stores:
        return list(node.stores)
    if node.op == "table_join":
        return sorted({s for side in (node.args["left"], node.args["right"]) for s in table_stores(side)})
    return sorted({s for parent in node.parents for s in table_stores(parent)})


def table_table_join(
    this: KTable,
    other: KTable,
    joiner: Callable,
    with_key: bool,
    base: str | None,
    materialized: Materialized | None,
    how: str,
) -> KTable:
    if materialized is not None:
        raise TopologyException(
            "a materialized KTable-KTable join result is not supported yet: drop Materialized "
            "(the joined changelog still reaches to_stream() and its sinks)"
        )
    builder = this._builder
    merge_name = base or builder._new_name("KTABLE-MERGE-")
    this_name = f"{base}-join-this" if base else builder._new_name("KTABLE-JOINTHIS-")
    other_name = f"{base}-join-other" if base else builder._new_name("KTABLE-JOINOTHER-")
    join_this = builder._add(this_name, "processor", "join_part", [this._node])
    join_this.stores = table_stores(other._node)
    join_other = builder._add(other_name, "processor", "join_part", [other._node])
    join_other.stores = table_stores(this._node)
    merge = builder._add(
        merge_name,
        "processor",
        "table_join",
        [join_this, join_other],
        left=this._node,
        right=other._node,
        joiner=joiner,
        with_key=with_key,
        how=how,
    )
    return type(this)(builder, merge)


class KGroupedTable:
    """``KTable.group_by``'s result: ``count``, ``reduce(adder, subtractor)``,
    ``aggregate(initializer, adder, subtractor)``. A changed table row leaves its old group (the
    subtractor) and joins its new one (the adder), as Kafka's KTableAggregate does."""

    def __init__(self, builder: StreamsBuilder, select: Node, grouped: Grouped, table_class: type):
        self._builder = builder
        self._select = select
        self._grouped = grouped
        self._table_class = table_class

    def _aggregate(self, prefix: str, kind: str, named, materialized: Materialized | None, **fns) -> KTable:
        builder = self._builder
        if isinstance(named, Materialized):  # count(Materialized.as_(...)), Kafka's overload
            named, materialized = None, named
        store = builder._store(materialized, prefix)
        base = named.name if isinstance(named, Named) else named
        topic = f"{self._grouped.name or store.name}-repartition"
        sink = builder._add(
            f"{base}-sink" if base else builder._new_name("KSTREAM-SINK-"),
            "sink",
            "repartition_sink",
            [self._select],
            repartition=True,
        )
        sink.topics = [topic]
        source = builder._add(
            f"{base}-source" if base else builder._new_name("KSTREAM-SOURCE-"),
            "source",
            "repartition_source",
            [],
            repartition=True,
            upstream=sink,
            key_serde=self._grouped.key_serde,
            value_serde=self._grouped.value_serde,
            change=True,
        )
        source.topics = [topic]
        materialized = materialized or Materialized()
        node = builder._add(
            base or builder._new_name(prefix),
            "processor",
            "table_aggregate",
            [source],
            store=store.name,
            aggregation=kind,
            key_serde=materialized.key_serde or self._grouped.key_serde,
            value_serde=materialized.value_serde,
            **fns,
        )
        node.stores = [store.name]
        return self._table_class(builder, node)

    def count(self, named=None, materialized: Materialized | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", "count", named, materialized)

    def reduce(self, adder: Callable, subtractor: Callable, named=None, materialized=None) -> KTable:
        return self._aggregate(
            "KTABLE-REDUCE-", "reduce", named, materialized, adder=adder, subtractor=subtractor
        )

    def aggregate(
        self, initializer: Callable, adder: Callable, subtractor: Callable, named=None, materialized=None
    ) -> KTable:
        return self._aggregate(
            "KTABLE-AGGREGATE-",
            "aggregate",
            named,
            materialized,
            initializer=initializer,
            adder=adder,
            subtractor=subtractor,
        )


def table_group_by(
    table: KTable, selector: Callable, grouped: Grouped | None, table_class: type
) -> KGroupedTable:
    builder = table._builder
    grouped = grouped or Grouped()
    name = grouped.name or builder._new_name("KTABLE-SELECT-")
    select = builder._add(name, "processor", "table_select", [table._node], table=table._node, fn=selector)
    return KGroupedTable(builder, select, grouped, table_class)
