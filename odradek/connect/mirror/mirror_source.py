"""MirrorSourceConnector: topics of one cluster copied to ``<alias>.<topic>`` on another
(Kafka's ``org.apache.kafka.connect.mirror.MirrorSourceConnector``, keys as MirrorMaker 2's).

The connector, with admin clients on both clusters, picks the source topics (``topics`` and
``topics.exclude`` regular expressions, never internal topics nor topics that came from the
target), creates their remote topics on the target with as many partitions and the same
configs, creates the offset-syncs topic on the source, and every
``refresh.topics.interval.seconds`` looks again: new partitions and configs are applied, and
when the set of topic-partitions changed the tasks are reconfigured. Topic-partitions are dealt
to at most ``tasks.max`` tasks (task key ``task.assigned.partitions``, ``topic-partition``).

A task reads its partitions from the source cluster with its own consumer (no group) and turns
each record into a SourceRecord for the remote topic and the same partition, bytes as they
were, headers and timestamp kept. Its source partition is ``{"cluster", "topic", "partition"}``
and its offset ``{"offset": n}``, so a restarted task resumes after the last record the worker
committed. As the worker acknowledges records (``commit_record``), offset syncs (upstream →
downstream offset) go to the offset-syncs topic for the checkpoint connector.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.connect.api import SourceConnector, SourceTask
from odradek.connect.connector_config import Config
from odradek.connect.connector_config import ConfigDef as ConnectConfigDef
from odradek.connect.data import Schema
from odradek.connect.jdbc.connector_support import Watcher, connect_config_def, validation
from odradek.connect.mirror.mirror_offset_syncs import OffsetSyncWriter
from odradek.connect.mirror.mirror_policy import ReplicationPolicy
from odradek.connect.mirror.mirror_settings import (
    MIRROR_CONFIGS,
    cluster_client_config,
    parse,
    problems,
    refresh_topics_seconds,
)
from odradek.connect.mirror.mirror_topics import TopicSync
from odradek.connect.records import Headers, SourceRecord

log = logging.getLogger(__name__)

VERSION = "3.9.0-odradek"  # the Kafka release whose MirrorMaker 2 this follows
BYTES = Schema.OPTIONAL_BYTES_SCHEMA


def encode_partitions(partitions: list[tuple[str, int]]) -> str:
    return ",".join(f"{topic}-{partition}" for topic, partition in partitions)


def decode_partition(text: str) -> TopicPartition:
    topic, _, partition = text.rpartition("-")
    return TopicPartition(topic, int(partition))


class MirrorConnector(SourceConnector):
    """What both mirror connectors share: MirrorMaker 2's keys, admin clients, a watcher."""

    def __init__(self) -> None:
        super().__init__()
        self._props: dict[str, str] = {}
        self._watcher: Watcher | None = None
        self._admins: list[Any] = []

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConnectConfigDef:
        return connect_config_def(MIRROR_CONFIGS)

    def validate(self, configs: dict[str, str]) -> Config:
        return validation(MIRROR_CONFIGS, configs, problems(configs))

    def _configure(self, props: dict[str, str]) -> dict[str, Any]:
        self._props = dict(props)
        self.config = parse(props)
        return self.config

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        for admin in self._admins:
            admin.close()
        self._admins = []


class MirrorSourceConnector(MirrorConnector):
    def start(self, props: dict[str, str]) -> None:
        config = self._configure(props)
        source = Admin(cluster_client_config(props, "source"))
        target = Admin(cluster_client_config(props, "target"))
        self._admins = [source, target]
        self.topics = TopicSync(config, source, target)
        policy = ReplicationPolicy(config["replication.policy.separator"])
        self.topics.ensure_internal_topic(
            source,
            policy.offset_syncs_topic(config["target.cluster.alias"]),
            config["offset-syncs.topic.replication.factor"],
        )
        partitions = self.topics.source_partitions()
        self.topics.sync(partitions)
        self._watcher = Watcher(
            "the mirrored topic-partitions",
            refresh_topics_seconds(config),
            self._refresh,
            lambda: self.context.request_task_reconfiguration(),
            partitions,
        ).start()

    def _refresh(self) -> dict[str, int]:
        """The source's mirrored topics and partition counts, the target brought in step."""
        partitions = self.topics.source_partitions()
        self.topics.sync(partitions)
        return partitions

    def task_class(self):
        return MirrorSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        partitions = self._watcher.current if self._watcher else {}
        all_partitions = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
        if not all_partitions:
            return []
        count = max(1, min(max_tasks, len(all_partitions)))
        return [
            {**self._props, "task.assigned.partitions": encode_partitions(all_partitions[i::count])}
            for i in range(count)
        ]


class MirrorSourceTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self._consumer: Any = None
        self._producer: Any = None

    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        self.config = config = parse(props)
        self.alias = config["source.cluster.alias"]
        self.policy = ReplicationPolicy(config["replication.policy.separator"])
        self.syncs_topic = self.policy.offset_syncs_topic(config["target.cluster.alias"])
        self.sync_writer = OffsetSyncWriter(config["offset.lag.max"])
        source = cluster_client_config(props, "source")
        self._consumer = Consumer({**source, "enable.auto.commit": "false", "auto.offset.reset": "earliest"})
        self._producer = Producer(source)
        partitions = [decode_partition(p) for p in config["task.assigned.partitions"]]
        self._consumer.assign(partitions)
        context: Any = self.context
        for tp in partitions:
            stored = context.offset_storage_reader.offset(self.source_partition(tp.topic, tp.partition))
            if stored and stored.get("offset") is not None:
                self._consumer.seek(tp, int(stored["offset"]) + 1)
            else:
                self._consumer.seek_to_beginning(tp)
        self._remote = {tp.topic: self.policy.format_remote_topic(self.alias, tp.topic) for tp in partitions}

    def source_partition(self, topic: str, partition: int) -> dict[str, Any]:
        return {"cluster": self.alias, "topic": topic, "partition": partition}

    def poll(self) -> list[SourceRecord] | None:
        records = self._consumer.poll(0.5)
        if not records:
            return None
        out = []
        for r in records:
            headers = Headers()
            for key, value in r.headers or ():
                headers.add(key, value, BYTES)
            out.append(
                SourceRecord(
                    topic=self._remote[r.topic],
                    kafka_partition=r.partition,
                    key_schema=BYTES,
                    key=r.key,
                    value_schema=BYTES,
                    value=r.value,
                    timestamp=r.timestamp,
                    headers=headers,
                    source_partition=self.source_partition(r.topic, r.partition),
                    source_offset={"offset": r.offset},
                )
            )
        return out

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """The worker wrote ``record`` at ``metadata.offset`` on the target: sync offsets if due."""
        if metadata is None or record.source_partition is None or record.source_offset is None:
            return  # dropped by a transform or filter
        sync = self.sync_writer.update(
            record.source_partition["topic"],
            record.source_partition["partition"],
            record.source_offset["offset"],
            metadata.offset,
        )
        if sync is not None:
            self._producer.send(self.syncs_topic, value=sync.value(), key=sync.key())

    def commit(self) -> None:
        if self._producer is not None:
            self._producer.flush()

    def stop(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                client.close()
        self._consumer = self._producer = None
