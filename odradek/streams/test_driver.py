"""``TopologyTestDriver``: run a topology's Spark plan over records piped in from a test, no broker.

The plan is the one ``KafkaStreams`` runs (``compiler.py``); only the ends differ. Piped records
are written as Parquet files into a directory per input topic, which a streaming file source
reads; reading an output topic first runs every query over what was piped since the last read
(``Trigger.AvailableNow``, with checkpoints in a temporary directory, so state carries over
from read to read as it does from micro-batch to micro-batch) and collects the rows each query
wrote. Records piped between two reads form one micro-batch: an aggregation emits one update per
key per read (Kafka's driver, which has no cache, emits one per record); the latest value per
key (``read_key_values_to_map``) is the same. Record timestamps are what ``pipe_input`` is given,
else the driver's wall clock, which starts at ``initial_wall_clock_ms`` and moves by
``advance_wall_clock_time``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from datetime import UTC, datetime
from typing import Any

from odradek.streams.compiler import Compiler, Plan, materialized_repartition_topics, plan_metrics
from odradek.streams.serdes import Serde
from odradek.streams.streams_config import StreamsConfig
from odradek.streams.topology import Topology

_FILE_SCHEMA = "key binary, value binary, timestamp timestamp, offset long, topic string"


class TopologyTestDriver:
    def __init__(
        self,
        topology: Topology,
        config: dict[str, Any] | None = None,
        initial_wall_clock_ms: int = 0,
        *,
        spark=None,
    ):
        config = dict(config or {})
        config.setdefault("application.id", "test-driver")
        config.setdefault("bootstrap.servers", "dummy:1234")
        self.config = StreamsConfig(config)
        self.topology = topology
        self._dir = tempfile.mkdtemp(prefix="odradek-test-driver-")
        self._spark = spark
        self._wall_ms = initial_wall_clock_ms
        self._offsets: dict[str, int] = {}
        self._pending = False
        self._outputs: dict[str, list[tuple[bytes | None, bytes | None]]] = {}
        self._plan: Plan | None = None
        self._closed = False

    # -- time ---------------------------------------------------------------------------------
    def advance_wall_clock_time(self, ms) -> None:
        self._wall_ms += int(ms.total_seconds() * 1000) if hasattr(ms, "total_seconds") else int(ms)

    # -- topics -------------------------------------------------------------------------------
    def create_input_topic(self, name: str, key_serde: Serde, value_serde: Serde) -> TestInputTopic:
        if name not in self.topology.source_topics():
            raise ValueError(
                f"{name!r} is not an input topic of this topology (it reads {', '.join(self.topology.source_topics())})"
            )
        return TestInputTopic(self, name, key_serde, value_serde)

    def create_output_topic(self, name: str, key_serde: Serde, value_serde: Serde) -> TestOutputTopic:
        return TestOutputTopic(self, name, key_serde, value_serde)

    def _pipe(self, topic: str, records: list[tuple[bytes | None, bytes | None, int | None]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        first = self._offsets.get(topic, 0)
        self._offsets[topic] = first + len(records)
        table = pa.table(
            {
                "key": pa.array([r[0] for r in records], pa.binary()),
                "value": pa.array([r[1] for r in records], pa.binary()),
                "timestamp": pa.array(
                    [
                        datetime.fromtimestamp((r[2] if r[2] is not None else self._wall_ms) / 1000, UTC)
                        for r in records
                    ],
                    pa.timestamp("us", tz="UTC"),
                ),
                "offset": pa.array(range(first, first + len(records)), pa.int64()),
                "topic": pa.array([topic] * len(records), pa.string()),
            }
        )
        directory = os.path.join(self._dir, "input", _safe(topic))
        os.makedirs(directory, exist_ok=True)
        # Written under a dot name and renamed, so the file source never sees half a file.
        final = os.path.join(directory, f"{first:020d}-{uuid.uuid4().hex}.parquet")
        partial = os.path.join(directory, "." + os.path.basename(final))
        pq.write_table(table, partial)
        os.rename(partial, final)
        self._pending = True

    # -- running ------------------------------------------------------------------------------
    def _session(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            from odradek.pipeline import spark_session

            self._spark = SparkSession.getActiveSession() or spark_session(
                "local[2]", app_name="topology-test-driver"
            )
        return self._spark

    def _read(self, topics: list[str]):
        spark = self._session()
        frames = []
        for topic in topics:
            directory = os.path.join(self._dir, "input", _safe(topic))
            os.makedirs(directory, exist_ok=True)
            frames.append(spark.readStream.schema(_FILE_SCHEMA).parquet(directory))
        result = frames[0]
        for other in frames[1:]:
            result = result.unionByName(other)
        return result

    def _run(self) -> None:
        if self._closed:
            raise RuntimeError("the TopologyTestDriver is closed")
        if self._plan is None:
            self._plan = Compiler(self.topology, self.config, self._read).plan()
        internal = materialized_repartition_topics(self.topology, self.config.application_id)
        while self._pending:  # records written to a repartition topic are read by the next round
            self._pending = False
            self._run_queries(self._plan)
            for topic in internal:
                records = self._outputs.pop(topic, [])
                if records:
                    self._pipe(topic, [(key, value, None) for key, value in records])

    def _run_queries(self, plan: Plan) -> None:
        queries = []
        if plan.stateless is not None:
            queries.append(
                plan.stateless.writeStream.foreachBatch(lambda df, _id: self._collect(df))
                .option("checkpointLocation", os.path.join(self._dir, "ckpt", "stateless"))
                .trigger(availableNow=True)
                .start()
            )
        for agg in plan.aggregations:
            if not agg.has_terminals:  # a table read only by joins: its changelog is not kept here
                continue
            queries.append(
                agg.updates.writeStream.outputMode(agg.output_mode)
                .foreachBatch(lambda df, _id, agg=agg: self._collect_aggregation(agg, df))
                .option("checkpointLocation", os.path.join(self._dir, "ckpt", agg.node.name))
                .trigger(availableNow=True)
                .start()
            )
        for q in queries:
            q.awaitTermination()
            if q.exception() is not None:
                raise q.exception()

    def _collect(self, df) -> None:
        for row in df.collect():
            self._outputs.setdefault(row["topic"], []).append(
                (
                    None if row["key"] is None else bytes(row["key"]),
                    None if row["value"] is None else bytes(row["value"]),
                )
            )

    def _collect_aggregation(self, agg, df) -> None:
        try:
            self._collect(agg.outputs(df))
        finally:
            agg.after()

    def metrics(self) -> dict[str, float]:
        """As ``KafkaStreams.metrics()``: ``dropped-records-total`` (late records of windowed
        aggregations), after running what was piped."""
        self._run()
        return plan_metrics(self._plan)

    def _take(self, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        self._run()
        return self._outputs.pop(topic, [])

    def close(self) -> None:
        self._closed = True
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TestInputTopic:
    __test__ = False  # not a pytest class

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde, value_serde: Serde):
        self._driver, self.name, self._key_serde, self._value_serde = driver, name, key_serde, value_serde

    def _encode(self, key, value, timestamp_ms) -> tuple:
        return (
            self._key_serde.serialize(self.name, key),
            self._value_serde.serialize(self.name, value),
            timestamp_ms,
        )

    def pipe_input(self, key=None, value=None, timestamp_ms: int | None = None) -> None:
        self._driver._pipe(self.name, [self._encode(key, value, timestamp_ms)])

    def pipe_key_value_list(self, pairs, timestamp_ms: int | None = None) -> None:
        self._driver._pipe(self.name, [self._encode(k, v, timestamp_ms) for k, v in pairs])

    def pipe_value_list(self, values, timestamp_ms: int | None = None) -> None:
        self._driver._pipe(self.name, [self._encode(None, v, timestamp_ms) for v in values])


class TestOutputTopic:
    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde, value_serde: Serde):
        self._driver, self.name, self._key_serde, self._value_serde = driver, name, key_serde, value_serde
        self._unread: list[tuple] = []

    def _fill(self) -> None:
        for key, value in self._driver._take(self.name):
            self._unread.append(
                (self._key_serde.deserialize(self.name, key), self._value_serde.deserialize(self.name, value))
            )

    def read_key_values_to_list(self) -> list[tuple]:
        self._fill()
        out, self._unread = self._unread, []
        return out

    def read_key_values_to_map(self) -> dict:
        latest: dict = {}
        for key, value in self.read_key_values_to_list():
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
        return latest

    def read_values_to_list(self) -> list:
        return [v for _k, v in self.read_key_values_to_list()]

    def read_key_value(self) -> tuple:
        self._fill()
        if not self._unread:
            raise LookupError(f"no more records in output topic {self.name!r}")
        return self._unread.pop(0)

    def read_value(self):
        return self.read_key_value()[1]

    def is_empty(self) -> bool:
        self._fill()
        return not self._unread

    def get_queue_size(self) -> int:
        self._fill()
        return len(self._unread)


def _safe(topic: str) -> str:
    return topic.replace(os.sep, "_")
