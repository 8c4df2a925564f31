"""Kafka Streams' DSL: ``StreamsBuilder``, ``KStream``, ``KTable`` and the grouped streams.

Every call adds nodes to the builder's graph (``topology.Node``) named as Kafka Streams names
them (a shared counter: ``KSTREAM-SOURCE-0000000000``, ``KSTREAM-MAPVALUES-0000000001``, …), so
``describe()`` reads like Kafka's. Nothing runs here: ``compiler.py`` turns the graph into Spark.

User functions take what Kafka's take: ``map_values(lambda v: …)`` or, with two parameters,
``lambda k, v: …`` (Kafka's ValueMapperWithKey); ``map`` and ``flat_map`` return ``(key, value)``
pairs (a ``KeyValue`` is such a pair).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from odradek.streams import dsl_joins
from odradek.streams.dsl_options import (
    Branched,
    Consumed,
    Grouped,
    Materialized,
    Named,
    Produced,
    Repartitioned,
)
from odradek.streams.dsl_windowed import TimeWindowedKStream, suppress, windowed_by
from odradek.streams.topology import Node, Store, Topology, TopologyException


def KeyValue(key, value) -> tuple:  # noqa: N802 - Kafka's name
    """Kafka's ``KeyValue.pair``: a (key, value) tuple."""
    return (key, value)


def arity(fn: Callable) -> int:
    """How many positional arguments ``fn`` takes (1 for callables Python cannot inspect)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(
        1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    )


class StreamsBuilder:
    """Builds a topology: ``stream``, ``table``, then ``build()``."""

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._stores: dict[str, Store] = {}
        self._index = 0

    # -- naming, as InternalStreamsBuilder does ------------------------------------------
    def _next(self) -> int:
        index = self._index
        self._index += 1
        return index

    def _new_name(self, prefix: str) -> str:
        return f"{prefix}{self._next():010d}"

    def _store(self, materialized: Materialized | None, prefix: str) -> Store:
        name = materialized.store_name if materialized and materialized.store_name else None
        if name is None:
            name = f"{prefix}STATE-STORE-{self._next():010d}"
        if name in self._stores:
            raise TopologyException(
                f"a state store named {name!r} already exists: give each Materialized.as_ its own name"
            )
        store = Store(name, logged=materialized.logging_enabled if materialized else True)
        self._stores[name] = store
        return store

    def _add(self, name: str, kind: str, op: str, parents: list[Node], **args: Any) -> Node:
        node = Node(name, kind, op, parents=list(parents), args=args)
        for parent in parents:
            parent.children.append(node)
        self._nodes.append(node)
        return node

    # -- entry points -----------------------------------------------------------------
    def stream(self, topics: str | list[str], consumed: Consumed | None = None) -> KStream:
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list:
            raise TopologyException("stream() needs at least one topic")
        consumed = consumed or Consumed()
        name = consumed.name or self._new_name("KSTREAM-SOURCE-")
        node = self._add(
            name,
            "source",
            "source",
            [],
            key_serde=consumed.key_serde,
            value_serde=consumed.value_serde,
            timestamp_extractor=consumed.timestamp_extractor,
        )
        node.topics = topic_list
        return KStream(self, node, key_changed=False)

    def table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None
    ) -> KTable:
        consumed = consumed or Consumed()
        store = self._store(materialized, f"{topic}-")
        source = self._add(
            self._new_name("KSTREAM-SOURCE-"),
            "source",
            "source",
            [],
            key_serde=consumed.key_serde,
            value_serde=consumed.value_serde,
            timestamp_extractor=consumed.timestamp_extractor,
        )
        source.topics = [topic]
        node = self._add(self._new_name("KTABLE-SOURCE-"), "processor", "latest", [source], store=store.name)
        node.stores = [store.name]
        return KTable(self, node)

    def _repartition(self, parent: Node, topic: str, options) -> Node:
        """Kafka's repartition: a filter dropping null keys, a sink to ``topic`` and a source
        reading it back (named in Kafka's order: sink, filter, source). Spark's shuffle does
        the moving; the nodes keep the graph and describe() as Kafka's."""
        sink_name = self._new_name("KSTREAM-SINK-")
        filter_name = self._new_name("KSTREAM-FILTER-")
        source_name = self._new_name("KSTREAM-SOURCE-")
        drop_null_keys = self._add(filter_name, "processor", "drop_null_keys", [parent])
        sink = self._add(sink_name, "sink", "repartition_sink", [drop_null_keys], repartition=True)
        sink.topics = [topic]
        source = self._add(
            source_name,
            "source",
            "repartition_source",
            [],
            repartition=True,
            upstream=sink,
            key_serde=getattr(options, "key_serde", None),
            value_serde=getattr(options, "value_serde", None),
            partitions=getattr(options, "number_of_partitions", None),
        )
        source.topics = [topic]
        return source

    def build(self) -> Topology:
        if not self._nodes:
            raise TopologyException("the topology is empty: add a stream() or table() before build()")
        return Topology(list(self._nodes), dict(self._stores))


class KStream:
    """A record stream: each record is an independent event."""

    def __init__(self, builder: StreamsBuilder, node: Node, *, key_changed: bool):
        self._builder = builder
        self._node = node
        self._key_changed = key_changed

    def _then(
        self, prefix: str, op: str, named: Named | str | None = None, *, key_changed=None, **args
    ) -> KStream:
        name = _name_of(named) or self._builder._new_name(prefix)
        node = self._builder._add(name, "processor", op, [self._node], **args)
        return KStream(
            self._builder, node, key_changed=self._key_changed if key_changed is None else key_changed
        )

    # -- stateless ----------------------------------------------------------------------
    def filter(self, predicate: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-FILTER-", "filter", named, fn=predicate)

    def filter_not(self, predicate: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-FILTER-", "filter_not", named, fn=predicate)

    def map(self, mapper: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-MAP-", "map", named, key_changed=True, fn=mapper)

    def map_values(self, mapper: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-MAPVALUES-", "map_values", named, fn=mapper, with_key=arity(mapper) >= 2)

    def flat_map(self, mapper: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-FLATMAP-", "flat_map", named, key_changed=True, fn=mapper)

    def flat_map_values(self, mapper: Callable, named: Named | str | None = None) -> KStream:
        return self._then(
            "KSTREAM-FLATMAPVALUES-", "flat_map_values", named, fn=mapper, with_key=arity(mapper) >= 2
        )

    def select_key(self, mapper: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-KEY-SELECT-", "select_key", named, key_changed=True, fn=mapper)

    def peek(self, action: Callable, named: Named | str | None = None) -> KStream:
        return self._then("KSTREAM-PEEK-", "peek", named, fn=action)

    def foreach(self, action: Callable, named: Named | str | None = None) -> None:
        self._then("KSTREAM-FOREACH-", "foreach", named, fn=action)

    def merge(self, other: KStream, named: Named | str | None = None) -> KStream:
        name = _name_of(named) or self._builder._new_name("KSTREAM-MERGE-")
        node = self._builder._add(name, "processor", "merge", [self._node, other._node])
        return KStream(self._builder, node, key_changed=self._key_changed or other._key_changed)

    def split(self, named: Named | str | None = None) -> BranchedKStream:
        name = _name_of(named) or self._builder._new_name("KSTREAM-BRANCH-")
        node = self._builder._add(name, "processor", "split", [self._node], predicates=[])
        return BranchedKStream(self, node)

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        repartitioned = repartitioned or Repartitioned()
        base = repartitioned.name or self._builder._new_name("KSTREAM-REPARTITION-")
        through = self._builder._repartition(self._node, f"{base}-repartition", repartitioned)
        return KStream(self._builder, through, key_changed=False)

    def to(self, topic: str | Callable, produced: Produced | None = None) -> None:
        produced = produced or Produced()
        name = produced.name or self._builder._new_name("KSTREAM-SINK-")
        node = self._builder._add(
            name,
            "sink",
            "sink",
            [self._node],
            key_serde=produced.key_serde,
            value_serde=produced.value_serde,
            chooser=None if isinstance(topic, str) else topic,
        )
        node.topics = [topic] if isinstance(topic, str) else []

    def to_table(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        store = self._builder._store(materialized, "KSTREAM-TOTABLE-")
        name = _name_of(named) or self._builder._new_name("KSTREAM-TOTABLE-")
        node = self._builder._add(name, "processor", "latest", [self._node], store=store.name)
        node.stores = [store.name]
        return KTable(self._builder, node)

    # -- grouping -----------------------------------------------------------------------
    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        return KGroupedStream(self._builder, self._node, grouped or Grouped(), self._key_changed)

    def group_by(self, selector: Callable, grouped: Grouped | None = None) -> KGroupedStream:
        keyed = self.select_key(selector)
        return KGroupedStream(self._builder, keyed._node, grouped or Grouped(), True)

    # -- joins (dsl_joins.py) ----------------------------------------------------------------
    def _join(self, how: str, other, joiner: Callable, windows_or_joined=None, options=None) -> KStream:
        with_key = arity(joiner) >= 3  # Kafka's ValueJoinerWithKey
        if isinstance(other, KStream):
            return dsl_joins.stream_stream_join(
                self, other, joiner, with_key, windows_or_joined, options, how
            )
        if isinstance(other, KTable):
            return dsl_joins.stream_table_join(
                self, other, joiner, with_key, windows_or_joined or options, how
            )
        raise TopologyException(f"a KStream joins a KStream or a KTable, not a {type(other).__name__}")

    def join(self, other, joiner: Callable, windows_or_joined=None, stream_joined=None) -> KStream:
        """With a KStream: ``join(other, joiner, JoinWindows…, StreamJoined…)``; with a KTable:
        ``join(table, joiner, Joined…)``."""
        return self._join("inner", other, joiner, windows_or_joined, stream_joined)

    def left_join(self, other, joiner: Callable, windows_or_joined=None, stream_joined=None) -> KStream:
        return self._join("left", other, joiner, windows_or_joined, stream_joined)

    def outer_join(self, other, joiner: Callable, windows=None, stream_joined=None) -> KStream:
        return self._join("outer", other, joiner, windows, stream_joined)


class BranchedKStream:
    """``split()``'s result: ``branch(predicate, Branched.as_(name))`` … then
    ``default_branch()`` or ``no_default_branch()``, which return ``{name: KStream}``."""

    def __init__(self, stream: KStream, node: Node):
        self._stream = stream
        self._node = node
        self._branches: dict[str, KStream] = {}

    def _child(self, predicate_index: int | None, branched: Branched | None) -> None:
        branched = branched or Branched()
        suffix = branched.name or str(len(self._branches) + 1 if predicate_index is not None else 0)
        name = f"{self._node.name}{suffix}"
        builder = self._stream._builder
        child = builder._add(name, "processor", "branch", [self._node], index=predicate_index)
        branch = KStream(builder, child, key_changed=self._stream._key_changed)
        if branched.function is not None:
            result = branched.function(branch)
            if result is not None:
                self._branches[name] = result
            return
        if branched.consumer is not None:
            branched.consumer(branch)
            return
        self._branches[name] = branch

    def branch(self, predicate: Callable, branched: Branched | None = None) -> BranchedKStream:
        self._node.args["predicates"].append(predicate)
        self._child(len(self._node.args["predicates"]) - 1, branched)
        return self

    def default_branch(self, branched: Branched | None = None) -> dict[str, KStream]:
        self._child(None, branched)
        return dict(self._branches)

    def no_default_branch(self) -> dict[str, KStream]:
        return dict(self._branches)


class KGroupedStream:
    """A stream grouped by key, ready to aggregate into a KTable."""

    def __init__(self, builder: StreamsBuilder, node: Node, grouped: Grouped, repartition: bool):
        self._builder = builder
        self._node = node
        self._grouped = grouped
        self._repartition_needed = repartition

    def _aggregate(self, prefix: str, op: str, materialized: Materialized | None, named, **args) -> KTable:
        builder = self._builder
        store = builder._store(materialized, prefix)
        name = _name_of(named) or builder._new_name(prefix)
        parent = self._node
        if self._repartition_needed:
            topic = f"{self._grouped.name or store.name}-repartition"
            parent = builder._repartition(parent, topic, self._grouped)
        materialized = materialized or Materialized()
        node = builder._add(
            name,
            "processor",
            op,
            [parent],
            store=store.name,
            key_serde=materialized.key_serde or self._grouped.key_serde,
            value_serde=materialized.value_serde,
            input_key_serde=self._grouped.key_serde,
            input_value_serde=self._grouped.value_serde,
            **args,
        )
        node.stores = [store.name]
        return KTable(builder, node)

    def count(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        if isinstance(named, Materialized):  # count(Materialized.as_(...)), Kafka's overload
            named, materialized = None, named
        return self._aggregate("KSTREAM-AGGREGATE-", "count", materialized, named)

    def reduce(self, reducer: Callable, named=None, materialized: Materialized | None = None) -> KTable:
        if isinstance(named, Materialized):
            named, materialized = None, named
        return self._aggregate("KSTREAM-REDUCE-", "reduce", materialized, named, reducer=reducer)

    def aggregate(
        self,
        initializer: Callable,
        aggregator: Callable,
        named=None,
        materialized: Materialized | None = None,
    ) -> KTable:
        if isinstance(named, Materialized):
            named, materialized = None, named
        return self._aggregate(
            "KSTREAM-AGGREGATE-",
            "aggregate",
            materialized,
            named,
            initializer=initializer,
            aggregator=aggregator,
        )

    def windowed_by(self, windows) -> TimeWindowedKStream:
        """Windows for the aggregation that follows (dsl_windowed.py)."""
        return windowed_by(self, windows)


class KTable:
    """A changelog: the latest value per key; a None value (tombstone) deletes the key."""

    def __init__(self, builder: StreamsBuilder, node: Node):
        self._builder = builder
        self._node = node

    def _then(self, prefix: str, op: str, named, **args) -> KTable:
        name = _name_of(named) or self._builder._new_name(prefix)
        node = self._builder._add(name, "processor", op, [self._node], **args)
        return KTable(self._builder, node)

    def queryable_store_name(self) -> str | None:
        return self._node.args.get("store")

    def filter(self, predicate: Callable, named: Named | str | None = None) -> KTable:
        return self._then("KTABLE-FILTER-", "table_filter", named, fn=predicate)

    def filter_not(self, predicate: Callable, named: Named | str | None = None) -> KTable:
        return self._then("KTABLE-FILTER-", "table_filter_not", named, fn=predicate)

    def map_values(self, mapper: Callable, named: Named | str | None = None) -> KTable:
        return self._then(
            "KTABLE-MAPVALUES-", "table_map_values", named, fn=mapper, with_key=arity(mapper) >= 2
        )

    def to_stream(self, named: Named | str | None = None) -> KStream:
        name = _name_of(named) or self._builder._new_name("KTABLE-TOSTREAM-")
        node = self._builder._add(name, "processor", "to_stream", [self._node])
        return KStream(self._builder, node, key_changed=False)

    def suppress(self, suppressed, named: Named | str | None = None) -> KTable:
        return suppress(self, suppressed, named)

    def group_by(self, selector: Callable, grouped: Grouped | None = None) -> dsl_joins.KGroupedTable:
        """``selector(key, value)`` returns the row's ``(new_key, new_value)`` pair."""
        return dsl_joins.table_group_by(self, selector, grouped, KTable)

    def _join(self, how: str, other: KTable, joiner: Callable, named, materialized) -> KTable:
        if not isinstance(other, KTable):
            raise TopologyException(
                "a KTable joins another KTable (a KStream joins a KTable, not the reverse)"
            )
        if isinstance(named, Materialized):
            named, materialized = None, named
        return dsl_joins.table_table_join(
            self, other, joiner, arity(joiner) >= 3, _name_of(named), materialized, how
        )

    def join(self, other: KTable, joiner: Callable, named=None, materialized=None) -> KTable:
        return self._join("inner", other, joiner, named, materialized)

    def left_join(self, other: KTable, joiner: Callable, named=None, materialized=None) -> KTable:
        return self._join("left", other, joiner, named, materialized)

    def outer_join(self, other: KTable, joiner: Callable, named=None, materialized=None) -> KTable:
        return self._join("outer", other, joiner, named, materialized)


def _name_of(named: Named | str | None) -> str | None:
    if named is None:
        return None
    return named.name if isinstance(named, Named) else str(named)


def _not_yet(what: str) -> TopologyException:
    return TopologyException(
        f"{what} is not supported by odradek.streams yet; "
        "see docs/streams.md for what runs today"
    )
