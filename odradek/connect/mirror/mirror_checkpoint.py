"""MirrorCheckpointConnector: consumer groups' committed offsets translated to the target cluster
(Kafka's ``org.apache.kafka.connect.mirror.MirrorCheckpointConnector``).

The connector lists the source cluster's groups (``groups`` / ``groups.exclude`` regular
expressions), creates the compacted checkpoints topic ``<source alias>.checkpoints.internal`` on
the target, deals the groups to the tasks (``task.assigned.groups``) and looks for new groups
every ``refresh.groups.interval.seconds``.

Every ``emit.checkpoints.interval.seconds`` a task reads its groups' committed offsets on the
source, translates each through the offset syncs (mirror_offset_syncs.py) and returns a checkpoint
record for each that changed: key and value in Kafka's checkpoint format (mirror_wire.py), for the
remote topic-partition. With ``sync.group.offsets.enabled`` it also commits the translated
offsets to the same group on the target every ``sync.group.offsets.interval.seconds`` — only
while that group has no active members there, and never moving an offset backwards — so
consumers that fail over to the target resume where they stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from odradek.client import Admin, TopicPartition
from odradek.connect.api import SourceTask
from odradek.connect.data import Schema
from odradek.connect.jdbc.connector_support import Watcher
from odradek.connect.mirror.mirror_offset_syncs import OffsetSyncStore
from odradek.connect.mirror.mirror_policy import ReplicationPolicy
from odradek.connect.mirror.mirror_settings import (
    cluster_client_config,
    matcher,
    parse,
)
from odradek.connect.mirror.mirror_source import VERSION, MirrorConnector
from odradek.connect.mirror.mirror_topics import TopicSync
from odradek.connect.mirror.mirror_wire import Checkpoint
from odradek.connect.records import SourceRecord

log = logging.getLogger(__name__)

BYTES = Schema.OPTIONAL_BYTES_SCHEMA
IDLE_STATES = {"Empty", "Dead", "Unknown", ""}


class MirrorCheckpointConnector(MirrorConnector):
    def start(self, props: dict[str, str]) -> None:
        config = self._configure(props)
        self._source = Admin(cluster_client_config(props, "source"))
        target = Admin(cluster_client_config(props, "target"))
        self._admins = [self._source, target]
        policy = ReplicationPolicy(config["replication.policy.separator"])
        TopicSync(config, self._source, target).ensure_internal_topic(
            target,
            policy.checkpoints_topic(config["source.cluster.alias"]),
            config["checkpoints.topic.replication.factor"],
        )
        self._wanted = matcher(config["groups"], config["groups.exclude"])
        self._watcher = Watcher(
            "the checkpointed groups",
            config["refresh.groups.interval.seconds"],
            self._list_groups,
            lambda: self.context.request_task_reconfiguration(),
            self._list_groups(),
        ).start()

    def _list_groups(self) -> list[str]:
        return sorted(g.group_id for g in self._source.list_groups() if self._wanted(g.group_id))

    def task_class(self):
        return MirrorCheckpointTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        groups = self._watcher.current if self._watcher else []
        if not groups or not self.config["emit.checkpoints.enabled"]:
            return []
        count = max(1, min(max_tasks, len(groups)))
        return [{**self._props, "task.assigned.groups": ",".join(groups[i::count])} for i in range(count)]


class MirrorCheckpointTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self._stopping = threading.Event()
        self._clients: list[Any] = []
        self._emitted: dict[tuple[str, str, int], Checkpoint] = {}

    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        self.config = config = parse(props)
        self.groups = config["task.assigned.groups"]
        self.alias = config["source.cluster.alias"]
        self.policy = ReplicationPolicy(config["replication.policy.separator"])
        self.checkpoints_topic = self.policy.checkpoints_topic(self.alias)
        source_config = cluster_client_config(props, "source")
        self._source = Admin(source_config)
        self._target = Admin(cluster_client_config(props, "target"))
        self._syncs = OffsetSyncStore(
            source_config, self.policy.offset_syncs_topic(config["target.cluster.alias"])
        )
        self._clients = [self._source, self._target, self._syncs]
        self._topics = TopicSync(config, self._source, self._target)
        self._next_emit = 0.0
        self._next_group_sync = 0.0
        self._stopping.clear()

    def poll(self) -> list[SourceRecord] | None:
        wait = self._next_emit - time.monotonic()
        if wait > 0:
            self._stopping.wait(min(wait, 1.0))  # return now and then so the worker can pause or stop us
            return None
        self._next_emit = time.monotonic() + self.config["emit.checkpoints.interval.seconds"]
        self._syncs.refresh()
        checkpoints = [cp for group in self.groups for cp in self.checkpoints(group)]
        if self.config["sync.group.offsets.enabled"] and time.monotonic() >= self._next_group_sync:
            self._next_group_sync = time.monotonic() + self.config["sync.group.offsets.interval.seconds"]
            self.sync_group_offsets(checkpoints)
        fresh = [cp for cp in checkpoints if self._emitted.get((cp.group, cp.topic, cp.partition)) != cp]
        for cp in fresh:
            self._emitted[cp.group, cp.topic, cp.partition] = cp
        return [
            SourceRecord(
                topic=self.checkpoints_topic,
                kafka_partition=0,
                key_schema=BYTES,
                key=cp.key(),
                value_schema=BYTES,
                value=cp.value(),
                source_partition={"group": cp.group, "topic": cp.topic, "partition": cp.partition},
                source_offset={"offset": 0},
            )
            for cp in fresh
        ] or None

    def checkpoints(self, group: str) -> list[Checkpoint]:
        """The group's committed source offsets, translated (those that can be)."""
        out = []
        for tp, committed in sorted(self._source.list_group_offsets(group).items()):
            if not self._topics.mirrored(tp.topic):
                continue
            downstream = self._syncs.translate(tp.topic, tp.partition, committed.offset)
            if downstream is None:
                continue
            remote = self.policy.format_remote_topic(self.alias, tp.topic)
            out.append(
                Checkpoint(
                    group, remote, tp.partition, committed.offset, downstream, committed.metadata or ""
                )
            )
        return out

    def sync_group_offsets(self, checkpoints: list[Checkpoint]) -> None:
        by_group: dict[str, list[Checkpoint]] = {}
        for cp in checkpoints:
            by_group.setdefault(cp.group, []).append(cp)
        for group, cps in by_group.items():
            try:
                state = self._target.describe_groups([group]).get(group)
                if state is not None and state.state not in IDLE_STATES:
                    log.debug(
                        "mirror: group %s is active on the target (%s); not syncing", group, state.state
                    )
                    continue
                current = self._target.list_group_offsets(group)
                moves = {}
                for cp in cps:
                    tp = TopicPartition(cp.topic, cp.partition)
                    have = current.get(tp)
                    if have is None or have.offset < cp.downstream_offset:
                        moves[tp] = cp.downstream_offset
                if moves:
                    self._target.alter_group_offsets(group, moves)
                    log.info("mirror: group %s on the target now at %s", group, moves)
            except Exception:  # noqa: BLE001 - one group's failure must not stop the others
                log.warning("mirror: syncing offsets of group %s failed", group, exc_info=True)

    def stop(self) -> None:
        self._stopping.set()
        for client in self._clients:
            client.close()
        self._clients = []
