"""A leader records a new ISR in ZooKeeper (Kafka's ZooKeeper-mode Partition.updateIsr).

``IsrUpdater.write`` replaces the partition's state znode only if it is still at the
version this leader knows (the controller may have moved leadership meanwhile: then the
write fails with ``BadVersionError`` and the leader waits for its LeaderAndIsr), and
queues the partition for an ``/isr_change_notification/isr_change_<seq>`` znode, which the
controller watches to send UpdateMetadata. Notifications are batched: one znode per
``NOTIFY_DELAY_S`` for every partition changed meanwhile (Kafka batches them too).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.cluster import zk_data
from odradek.cluster.partitions import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition

log = logging.getLogger(__name__)

NOTIFY_DELAY_S = 0.05


class IsrUpdater:
    def __init__(self, zk):
        self.zk = zk  # a started cluster.zk_client.ZkClient
        self._pending: set[TopicPartition] = set()
        self._notifier: asyncio.Task | None = None

    async def write(
        self, topic: str, index: int, leader: int, leader_epoch: int, isr: list[int], controller_epoch: int,
        zk_version: int,
    ) -> int:
        """Write the new ISR; returns the znode's new version. Raises the ZkClient's
        ``BadVersionError`` when the state changed under this leader."""
        tp = TopicPartition(topic, index)
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, leader_epoch, tuple(isr)), controller_epoch)
        stat = await self.zk.set(
            zk_data.partition_state_path(tp), zk_data.encode_partition_state(state), version=zk_version
        )
        self._pending.add(tp)
        if self._notifier is None or self._notifier.done():
            self._notifier = asyncio.get_running_loop().create_task(self._notify(), name="isr-change-notify")
        return stat.version

    async def _notify(self) -> None:
        # Until nothing is left: changes made while a notification was being written wait
        # for the next round (a chaos run lost such changes when this task wrote only once).
        while self._pending:
            await asyncio.sleep(NOTIFY_DELAY_S)
            changed, self._pending = self._pending, set()
            try:
                await self.zk.create(
                    zk_data.isr_change_path(), zk_data.encode_isr_change(changed), sequential=True, makepath=True
                )
            except Exception as exc:  # the controller re-reads states on failover anyway
                log.warning("could not write an ISR change notification for %d partitions: %s", len(changed), exc)

    async def close(self) -> None:
        task = self._notifier
        if task is not None and not task.done():
            await task
