"""``KafkaStreams``: runs a topology on Spark against a broker (Kafka's client class, in Python).

``start()`` checks the input topics exist (one line naming the missing ones), creates the
output topics' internal companions (``<application.id>-<store>-changelog``, compacted, with
``replication.factor``), compiles the topology and starts its Spark queries: one appending the
stateless outputs, one per state store in update mode. Checkpoints live in
``<state.dir>/<application.id>/``; ``processing.guarantee=exactly_once_v2`` writes through the
``odradek`` data source's exactly-once sink, so a driver killed and restarted from the same
checkpoint writes each result once.
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from odradek.streams.compiler import (
    Compiler,
    Plan,
    materialized_repartition_topics,
    plan_metrics,
    query_stage,
)
from odradek.streams.interactive_queries import InvalidStateStoreException
from odradek.streams.streams_config import StreamsConfig
from odradek.streams.topology import Topology
from odradek.streams.windowed_queries import open_store

log = logging.getLogger("odradek.streams")


class State(enum.Enum):
    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"


class StreamsUncaughtExceptionHandler:
    """Kafka's handler responses; a handler is any callable ``(exception) -> response``."""

    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"
    REPLACE_THREAD = "REPLACE_THREAD"


class MissingSourceTopicException(RuntimeError):
    """A topology reads a topic that does not exist (Kafka's exception of that name)."""


def _all_done(queries: list) -> bool:
    """Waits for ``queries`` (run with availableNow) to end; False when one failed."""
    for q in queries:
        try:
            q.awaitTermination()
        except Exception:  # noqa: BLE001 - Spark raises the query's failure here
            return False
    return all(q.exception() is None for q in queries)


class KafkaStreams:
    def __init__(
        self,
        topology: Topology,
        config: dict[str, Any] | StreamsConfig,
        *,
        spark=None,
        trigger: dict | None = None,
    ):
        """``spark``: a session to run on (default: the active one, else a new one from the config's
        ``spark.*``). ``trigger``: Spark trigger arguments replacing ``commit.interval.ms``, e.g.
        ``{"availableNow": True}`` to process what the topics hold now and stop."""
        self.topology = topology
        self._trigger = trigger
        self.config = StreamsConfig(config)
        self._spark = spark
        self._queries: list = []
        self._state = State.CREATED
        self._handler = None
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        self._plan: Plan | None = None
        self._stores: dict[str, Any] = {}
        self.exception: BaseException | None = None

    def state(self) -> State:
        return self._state

    def set_uncaught_exception_handler(self, handler) -> None:
        if self._state is not State.CREATED:
            raise RuntimeError("set the uncaught exception handler before start()")
        self._handler = handler

    # -- start -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._state is not State.CREATED:
            raise RuntimeError(f"start() can only be called once, in state CREATED (now {self._state.value})")
        self._state = State.REBALANCING
        try:
            self._check_and_create_topics()
            spark = self._session()
            self._plan = Compiler(self.topology, self.config, lambda topics: self._read(spark, topics)).plan()
            self._queries = self._start_queries(self._plan)
        except BaseException:
            self._state = State.ERROR
            self._stop_queries()
            raise
        self._state = State.RUNNING
        self._watcher = threading.Thread(target=self._watch, name="odradek-streams-watch", daemon=True)
        self._watcher.start()

    def _check_and_create_topics(self) -> None:
        from odradek.pipeline.blocking_client import TlsTrustError
        from odradek.protocol.errors import SaslAuthenticationFailedError

        try:
            self._check_and_create_topics_with_admin()
        except SaslAuthenticationFailedError as exc:
            raise SaslAuthenticationFailedError(
                f"application {self.config.application_id} cannot authenticate to "
                f"{self.config.bootstrap_servers}: {exc.message}; check sasl.mechanism, "
                "sasl.username and sasl.password (or sasl.jaas.config)"
            ) from None
        except TlsTrustError as exc:
            raise TlsTrustError(f"application {self.config.application_id}: {exc.message}") from None

    def _check_and_create_topics_with_admin(self) -> None:
        from odradek.pipeline.blocking_client import Cluster

        with Cluster(self.config.bootstrap_servers, security=self.config.security) as cluster:
            wanted = self.topology.source_topics()
            found = cluster.topic_partitions(wanted, refresh=True)
            missing = [t for t in wanted if t not in found]
            if missing:
                raise MissingSourceTopicException(
                    f"source topic(s) {', '.join(missing)} missing: create them before starting "
                    f"application {self.config.application_id} (odradek topics create …)"
                )
            partitions = max((len(p) for p in found.values()), default=1)
            for name in self.topology.changelog_topics(self.config.application_id):
                cluster.create_topic(
                    name,
                    partitions,
                    replication_factor=self.config.replication_factor,
                    configs={"cleanup.policy": "compact"},
                )
            internal = materialized_repartition_topics(self.topology, self.config.application_id)
            existing = cluster.topic_partitions(self.topology.sink_topics() + internal, refresh=True)
            for name in self.topology.sink_topics() + internal:
                if name not in existing:
                    cluster.create_topic(name, partitions, replication_factor=self.config.replication_factor)

    def _session(self):
        if self._spark is not None:
            return self._spark
        from pyspark.sql import SparkSession

        from odradek.pipeline import register, spark_session

        active = SparkSession.getActiveSession()
        if active is not None:
            register(active)
            self._spark = active
            return active
        master = self.config.spark.get("spark.master") or f"local[{self.config.num_stream_threads}]"
        conf = {k: v for k, v in self.config.spark.items() if k != "spark.master"}
        conf.setdefault("spark.sql.shuffle.partitions", str(max(2, self.config.num_stream_threads)))
        self._spark = spark_session(master, app_name=self.config.application_id, config=conf)
        if master.startswith("spark://"):
            from odradek.pipeline.ship import ship_odradek

            # A cluster's executors may not have odradek installed: send them its sources.
            ship_odradek(self._spark, Path(self.config.checkpoint_dir) / "ship")
        return self._spark

    def _client_options(self) -> dict[str, str]:
        """The data source options every reader and writer of the app takes: where the brokers are
        and how to reach them (the security keys as Spark's Kafka source spells them)."""
        return {
            "kafka.bootstrap.servers": self.config.bootstrap_servers,
            **{f"kafka.{key}": value for key, value in self.config.security},
        }

    def _read(self, spark, topics: list[str]):
        return (
            spark.readStream.format("odradek")
            .options(**self._client_options())
            .option("subscribe", ",".join(topics))
            .option("startingOffsets", self._starting_offsets(topics))
            # One wave of read tasks per micro-batch (one per core): a batch of a few records
            # spread over many partitions does not pay for several waves of Python tasks.
            .option("maxPartitions", str(spark.sparkContext.defaultParallelism))
            .load()
        )

    def _starting_offsets(self, topics: list[str]) -> str:
        """A repartition topic is read from its start (it only holds what this app wrote)."""
        internal = materialized_repartition_topics(self.topology, self.config.application_id)
        return "earliest" if set(topics) <= set(internal) else self.config.auto_offset_reset

    def _start_queries(self, plan: Plan) -> list:
        config = self.config
        trigger = self._trigger or {"processingTime": f"{config.commit_interval_ms} milliseconds"}
        exactly_once = "true" if config.exactly_once else "false"
        client = self._client_options()
        queries = []
        if plan.stateless is not None:
            writer = (
                plan.stateless.writeStream.format("odradek")
                .options(**client)
                .option("exactlyOnce", exactly_once)
                .option("checkpointLocation", os.path.join(config.checkpoint_dir, "stateless"))
                .queryName(f"{config.application_id}-stateless")
                .trigger(**trigger)
            )
            queries.append(writer.start())
        staged: list[tuple[int, Any]] = []  # (query_stage, writer) of each aggregation's query
        for agg in plan.aggregations:
            sink_id = agg.node.name

            def write(batch, batch_id, agg=agg, sink_id=sink_id):
                # The updates feed the sinks and the changelog (a union of two reads of the batch):
                # kept once, so the source, the Python stage and the aggregation run once, not twice.
                batch.persist()
                try:
                    # A micro-batch's updates are the keys it changed: a few writer tasks (one per
                    # stream thread) rather than one per shuffle partition and per output.
                    rows = agg.outputs(batch).coalesce(config.num_stream_threads)
                    (
                        rows.write.format("odradek")
                        .mode("append")
                        .options(**client)
                        .option("exactlyOnce", exactly_once)
                        .option("sinkId", sink_id)
                        .save()
                    )
                finally:
                    batch.unpersist()
                    agg.after()

            writer = (
                agg.updates.writeStream.outputMode(agg.output_mode)
                .foreachBatch(write)
                .option("checkpointLocation", os.path.join(config.checkpoint_dir, agg.node.name))
                .queryName(f"{config.application_id}-{agg.node.name}")
                .trigger(**trigger)
            )
            staged.append((query_stage(agg.node), writer))
        if not trigger.get("availableNow"):
            return queries + [writer.start() for _, writer in staged]
        # Processing what is there now: a query reading a repartition topic another query writes
        # starts once that one has written all it will.
        for stage in sorted({stage for stage, _ in staged}):
            if stage > 0 and not _all_done(queries):
                break  # a query failed: the watcher reports it; the later ones would read too little
            queries += [writer.start() for s, writer in staged if s == stage]
        return queries

    # -- watching and stopping -------------------------------------------------------------------
    def _watch(self) -> None:
        """Waits for a query to fail; then asks the handler what to do (stop, or REPLACE_THREAD:
        start the queries again from their checkpoints)."""
        while not self._stopping.is_set():
            failed = next((q for q in self._queries if not q.isActive and q.exception() is not None), None)
            if failed is not None and not self._failed(failed.exception()):
                return
            self._stopping.wait(0.2)

    def _failed(self, exc) -> bool:
        """Handles a failed query; True when the app carries on (its queries replaced)."""
        self.exception = exc
        self._state = State.PENDING_ERROR
        from odradek.pipeline.supervise import failure_line

        log.error("%s: a query failed: %s", self.config.application_id, failure_line(exc))
        response = None
        if self._handler is not None:
            try:
                response = self._handler(exc)
            except Exception:  # noqa: BLE001 - a failing handler must not hide the original failure
                log.exception("the uncaught exception handler failed")
        self._stop_queries()
        if response == StreamsUncaughtExceptionHandler.REPLACE_THREAD and not self._stopping.is_set():
            assert self._plan is not None
            log.warning(
                "%s: REPLACE_THREAD: the queries start again from their checkpoints",
                self.config.application_id,
            )
            self._queries = self._start_queries(self._plan)
            self._state = State.RUNNING
            return True
        self._state = State.ERROR
        return False

    def _stop_queries(self) -> None:
        for q in self._queries:
            try:
                q.stop()
            except Exception:  # noqa: BLE001 - stopping the rest matters more
                log.exception("stopping query %s", q.name)

    def close(self, timeout: float | None = None) -> bool:
        """Stop the queries (after the micro-batch in progress); True when all stopped in time."""
        if self._state in (State.NOT_RUNNING, State.CREATED):
            self._state = State.NOT_RUNNING
            return True
        failed = self._state is State.ERROR
        self._state = State.PENDING_SHUTDOWN
        self._stopping.set()
        stopper = threading.Thread(target=self._stop_queries, daemon=True)
        stopper.start()
        stopper.join(timeout)
        if self._watcher is not None:
            self._watcher.join(timeout)
        self._state = State.ERROR if failed else State.NOT_RUNNING
        return not stopper.is_alive()

    def cleanup(self) -> None:
        """Remove this application's checkpoints (its local state), as Kafka's cleanUp()."""
        if self._state not in (State.CREATED, State.NOT_RUNNING, State.ERROR):
            raise RuntimeError("cleanup() needs a KafkaStreams that is not running: close() it first")
        shutil.rmtree(self.config.checkpoint_dir, ignore_errors=True)

    # -- interactive queries ------------------------------------------------------------------
    def store(self, name: str, store_type: Any = None) -> Any:
        """The materialized store ``name``, read from its changelog topic: a table as a
        ``ReadOnlyKeyValueStore`` (``get``, ``range``, ``all``, ``approximate_num_entries``;
        interactive_queries.py), a time-windowed aggregation as a ``ReadOnlyWindowStore`` and a
        session-windowed one as a ``ReadOnlySessionStore`` (windowed_queries.py). ``store_type`` is
        accepted for Kafka's signature: the store's kind decides. InvalidStateStoreException when
        there is no such store or the app is not running."""
        if self._state not in (State.RUNNING, State.REBALANCING) or self._plan is None:
            raise InvalidStateStoreException(
                f"KafkaStreams is not running (state {self._state.value}): query state stores after start()"
            )
        known = self.topology.stores.get(name)
        if known is None:
            names = ", ".join(sorted(self.topology.stores)) or "none"
            raise InvalidStateStoreException(
                f"no state store named {name!r} is registered in the topology (its stores: {names}); "
                "name one with Materialized.as_(name)"
            )
        if name not in self._stores:
            agg = next((a for a in self._plan.aggregations if a.store == name), None)
            if not known.logged or agg is None or agg.key_serde is None or agg.value_serde is None:
                raise InvalidStateStoreException(
                    f"state store {name!r} cannot be queried: only materialized tables with a changelog "
                    "topic (not with_logging_disabled()) answer interactive queries"
                )
            self._stores[name] = open_store(
                name,
                f"{self.config.application_id}-{name}-changelog",
                agg.key_serde,
                agg.value_serde,
                self._client_options(),
                read_committed=self.config.exactly_once,
            )
        return self._stores[name]

    @property
    def spark(self):
        """The SparkSession the app runs on (created by ``start()`` unless one was given)."""
        return self._session()

    def metrics(self) -> dict[str, float]:
        """Kafka's client metrics that apply here, by name: ``dropped-records-total`` (records
        windowed aggregations dropped as late, since start())."""
        return plan_metrics(self._plan)

    def queries(self) -> list:
        return list(self._queries)

    def await_termination(self, timeout: float | None = None) -> None:
        for q in self._queries:
            q.awaitTermination(timeout)

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
