"""Compiles a ``Topology`` into Spark Structured Streaming plans: one place, read by the runner
(``kafka_streams.py``) and the test driver alike.

Records flow as bytes (``stage.RECORD_SCHEMA``). A ``Flow`` is a DataFrame plus the serdes of its
bytes plus the user functions not yet applied; consecutive functions fuse into one Python stage
that runs where the flow must become bytes again (a sink, a grouping, a merge). Work needing no
user function stays in the JVM: grouping and counting compare key bytes, and a count is
encoded as Kafka's 8-byte long by a Spark expression.

A ``Plan`` has the stateless outputs (one streaming DataFrame of ``topic, key, value`` rows,
appended) and one ``Aggregation`` per state store: a streaming DataFrame of updated
``key, value`` rows (Spark's update mode: the changed keys of each micro-batch, which is the
KTable changelog Kafka emits at each commit) and a function turning each micro-batch of
updates into the rows for its changelog topic and the sinks downstream of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from odradek.streams import compile_joins, table_grouping
from odradek.streams.compile_windows import WindowMetrics, windowed_parts
from odradek.streams.dsl import TopologyException
from odradek.streams.dsl_joins import JOIN_OPS, TABLE_AGGREGATES
from odradek.streams.serdes import LongSerde, Serde
from odradek.streams.stage import RECORD_SCHEMA, PickleSerde, stage_function
from odradek.streams.streams_config import StreamsConfig
from odradek.streams.timestamps import extract_timestamps
from odradek.streams.topology import Node, Topology

OUTPUT_COLUMNS = ("topic", "key", "value")
STATEFUL = {"count", "reduce", "aggregate", "latest", "windowed"} | TABLE_AGGREGATES
_FUSED = {
    "filter",
    "filter_not",
    "map",
    "map_values",
    "flat_map",
    "flat_map_values",
    "select_key",
    "peek",
    "table_filter",
    "table_filter_not",
    "table_map_values",
}


@dataclass
class Flow:
    df: Any  # a DataFrame with RECORD_SCHEMA's columns
    key_serde: Serde
    value_serde: Serde
    ops: list[tuple] = field(default_factory=list)

    def then(self, *op) -> Flow:
        return Flow(self.df, self.key_serde, self.value_serde, [*self.ops, tuple(op)])


_KEEP_KEY = {
    "filter",
    "filter_not",
    "peek",
    "branch",
    "drop_null_keys",
    "map_values",
    "flat_map_values",
    "table_filter",
    "table_filter_not",
    "table_map_values",
    "choose",
    "foreach",
}
_KEEP_VALUE = {
    "filter",
    "filter_not",
    "peek",
    "branch",
    "drop_null_keys",
    "select_key",
    "table_filter",
    "table_filter_not",
    "choose",
    "foreach",
}


def inherited_serdes(flow: Flow) -> tuple[Serde | None, Serde | None]:
    """The serdes still right for ``flow``'s keys and values after its pending functions, as Kafka
    Streams passes a stream's serdes on through operations that keep the type (filter keeps both,
    map_values the key's); None where a function may have changed the type."""
    key = flow.key_serde if all(op[0] in _KEEP_KEY for op in flow.ops) else None
    value = flow.value_serde if all(op[0] in _KEEP_VALUE for op in flow.ops) else None
    return (
        None if isinstance(key, PickleSerde) else key,
        None if isinstance(value, PickleSerde) else value,
    )


@dataclass
class Aggregation:
    node: Node
    updates: Any  # streaming DataFrame: key, value (bytes)
    outputs: Callable[[Any], Any]  # a micro-batch of updates -> DataFrame(topic, key, value)
    _: KW_ONLY  # the rest by name: several features fill different ones
    output_mode: str = "update"  # "append" for a join's records
    has_terminals: bool = True  # False: only its changelog topic reads it
    # The store's name and the serdes of its contents (what KafkaStreams.store() reads back).
    store: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    after: Callable[[], None] = lambda: None  # once the outputs of a micro-batch are written
    metrics: WindowMetrics | None = None  # windowed aggregations: the records dropped as late


@dataclass
class Plan:
    stateless: Any | None
    aggregations: list[Aggregation]


def plan_metrics(plan: Plan | None) -> dict[str, float]:
    """Kafka's client metrics a plan keeps: ``dropped-records-total`` (late records dropped)."""
    aggregations = plan.aggregations if plan is not None else []
    dropped = sum(a.metrics.dropped_records_total for a in aggregations if a.metrics is not None)
    return {"dropped-records-total": float(dropped)}


class Compiler:
    """``Compiler(topology, config, read).plan()``; ``read(topics)`` gives a streaming (or, in
    the test driver, file-backed) DataFrame with ``key, value, timestamp, offset, topic``."""

    def __init__(self, topology: Topology, config: StreamsConfig, read: Callable[[list[str]], Any]):
        self.topology = topology
        self.config = config
        self.read = read

    # -- the plan --------------------------------------------------------------------------
    def plan(self) -> Plan:
        terminals = [n for n in self.topology.nodes if n.op in ("sink", "foreach") or _materialized_sink(n)]
        stateless: list[Any] = []
        memo: dict[int, Flow] = {}
        by_store: dict[int, list[Node]] = {}
        for node in terminals:
            roots = _stateful_ancestors(node)
            if len(roots) > 1:
                raise TopologyException(
                    f"{node.name} is downstream of {len(roots)} state stores "
                    f"({', '.join(r.name for r in roots)}): chained aggregations are not supported yet"
                )
            if roots:
                by_store.setdefault(id(roots[0]), []).append(node)
            else:
                stateless.append(self.output(node, {}, memo))
        aggregations = []
        for node in self.topology.nodes:
            if node.op in STATEFUL:
                if _stateful_ancestors(node, include_self=False):
                    raise TopologyException(
                        f"{node.name}: an aggregation of an aggregation or of a join is not supported yet "
                        "without a repartition between them (.repartition(), or a group_by with a new key)"
                    )
                aggregation = self.aggregation(node, by_store.get(id(node), []))
                aggregation.has_terminals = id(node) in by_store
                aggregations.append(aggregation)
            elif node.op in JOIN_OPS and id(node) in by_store:  # one applyInPandasWithState per query
                aggregations.append(self.join(node, by_store.get(id(node), [])))
        return Plan(_union(stateless), aggregations)

    def join(self, node: Node, terminals: list[Node]) -> Aggregation:
        """A join as a query of its own, appending its records to its terminals' topics."""
        df, key_serde, value_serde = compile_joins.join_flow(self, node, {}, {})

        def outputs(batch):
            memo: dict[int, Flow] = {}
            roots = {id(node): Flow(batch, key_serde, value_serde)}
            return _union([self.output(t, roots, memo) for t in terminals])

        return Aggregation(node, df, outputs, output_mode="append", has_terminals=bool(terminals))

    def output(self, terminal: Node, roots: dict[int, Flow], memo: dict[int, Flow]):
        """The ``topic, key, value`` rows ``terminal`` (a sink or a foreach) writes."""
        from pyspark.sql import functions as F

        flow = self.flow(terminal.parents[0], roots, memo)
        if terminal.op == "foreach":
            flow = flow.then("foreach", terminal.args["fn"])
            return self.encode(flow, flow.key_serde, flow.value_serde).select(*OUTPUT_COLUMNS)
        chooser = terminal.args.get("chooser")
        if chooser is not None:
            flow = flow.then("choose", chooser)
        kept_key, kept_value = inherited_serdes(flow)
        key_serde = terminal.args.get("key_serde") or kept_key or self.config.key_serde
        value_serde = terminal.args.get("value_serde") or kept_value or self.config.value_serde
        topic_name = terminal.topics[0] if terminal.topics else None
        if terminal.op == "repartition_sink":  # a materialized repartition topic
            key_serde, value_serde = self.repartition_serdes(terminal)
            topic_name = internal_topic(self.config.application_id, topic_name)
        df = self.encode(flow, key_serde, value_serde, force=chooser is not None)
        topic = F.col("topic") if chooser is not None else F.lit(topic_name)
        return df.select(topic.alias("topic"), "key", "value")

    # -- flows -----------------------------------------------------------------------------
    def flow(self, node: Node, roots: dict[int, Flow], memo: dict[int, Flow]) -> Flow:
        if id(node) in roots:
            return roots[id(node)]
        if id(node) not in memo:
            memo[id(node)] = self._flow(node, roots, memo)
        return memo[id(node)]

    def _flow(self, node: Node, roots: dict[int, Flow], memo: dict[int, Flow]) -> Flow:
        op, args = node.op, node.args
        if op == "source":
            df = self.read(node.topics).select("key", "value", "timestamp", "offset", "topic")
            key_serde = args["key_serde"] or self.config.key_serde
            value_serde = args["value_serde"] or self.config.value_serde
            if args.get("timestamp_extractor") is not None:
                run = extract_timestamps(
                    args["timestamp_extractor"], key_serde, value_serde, self.config.continue_on_bad_records
                )
                df = df.mapInArrow(run, RECORD_SCHEMA)
            return Flow(df, key_serde, value_serde)
        if op == "repartition_source" and _materialized(node):
            topic = internal_topic(self.config.application_id, node.topics[0])
            df = self.read([topic]).select("key", "value", "timestamp", "offset", "topic")
            return Flow(df, *self.repartition_serdes(args["upstream"]))
        if op in JOIN_OPS:
            raise TopologyException(
                f"{node.name}: a join's output feeds another join or an aggregation directly, which "
                "Spark cannot run in one query: put a repartition topic between them (.repartition(), "
                "or a group_by that selects a new key)"
            )
        if op == "repartition_source":
            upstream = self.flow(args["upstream"].parents[0], roots, memo)
            kept_key, kept_value = inherited_serdes(upstream)
            key_serde = args["key_serde"] or kept_key or self.config.key_serde
            value_serde = args["value_serde"] or kept_value or self.config.value_serde
            df = self.encode(upstream, key_serde, value_serde)
            if not any(c.op in STATEFUL for c in node.children) or args.get("partitions"):
                partitions = args.get("partitions") or self.config.num_stream_threads
                df = df.repartition(partitions, "key")
            return Flow(df, key_serde, value_serde)
        if op in STATEFUL:
            raise TopologyException(f"{node.name} is a state store and cannot be read here")
        parent = self.flow(node.parents[0], roots, memo)
        if op in _FUSED:
            return parent.then(op, args["fn"], args.get("with_key", False))
        if op == "drop_null_keys":
            return parent.then("drop_null_keys", None)
        if op in ("split", "to_stream"):
            return parent
        if op == "branch":
            return parent.then("branch", node.parents[0].args["predicates"], args["index"])
        if op == "merge":
            flows = [self.flow(p, roots, memo) for p in node.parents]
            if all(
                not f.ops and f.key_serde == flows[0].key_serde and f.value_serde == flows[0].value_serde
                for f in flows
            ):
                return Flow(_union([f.df for f in flows]), flows[0].key_serde, flows[0].value_serde)
            pickled = PickleSerde()
            return Flow(_union([self.encode(f, pickled, pickled) for f in flows]), pickled, pickled)
        raise TopologyException(f"{node.name}: operation {op!r} cannot be compiled")

    def kept_serdes(self, flow: Flow) -> tuple[Serde | None, Serde | None]:
        return inherited_serdes(flow)

    def repartition_serdes(self, sink: Node) -> tuple[Serde, Serde]:
        """The serdes of a materialized repartition topic, alike for its writer and its reader:
        the repartition's own, else those its records keep (when they come from no store)."""
        source = next(n for n in self.topology.nodes if n.args.get("upstream") is sink)
        try:
            kept_key, kept_value = inherited_serdes(self.flow(sink.parents[0], {}, {}))
        except TopologyException:  # downstream of a state store: the defaults
            kept_key, kept_value = None, None
        key = source.args.get("key_serde") or kept_key or self.config.key_serde
        value = source.args.get("value_serde") or kept_value or self.config.value_serde
        return key, table_grouping.ChangeSerde(value) if source.args.get("change") else value

    def encode(self, flow: Flow, key_serde: Serde, value_serde: Serde, *, force: bool = False):
        """``flow``'s records as bytes in these serdes: its pending functions run in one Python stage."""
        if not flow.ops and not force and flow.key_serde == key_serde and flow.value_serde == value_serde:
            return flow.df
        run = stage_function(
            flow.ops,
            flow.key_serde,
            flow.value_serde,
            key_serde,
            value_serde,
            self.config.continue_on_bad_records,
        )
        return flow.df.mapInArrow(run, RECORD_SCHEMA)

    # -- state stores ------------------------------------------------------------------------
    def aggregation(self, node: Node, terminals: list[Node]) -> Aggregation:
        from pyspark.sql import functions as F

        args = node.args
        parent = self.flow(node.parents[0], {}, {})
        kept_key, kept_value = inherited_serdes(parent)
        in_key = args.get("input_key_serde") or kept_key or self.config.key_serde
        in_value = args.get("input_value_serde") or kept_value or self.config.value_serde
        if node.op == "windowed":
            return self._windowed(node, terminals, self.encode(parent, in_key, in_value), in_key, in_value)
        df = self.encode(parent, in_key, in_value).where(F.col("key").isNotNull())
        key_serde = args.get("key_serde") or in_key
        regroupings = table_grouping.regroupings(self.topology, node)  # these need the old values
        with_old = bool(regroupings)
        if node.op == "latest":  # a table: the newest value per key, None deleting it
            updates = df.groupBy("key").agg(F.max_by("value", "offset").alias("value"))
            value_serde = in_value
        elif node.op == "count" and not with_old:
            counts = df.where(F.col("value").isNotNull()).groupBy("key").agg(F.count(F.lit(1)).alias("n"))
            value_serde = LongSerde()
            updates = counts.select("key", value_serde.spark_encode(F.col("n")).alias("value"))
        elif node.op in TABLE_AGGREGATES:
            updates, value_serde = table_grouping.fold(
                df, node, in_key, in_value, self.config.value_serde, with_old=with_old
            )
        else:
            value_serde = LongSerde() if node.op == "count" else args.get("value_serde") or (
                in_value if node.op == "reduce" else self.config.value_serde
            )
            updates = _fold(
                df.where(F.col("value").isNotNull()), node, in_key, in_value, value_serde, with_old=with_old
            )
        store = self.topology.stores[args["store"]]
        changelog = f"{self.config.application_id}-{store.name}-changelog" if store.logged else None

        def outputs(batch):
            rows = batch.select(
                "key",
                "value",
                F.current_timestamp().alias("timestamp"),
                F.lit(0).cast("long").alias("offset"),
                F.lit(None).cast("string").alias("topic"),
            )
            roots = {id(node): Flow(rows, key_serde, value_serde)}
            for select in regroupings:  # KTable.group_by: the changes for its repartition topic
                changes = table_grouping.changes_of_updates(batch, select, key_serde, value_serde)
                roots[id(select)] = Flow(changes, PickleSerde(), PickleSerde())
            memo: dict[int, Flow] = {}
            parts = [self.output(t, roots, memo) for t in terminals]
            if changelog:
                parts.append(rows.select(F.lit(changelog).alias("topic"), "key", "value"))
            return _union(parts)

        return Aggregation(
            node, updates, outputs, store=store.name, key_serde=key_serde, value_serde=value_serde
        )

    def _windowed(self, node: Node, terminals: list[Node], records, in_key: Serde, in_value: Serde):
        """A windowed aggregation (compile_windows.py) and the sinks downstream of its table."""
        parts = windowed_parts(node, self.topology, self.config, records, in_key, in_value)

        def outputs(batch):
            batch, rows = parts.open_batch(batch)
            roots = {ident: Flow(df, parts.key_serde, parts.value_serde) for ident, df in rows.items()}
            memo: dict[int, Flow] = {}
            changelog = parts.changelog_rows(batch)
            return _union(
                [self.output(t, roots, memo) for t in terminals]
                + ([changelog] if changelog is not None else [])
            )

        return Aggregation(
            node,
            parts.updates,
            outputs,
            after=parts.close_batch,
            metrics=parts.metrics,
            store=node.args["store"],  # KafkaStreams.store(): a window or session store
            key_serde=parts.key_serde,
            value_serde=parts.value_serde,
        )


def _fold(df, node: Node, key_serde: Serde, value_serde: Serde, agg_serde: Serde, *, with_old: bool = False):
    """reduce/aggregate (count too, when its table is re-grouped) with the user's Python functions,
    the aggregate kept in Spark's state store as bytes in ``agg_serde``: ``applyInPandasWithState``
    in update mode; ``with_old``: each row also has the key's value before the micro-batch (``old``),
    as Kafka's aggregations send old values to a ``KTable.group_by``."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    reducer = node.args.get("reducer")
    initializer = node.args.get("initializer")
    aggregator = node.args.get("aggregator")
    if node.op == "count":
        initializer, aggregator = (lambda: 0), (lambda _key, _value, n: n + 1)

    def update(key, frames, state):
        import pandas as pd

        k = key_serde.deserialize("", key[0])
        old = state.get[0] if state.exists else None
        if state.exists:
            agg, have = agg_serde.deserialize("", state.get[0]), True
        elif initializer is not None:
            agg, have = initializer(), True
        else:
            agg, have = None, False
        for frame in frames:
            for data in frame.sort_values("offset", kind="stable")["value"]:
                value = value_serde.deserialize("", data)
                if aggregator is not None:
                    agg = aggregator(k, value, agg)
                elif have and reducer is not None:
                    agg = reducer(agg, value)
                else:
                    agg = value
                have = True
        encoded = agg_serde.serialize("", agg)
        state.update((encoded,))
        row = {"key": [key[0]], "value": [encoded]}
        yield pd.DataFrame({**row, "old": [old]} if with_old else row)

    schema = table_grouping.UPDATES_WITH_OLD if with_old else "key binary, value binary"
    return (
        df.select("key", "value", "offset")
        .groupBy("key")
        .applyInPandasWithState(update, schema, "agg binary", "update", GroupStateTimeout.NoTimeout)
    )


def _stateful_ancestors(node: Node, include_self: bool = True) -> list[Node]:
    """The state-store nodes upstream of ``node`` (itself too, with ``include_self``), crossing
    repartitions."""
    found: list[Node] = []
    seen: set[int] = set()
    stack = [node] if include_self else list(node.parents) + _upstream_of_source(node)
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if table_grouping.regrouped_aggregation(current) is not None:  # computed in the aggregation
            stack.extend(current.parents)
            continue
        if current.op in STATEFUL or current.op in JOIN_OPS:
            found.append(current)
            continue
        stack.extend(current.parents)
        stack.extend(_upstream_of_source(current))
    return found


def _upstream_of_source(node: Node) -> list[Node]:
    upstream = node.args.get("upstream") if node.op == "repartition_source" else None
    return [upstream] if upstream is not None and not _materialized(node) else []


def _upstream(node: Node) -> list[Node]:
    """Every node ``node``'s records come from, itself included, across repartitions."""
    seen: dict[int, Node] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen[id(current)] = current
        stack.extend(current.parents)
        for key in ("left", "right", "table"):  # a join's inputs
            if isinstance(current.args.get(key), Node):
                stack.append(current.args[key])
        if current.op == "repartition_source":
            stack.append(current.args["upstream"])
    return list(seen.values())


def _materialized(source: Node) -> bool:
    """A repartition with a store or a join upstream is a real topic between two Spark queries
    (Spark cannot chain such steps in one query in update mode; Kafka writes the topic anyway)."""
    return _materialized_sink(source.args["upstream"])


def _materialized_sink(node: Node) -> bool:
    if node.op != "repartition_sink":
        return False
    return any(n.op in STATEFUL or n.op in JOIN_OPS for n in _upstream(node))


def internal_topic(application_id: str, name: str) -> str:
    """Kafka's name of an internal topic: ``<application.id>-<name>``."""
    return f"{application_id}-{name}"


def materialized_repartition_topics(topology: Topology, application_id: str) -> list[str]:
    """The repartition topics an app writes and reads (``KafkaStreams`` creates them)."""
    return sorted(
        internal_topic(application_id, n.topics[0])
        for n in topology.nodes
        if n.op == "repartition_source" and _materialized(n)
    )


def query_stage(node: Node) -> int:
    """How many repartition topics written by another of the app's queries lie, at most, between
    the input topics and the query of ``node`` (an aggregation or a join; 0: reads only input
    topics). With ``availableNow``, a query must start once those writing its inputs are done."""
    stage = 0
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.op == "repartition_source" and _materialized(current):
            writers = _stateful_ancestors(current.args["upstream"])
            stage = max(stage, 1 + max((query_stage(w) for w in writers), default=0))
            continue
        stack.extend(current.parents)
        stack.extend(current.args[k] for k in ("left", "right", "table") if isinstance(current.args.get(k), Node))
        if current.op == "repartition_source":
            stack.append(current.args["upstream"])
    return stage


def _union(frames: list):
    if not frames:
        return None
    result = frames[0]
    for other in frames[1:]:
        result = result.unionByName(other)
    return result
