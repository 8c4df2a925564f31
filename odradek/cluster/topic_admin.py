"""Topic creation, deletion and new partitions in cluster mode: ZooKeeper writes the
controller reacts to (Kafka's ZooKeeper-mode AdminManager and AdminZkClient).

The same checks as on a single node (``Controller.plan_topic`` / ``plan_partitions``), with
Kafka's rack-aware replica placement over the live brokers of the metadata image. Then:

* create: ``/config/topics/<t>`` and ``/brokers/topics/<t>`` (the assignment, with a new topic
  id); an existing znode is TOPIC_ALREADY_EXISTS (also while a deletion of that name runs);
* delete: ``/admin/delete_topics/<t>``;
* new partitions: ``/brokers/topics/<t>`` rewritten, conditional on its version.

The controller sees the change through its watches, elects leaders and tells the brokers;
the ``*_and_wait`` forms (the admin APIs) wait until this broker's metadata shows the
result, as Kafka's delayed CreateTopics/DeleteTopics/CreatePartitions do. The plain forms
(auto-creation from Metadata, the coordinators' internal topics) start the write and
return at once: the client asks again, as with Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from odradek.cluster import assignment as placement
from odradek.cluster import zk_data
from odradek.cluster.controller import Controller
from odradek.cluster.metadata_image import TopicInfo
from odradek.cluster.partitions import ReplicaAssignment
from odradek.cluster.zk_client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    SessionState,
    ZooKeeperError,
)
from odradek.protocol import errors

log = logging.getLogger(__name__)


class ClusterTopicAdmin(Controller):
    def __init__(self, store, *, zk, nudge_controller, **kwargs):
        super().__init__(store, **kwargs)
        self.zk = zk
        self.nudge_controller = nudge_controller  # () -> None: tell our own controller (if active) to look now
        self._background: set[asyncio.Task] = set()

    # -- placement: Kafka's algorithm, rack-aware ------------------------------------------

    def _brokers(self, mode=placement.RackAwareMode.ENFORCED):
        return placement.brokers_for_assignment({b.node_id: b.rack for b in self.image.brokers.values()}, mode)

    def _assign(self, partitions: range, replication_factor: int) -> dict[int, list[int]]:
        brokers = self._brokers()
        if replication_factor > len(brokers):
            raise errors.InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the {len(brokers)} live brokers"
            )
        return placement.assign_replicas(
            brokers, len(partitions), replication_factor, start_partition_id=partitions.start
        )

    def _assign_more(self, topic: TopicInfo, count: int, replication_factor: int) -> dict[int, list[int]]:
        existing = {p: s.replicas for p, s in topic.partitions.items()}
        return placement.assign_new_partitions(self._brokers(), existing, count, topic=topic.name)

    # -- the forms that return at once --------------------------------------------------------

    def create_topic(
        self, name, num_partitions=-1, replication_factor=-1, assignments=None, configs=None, *, validate_only=False, internal=False
    ):
        assignments, configs = self.plan_topic(
            name, num_partitions, replication_factor, assignments, configs, internal=internal
        )
        if not validate_only:
            self._spawn(self._write_topic(name, assignments, configs), f"create topic {name}")
        return None

    def delete_topic(self, name: str) -> None:
        self._check_deletable(name)
        self._spawn(self._write_deletion(name), f"delete topic {name}")

    def create_partitions(self, name, count, assignments=None, *, validate_only=False) -> None:
        new = self.plan_partitions(name, count, assignments)
        if not validate_only:
            self._spawn(self._write_partitions(name, new), f"add partitions to {name}")

    # -- the admin APIs: write, then wait for the metadata ------------------------------------

    async def create_topic_and_wait(
        self, name, num_partitions, replication_factor, assignments, configs, *, validate_only, timeout_s
    ) -> TopicInfo | None:
        assignments, configs = self.plan_topic(name, num_partitions, replication_factor, assignments, configs)
        if validate_only:
            return None
        await self._write_topic(name, assignments, configs)
        count = len(assignments)
        if not await self.store.wait_until(lambda: _has_leaders(self.image.topics.get(name), count), timeout_s):
            raise errors.RequestTimedOutError(
                f"topic '{name}' was created, but its leaders were not known within {timeout_s * 1000:.0f} ms"
            )
        return self.image.topics[name]

    async def delete_topic_and_wait(self, name: str, timeout_s: float) -> None:
        self._check_deletable(name)
        await self._write_deletion(name)
        if not await self.store.wait_until(lambda: name not in self.image.topics, timeout_s):
            raise errors.RequestTimedOutError(
                f"deletion of topic '{name}' started, but did not finish within {timeout_s * 1000:.0f} ms"
            )

    async def create_partitions_and_wait(self, name, count, assignments, *, validate_only, timeout_s) -> None:
        new = self.plan_partitions(name, count, assignments)
        if validate_only:
            return
        await self._write_partitions(name, new)
        if not await self.store.wait_until(lambda: _has_leaders(self.image.topics.get(name), count), timeout_s):
            raise errors.RequestTimedOutError(
                f"partitions were added to '{name}', but their leaders were not known within {timeout_s * 1000:.0f} ms"
            )

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        super().alter_topic_configs(name, configs, validate_only=validate_only)  # the store writes ZooKeeper

    # -- ZooKeeper writes ---------------------------------------------------------------------

    def _check_deletable(self, name: str) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        if topic.internal:
            raise errors.InvalidRequestError(f"internal topic '{name}' cannot be deleted")

    async def _write_topic(self, name: str, assignments: dict[int, list[int]], configs: dict[str, str]) -> None:
        config_path = zk_data.entity_config_path(zk_data.TOPIC_CONFIG, name)
        if await self.zk.exists(zk_data.delete_topic_path(name)) is not None:
            raise errors.TopicAlreadyExistsError(f"topic '{name}' is marked for deletion")  # as Kafka answers
        try:
            await self.zk.create(config_path, zk_data.encode_entity_config(configs))
        except NodeExistsError:
            if await self.zk.exists(zk_data.topic_path(name)) is not None:
                raise errors.TopicAlreadyExistsError(f"topic '{name}' already exists") from None
            try:  # a config left behind, e.g. by a deletion finishing right now
                await self.zk.set(config_path, zk_data.encode_entity_config(configs))
            except NoNodeError:  # that deletion removed it meanwhile
                await self.zk.create(config_path, zk_data.encode_entity_config(configs))
        data = zk_data.encode_topic_assignment(
            uuid.uuid4(), {p: ReplicaAssignment(r) for p, r in assignments.items()}
        )
        try:
            await self.zk.create(zk_data.topic_path(name), data)
        except NodeExistsError:
            raise errors.TopicAlreadyExistsError(
                f"topic '{name}' already exists (or is being deleted)"
            ) from None
        log.info("topic %s written to ZooKeeper: %d partitions, replicas %s", name, len(assignments), _short(assignments))
        self.nudge_controller()

    async def _write_deletion(self, name: str) -> None:
        try:
            await self.zk.create(zk_data.delete_topic_path(name))
        except NodeExistsError:
            pass  # already asked
        self.nudge_controller()

    async def _write_partitions(self, name: str, new: dict[int, list[int]]) -> None:
        try:
            data, stat = await self.zk.get(zk_data.topic_path(name))
        except NoNodeError:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist") from None
        current = zk_data.decode_topic_assignment(name, data)
        if any(a.is_being_reassigned for a in current.partitions.values()):
            raise errors.ReassignmentInProgressError(f"a reassignment of '{name}' is in progress; retry when it ends")
        if set(new) & set(current.partitions):
            raise errors.InvalidPartitionsError(f"topic '{name}' changed meanwhile; retry")
        partitions = dict(current.partitions)
        partitions.update({p: ReplicaAssignment(r) for p, r in new.items()})
        try:
            await self.zk.set(
                zk_data.topic_path(name), zk_data.encode_topic_assignment(current.topic_id, partitions), version=stat.version
            )
        except BadVersionError:
            raise errors.InvalidPartitionsError(f"topic '{name}' changed meanwhile; retry") from None
        self.nudge_controller()

    def _spawn(self, coro, what: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        self._background.add(task)

        def done(t: asyncio.Task) -> None:
            self._background.discard(t)
            if t.cancelled():
                return
            exc = t.exception()
            if isinstance(exc, errors.TopicAlreadyExistsError):
                return
            if isinstance(exc, ZooKeeperError) and self.zk.state is not SessionState.CONNECTED:
                log.debug("%s failed while ZooKeeper is unreachable (said once by the cluster node): %s", what, exc)
            elif isinstance(exc, errors.KafkaError | ZooKeeperError):
                log.warning("%s failed: %s", what, exc)
            elif exc is not None:
                log.error("%s failed", what, exc_info=exc)

        task.add_done_callback(done)

    async def close(self) -> None:
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _has_leaders(topic: TopicInfo | None, count: int) -> bool:
    return topic is not None and len(topic.partitions) >= count and all(s.leader >= 0 for s in topic.partitions.values())


def _short(assignments: dict[int, list[int]]) -> str:
    items = [f"{p}:{r}" for p, r in sorted(assignments.items())[:8]]
    return ", ".join(items) + (", ..." if len(assignments) > 8 else "")
