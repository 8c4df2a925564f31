"""A broker's metadata in cluster mode: the image the controller keeps it told of (Kafka's
ZooKeeper-mode MetadataCache), plus the configs and producer ids it reads from ZooKeeper.

The image (``MetadataImage``) is what every handler reads, as on a single node. Here it
changes only when the controller says so: UpdateMetadata replaces the live brokers and the
partitions it names (a partition whose leader is -2 is being deleted and leaves the image).
Topic configs are read from
``/config/topics/<topic>`` the first time a topic appears (and again on a config change
notification); broker configs from ``/config/brokers/<id>`` and ``/config/brokers/<default>``.
Producer ids come in blocks claimed from ``/latest_producer_id_block`` with a conditional
write, one spare block kept ahead so that a sync caller never waits on ZooKeeper.

Topic creation, deletion and new partitions do not go through here: they are ZooKeeper
writes the controller reacts to (``topic_admin``). Every method runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from odradek.cluster import zk_data
from odradek.cluster.controller import INTERNAL_TOPICS
from odradek.cluster.metadata_image import BrokerInfo, MetadataImage, PartitionState, TopicInfo
from odradek.cluster.store import MetadataStore
from odradek.cluster.zk_client import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZooKeeperError
from odradek.cluster.zk_group_configs import GROUP_CONFIG_CHANGE, ZkGroupConfigs
from odradek.cluster.zk_security_store import QUOTA_ENTITY_TYPES, ZkSecurityStore
from odradek.protocol import errors

_NOT_IN_ZOOKEEPER = "{what} are not kept in ZooKeeper: Kafka keeps them only in KRaft mode (a single broker can)"

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2


class ZkMetadataStore(MetadataStore):
    def __init__(self, zk: ZkClient, cluster_id: str, node: BrokerInfo, listener_name: str):
        self.zk = zk
        self.node = node
        self.listener_name = listener_name
        self.image = MetadataImage(cluster_id=cluster_id, controller_id=-1, brokers={node.node_id: node})
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._pid_blocks: deque[tuple[int, int]] = deque()
        self._pid_task: asyncio.Task | None = None
        self._changed = asyncio.Event()
        self._background: set[asyncio.Task] = set()
        self._group_configs = ZkGroupConfigs(zk, self._read_config_znode)
        self.security = ZkSecurityStore(zk, self._spawn)  # ACLs, SCRAM credentials, quotas

    # -- start ---------------------------------------------------------------------------

    async def load(self) -> None:
        """Read what a starting broker needs before serving: its dynamic configs, the ACLs, SCRAM
        credentials and quotas, and a block of producer ids."""
        for entity in (str(self.node.node_id), zk_data.DEFAULT_ENTITY):
            self._broker_configs[entity] = await self._read_config(zk_data.BROKER_CONFIG, entity)
        await self.security.load()
        self._pid_blocks.append(await self._claim_producer_id_block(zk_data.PRODUCER_ID_BLOCK_SIZE))
        await self._group_configs.load()

    async def _read_config(self, entity_type: str, name: str) -> dict[str, str]:
        return await self._read_config_znode(zk_data.entity_config_path(entity_type, name))

    async def _read_config_znode(self, path: str) -> dict[str, str]:
        """A config znode's configs ({} when it is missing or unreadable, with a warning)."""
        try:
            data, _ = await self.zk.get(path)
        except NoNodeError:
            return {}
        try:
            return zk_data.decode_entity_config(data, path)
        except zk_data.ZkDataError as exc:
            log.warning("ignoring %s: %s", path, exc)
            return {}

    async def reload_config(self, entity_path: str) -> tuple[str, str] | None:
        """A config change notification named ``entity_path`` (``topics/orders``): re-read it.
        Returns (entity type, name) when it is one this broker keeps."""
        entity_type, _, name = entity_path.partition("/")
        if entity_type == GROUP_CONFIG_CHANGE:
            return entity_type, await self._group_configs.reload(name)
        if entity_type == zk_data.TOPIC_CONFIG:
            configs = await self._read_config(zk_data.TOPIC_CONFIG, name)
            self._topic_configs[name] = configs
            topic = self.image.topics.get(name)
            if topic is not None:
                topic.configs = dict(configs)
            return entity_type, name
        if entity_type == zk_data.BROKER_CONFIG and name in self._broker_configs:
            self._broker_configs[name] = await self._read_config(zk_data.BROKER_CONFIG, name)
            return entity_type, name
        if entity_type in QUOTA_ENTITY_TYPES:  # users/<u>, users/<u>/clients/<c>, clients/<c>, ips/<ip>
            await self.security.reload_entity(entity_path)
            return entity_type, name
        return None

    # -- what the controller says ---------------------------------------------------------

    async def topic_configs(self, topic: str) -> dict[str, str]:
        if topic not in self._topic_configs:
            self._topic_configs[topic] = await self._read_config(zk_data.TOPIC_CONFIG, topic)
        return self._topic_configs[topic]

    async def apply_update_metadata(self, request) -> dict[str, str]:
        """Take an UpdateMetadata; returns {topic: "created"/"deleted"/"partitions"} for topics
        whose partitions changed."""
        image = self.image
        brokers = {}
        for b in request.live_brokers:
            endpoint = next((e for e in b.endpoints if e.listener == self.listener_name), None)
            endpoint = endpoint or (b.endpoints[0] if b.endpoints else None)
            if endpoint is not None:
                endpoints = {e.listener: (e.host, e.port) for e in b.endpoints}
                brokers[b.id] = BrokerInfo(b.id, endpoint.host, endpoint.port, b.rack, endpoints)
        image.brokers = brokers
        image.controller_id = request.controller_id
        changed: dict[str, str] = {}
        for t in request.topic_states:
            topic = image.topics.get(t.topic_name)
            for ps in t.partition_states:
                if ps.leader == LEADER_DURING_DELETE:
                    if topic is not None and topic.partitions.pop(ps.partition_index, None) is not None:
                        changed[t.topic_name] = "partitions"
                    continue
                if topic is None:
                    topic = await self._new_topic(t.topic_name, t.topic_id)
                    changed[t.topic_name] = "created"
                state = _state(ps.leader, ps.leader_epoch, ps.replicas, ps.isr, ps.zk_version)
                state.offline = [int(r) for r in ps.offline_replicas]
                if ps.partition_index not in topic.partitions:
                    changed.setdefault(t.topic_name, "partitions")
                topic.partitions[ps.partition_index] = state
            if topic is not None and not topic.partitions:
                image.topics.pop(t.topic_name, None)
                self._topic_configs.pop(t.topic_name, None)
                changed[t.topic_name] = "deleted"
        self._notify()
        return changed

    def known_topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's configs if already read (``topic_configs``), else none."""
        return dict(self._topic_configs.get(topic, {}))

    async def _new_topic(self, name: str, topic_id) -> TopicInfo:
        configs = await self.topic_configs(name)
        topic = self.image.topics.get(name)  # another request may have added it meanwhile
        if topic is None:
            topic = TopicInfo(name, topic_id, {}, dict(configs), name in INTERNAL_TOPICS)
            self.image.topics[name] = topic
        return topic

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate, timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds after some metadata change (or now); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True

    # -- MetadataStore ---------------------------------------------------------------------

    def create_topic(self, name, partitions, replicas, configs, internal=False) -> TopicInfo:
        raise RuntimeError("in cluster mode topics are created through the controller (topic_admin)")

    def delete_topic(self, name) -> TopicInfo:
        raise RuntimeError("in cluster mode topics are deleted through the controller (topic_admin)")

    def add_partitions(self, name, assignments) -> TopicInfo:
        raise RuntimeError("in cluster mode partitions are added through the controller (topic_admin)")

    def set_topic_configs(self, name, configs) -> None:
        topic = self.image.topics.get(name)
        if topic is not None:
            topic.configs = dict(configs)
        self._topic_configs[name] = dict(configs)
        self._spawn(self._write_config(zk_data.TOPIC_CONFIG, name, configs))

    def broker_configs(self, entity) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}))

    def set_broker_configs(self, entity, configs) -> None:
        self._broker_configs[entity] = dict(configs)
        self._spawn(self._write_config(zk_data.BROKER_CONFIG, entity, configs))

    def update_partition(self, topic, partition, state: PartitionState) -> None:
        self.image.topics[topic].partitions[partition] = state

    # -- group configs (KRaft-only in Kafka; Odradek's own znodes: zk_group_configs.py) -----

    def group_configs(self, group_id) -> dict[str, str]:
        return self._group_configs.get(group_id)

    def set_group_configs(self, group_id, configs) -> None:
        self._group_configs.set_local(group_id, configs)
        self._spawn(self._group_configs.write(group_id))

    # -- security and quota state are not kept in ZooKeeper yet ------------------------------
    # (zk_security_data.py has the layout): a cluster has none, and changes are refused with a
    # message instead of being lost.
    def scram_credentials(self, user) -> dict[str, str]:
        return self.security.scram_credentials(user)

    def scram_users(self) -> dict[str, dict[str, str]]:
        return self.security.scram_users()

    def set_scram_credential(self, user, mechanism, credential) -> None:
        self.security.set_scram_credential(user, mechanism, credential)

    def acls(self) -> list[dict]:
        return self.security.acls()

    def set_acls(self, acls) -> None:
        self.security.set_acls(acls)

    async def refresh_acls(self, filters) -> None:
        await self.security.refresh_acls(filters)

    async def refresh_users(self, users) -> None:
        for user in filter(None, users):  # an empty name is refused by the caller
            await self.security.reload_entity(zk_data.config_entity_path(zk_data.USER_CONFIG, user))

    def client_quotas(self) -> list[tuple[dict, dict]]:
        return self.security.client_quotas()

    def set_client_quota(self, entity, changes) -> None:
        self.security.set_client_quota(entity, changes)

    async def written(self) -> bool:
        """Wait for the ZooKeeper writes started so far; False if one of them failed."""
        results = await asyncio.gather(*list(self._background), return_exceptions=True)
        return not any(isinstance(r, BaseException) for r in results)

    def reserve_producer_id_block(self, size) -> int:
        if not self._pid_blocks:
            self._fetch_producer_ids()
            raise errors.CoordinatorLoadInProgressError("claiming a block of producer ids from ZooKeeper; retry")
        first, last = self._pid_blocks.popleft()
        if last - first + 1 < size:
            raise errors.UnknownServerErrorError(f"producer id block {first}..{last} is smaller than {size}")
        self._fetch_producer_ids()
        return first

    # -- ZooKeeper writes --------------------------------------------------------------------

    async def _write_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Kafka's order: the entity's znode, then a change notification for the other brokers."""
        path = zk_data.entity_config_path(entity_type, name)
        data = zk_data.encode_entity_config(configs)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)
        await self.zk.create(
            zk_data.config_change_path(),
            zk_data.encode_config_change(zk_data.config_entity_path(entity_type, name)),
            sequential=True,
        )

    def _fetch_producer_ids(self) -> None:
        if self._pid_task is None or self._pid_task.done():
            self._pid_task = self._spawn(self._fetch_block())

    async def _fetch_block(self) -> None:
        self._pid_blocks.append(await self._claim_producer_id_block(zk_data.PRODUCER_ID_BLOCK_SIZE))

    async def _claim_producer_id_block(self, size: int) -> tuple[int, int]:
        """Kafka's ZkProducerIdManager: the block after the last one handed out, claimed with a
        write conditional on the znode's version (another broker claiming at once retries)."""
        while True:
            try:
                data, stat = await self.zk.get(zk_data.PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                await self.zk.ensure_path(zk_data.PRODUCER_ID_BLOCK_PATH)
                continue
            first = zk_data.decode_producer_id_block(data).last_producer_id + 1 if data else 0
            block = zk_data.ProducerIdBlock(self.node.node_id, first, first + size - 1)
            try:
                await self.zk.set(zk_data.PRODUCER_ID_BLOCK_PATH, zk_data.encode_producer_id_block(block), version=stat.version)
                return block.first_producer_id, block.last_producer_id
            except (BadVersionError, NodeExistsError):
                continue

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if isinstance(exc, ZooKeeperError):
                log.warning("a ZooKeeper write failed: %s", exc)
            else:
                log.error("a ZooKeeper write failed", exc_info=exc)

    async def close(self) -> None:
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.security.close()


def _state(leader: int, leader_epoch: int, replicas, isr, partition_epoch: int) -> PartitionState:
    return PartitionState(int(leader), int(leader_epoch), [int(r) for r in replicas], [int(r) for r in isr], int(partition_epoch))
