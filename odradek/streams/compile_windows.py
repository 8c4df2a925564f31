"""The compile step of a windowed aggregation (``dsl_windowed.py``'s nodes) into Spark.

Kafka's windowing rules (stream time moved by every record, the grace period, the drop of late
records, final results once a window closes) are not Spark's watermark rules (moved between
micro-batches, a batch judged against the watermark of the one before), so the aggregation runs
Kafka's own processor (``window_state.py``) inside ``applyInPandasWithState``: records are grouped
by task (a hash of the key over ``num.stream.threads`` tasks, each with its own stream time, as
Kafka's tasks have), and each task's state (its open windows and stream time) lives in Spark's
state store, checkpointed with the query. Each micro-batch gives rows of three kinds:

- ``update``: a window changed in this batch (its latest value; None when a session was merged
  away) — the windowed KTable's changelog, written to ``<application.id>-<store>-changelog`` in
  the store's key format and to the sinks downstream of the table;
- ``final``: a window closed (stream time ≥ end + grace), with its final value — what
  ``suppress(until_window_closes)`` forwards;
- ``late``: a record dropped because its windows had closed; counted (``dropped-records-total``)
  and logged as Kafka logs "Skipping record for expired window".
"""

from __future__ import annotations

import logging
import pickle
import threading
from dataclasses import dataclass, field
from typing import Any

from odradek.streams.serdes import LongSerde, Serde
from odradek.streams.streams_config import StreamsConfig
from odradek.streams.topology import Node, Topology
from odradek.streams.window_state import (
    Folder,
    WindowDef,
    aggregate_folder,
    count_folder,
    new_state,
    process,
    reduce_folder,
    store_key,
    windowed_key,
)
from odradek.streams.windowed import SessionWindowedSerde, TimeWindowedSerde

log = logging.getLogger("odradek.streams")

OUTPUT_SCHEMA = "kind string, key binary, store_key binary, value binary, ts long"
_LOGGED_LATE = 20  # late records logged one by one per micro-batch; the rest summed up


@dataclass
class WindowMetrics:
    """Kafka's ``dropped-records-total`` for one windowed aggregation (in this process)."""

    dropped_records_total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, n: int) -> None:
        with self._lock:
            self.dropped_records_total += n


@dataclass
class WindowedParts:
    """What the compiler needs to wire a windowed aggregation: the streaming DataFrame of
    ``OUTPUT_SCHEMA`` rows, the serdes of the table's keys and values, and per micro-batch the
    rows for the table's changelog and for its downstream roots."""

    node: Node
    updates: Any
    key_serde: Serde
    value_serde: Serde
    changelog: str | None
    suppress_nodes: list[Node]
    metrics: WindowMetrics
    _cached: list = field(default_factory=list)

    def open_batch(self, batch) -> tuple[Any, dict[int, Any]]:
        """Caches the micro-batch, counts and logs its late records; returns the batch and the
        record rows (``key, value, timestamp, offset, topic``) of each root node by id."""
        from pyspark.sql import functions as F

        batch = batch.persist()
        self._cached.append(batch)
        late = batch.where(F.col("kind") == "late").select("key", "ts", "value").collect()
        if late:
            self._log_late(late)
        rows = {id(self.node): _records(batch, "update")}
        for suppress_node in self.suppress_nodes:
            rows[id(suppress_node)] = _records(batch, "final")
        return batch, rows

    def changelog_rows(self, batch):
        from pyspark.sql import functions as F

        if self.changelog is None:
            return None
        updates = batch.where(F.col("kind") == "update")
        return updates.select(F.lit(self.changelog).alias("topic"), F.col("store_key").alias("key"), "value")

    def close_batch(self) -> None:
        while self._cached:
            self._cached.pop().unpersist()

    def _log_late(self, late: list) -> None:
        dropped = sum(int.from_bytes(bytes(row["value"]), "big") for row in late)
        self.metrics.add(dropped)
        for row in late[:_LOGGED_LATE]:
            log.warning(
                "%s: skipping record for expired window: key=%r timestamp=[%d]",
                self.node.name,
                bytes(row["key"]),
                row["ts"],
            )
        if len(late) > _LOGGED_LATE:
            log.warning("%s: … and %d more late records skipped", self.node.name, len(late) - _LOGGED_LATE)


def windowed_parts(
    node: Node, topology: Topology, config: StreamsConfig, records, in_key: Serde, in_value: Serde
) -> WindowedParts:
    """``records``: the aggregation's input as bytes in ``in_key``/``in_value`` (RECORD_SCHEMA)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    args = node.args
    windows: WindowDef = args["windows"]
    op = args["fold"]
    if op == "count":
        value_serde: Serde = LongSerde()
    elif op == "reduce":
        value_serde = args.get("value_serde") or in_value
    else:
        value_serde = args.get("value_serde") or config.value_serde
    inner_key = args.get("key_serde") or in_key
    key_serde: Serde = (
        SessionWindowedSerde(inner_key)
        if windows.kind == "session"
        else TimeWindowedSerde(inner_key, windows.size_ms)
    )
    suppress_nodes = [child for child in node.children if child.op == "suppress"]
    store = topology.stores[args["store"]]
    changelog = f"{config.application_id}-{store.name}-changelog" if store.logged else None
    run = _state_function(
        windows,
        _folder(op, args),
        in_key,
        in_value,
        value_serde,
        final_results=bool(suppress_nodes),
        needs_values=op != "count",
    )
    tasks = config.num_stream_threads
    keyed = records.where(F.col("key").isNotNull() & F.col("value").isNotNull()).select(
        F.pmod(F.xxhash64("key"), F.lit(tasks)).alias("task"),
        "key",
        "value",
        F.unix_millis("timestamp").alias("ts"),
        "offset",
    )
    updates = keyed.groupBy("task").applyInPandasWithState(
        run, OUTPUT_SCHEMA, "blob binary", "update", GroupStateTimeout.NoTimeout
    )
    return WindowedParts(node, updates, key_serde, value_serde, changelog, suppress_nodes, WindowMetrics())


def _folder(op: str, args: dict) -> Folder:
    if op == "count":
        return count_folder()
    if op == "reduce":
        return reduce_folder(args["reducer"])
    return aggregate_folder(args["initializer"], args["aggregator"], args.get("merger"))


def _records(batch, kind: str):
    from pyspark.sql import functions as F

    return batch.where(F.col("kind") == kind).select(
        "key",
        "value",
        F.timestamp_millis("ts").alias("timestamp"),
        F.lit(0).cast("long").alias("offset"),
        F.lit(None).cast("string").alias("topic"),
    )


def _state_function(
    windows: WindowDef,
    folder: Folder,
    key_serde: Serde,
    value_serde: Serde,
    agg_serde: Serde,
    *,
    final_results: bool,
    needs_values: bool,
):
    """The ``applyInPandasWithState`` function: one task's records of a micro-batch through
    Kafka's processor, in offset order (the order Kafka's task reads them)."""

    def update(_task, frames, state):
        import pandas as pd

        current = pickle.loads(state.get[0]) if state.exists else new_state()
        frame = pd.concat(list(frames), ignore_index=True).sort_values(["offset", "ts"], kind="stable")
        records = (
            (
                bytes(k),
                value_serde.deserialize("", v) if needs_values else None,
                int(ts),
                key_serde.deserialize("", k) if needs_values else None,
            )
            for k, v, ts in zip(frame["key"], frame["value"], frame["ts"], strict=True)
        )
        step = process(current, windows, folder, records, final_results=final_results)
        state.update((pickle.dumps(current, protocol=pickle.HIGHEST_PROTOCOL),))
        out: dict[str, list] = {"kind": [], "key": [], "store_key": [], "value": [], "ts": []}

        def emit(kind, key, skey, value, ts):
            for column, item in zip(out, (kind, key, skey, value, ts), strict=True):
                out[column].append(item)

        for (key, start, end), entry in step.updates.items():
            value = None if entry is None else agg_serde.serialize("", entry[0])
            ts = end if entry is None else entry[1]
            emit(
                "update",
                windowed_key(windows.kind, key, start, end),
                store_key(windows.kind, key, start, end),
                value,
                ts,
            )
        for (key, start, end), agg, ts in step.finals:
            emit("final", windowed_key(windows.kind, key, start, end), None, agg_serde.serialize("", agg), ts)
        for key, ts, missed in step.late:
            emit("late", key, None, missed.to_bytes(8, "big"), ts)
        yield pd.DataFrame(out, columns=list(out))

    return update
