"""Sequential change notifications in ZooKeeper, read in order (Kafka's
ZkNodeChangeNotificationListener).

A writer changes some znodes and then creates ``<path>/<prefix><seq>`` naming what it changed
(``/config/changes/config_change_0000000003`` → ``users/alice``, ``/kafka-acl-changes/
acl_changes_0000000007`` → ``TOPIC:orders``). Every broker keeps a child watch on ``<path>``
and, when it fires, hands each notification newer than the last one it handled to
``on_notification(data)``, oldest first.

``start()`` takes what is already there as handled (the caller reads the current state right
after it, so nothing written in between is lost: it is read then and notified again).
Notifications older than ``expiry_s`` are deleted as they are seen, as Kafka does after 15
minutes, so the paths do not grow forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from odradek.cluster import zk_data
from odradek.cluster.zk_client import NoNodeError, ZkClient, ZooKeeperError

log = logging.getLogger(__name__)

EXPIRY_S = 15 * 60  # Kafka's changeExpirationMs


class NotificationListener:
    def __init__(
        self,
        zk: ZkClient,
        path: str,
        prefix: str,
        on_notification: Callable[[bytes], object],
        expiry_s: float = EXPIRY_S,
    ):
        self.zk = zk
        self.path = path
        self.prefix = prefix
        self.on_notification = on_notification  # may return a coroutine, awaited in order
        self.expiry_s = expiry_s
        self.last_seen: int | None = None

    async def start(self) -> None:
        """Watch ``path`` and take every notification already there as handled."""
        await self.zk.ensure_path(self.path)
        numbered = self._numbered(await self.zk.get_children(self.path, watch=True))
        self.last_seen = max((n for n, _ in numbered), default=-1)  # ZooKeeper's first is number 0

    async def poll(self) -> None:
        """The watch fired (or a reconnect): handle what is new, oldest first, and watch again."""
        if self.last_seen is None:
            await self.start()
            return
        for number, child in sorted(self._numbered(await self.zk.get_children(self.path, watch=True))):
            if number <= self.last_seen:
                continue
            self.last_seen = number
            node = f"{self.path}/{child}"
            try:
                data, stat = await self.zk.get(node)
            except NoNodeError:
                continue
            result = self.on_notification(data)
            if asyncio.iscoroutine(result):
                await result
            if stat.ctime_ms and time.time() * 1000 - stat.ctime_ms > self.expiry_s * 1000:
                await self._delete(node)

    async def _delete(self, node: str) -> None:
        try:
            await self.zk.delete(node)
        except (NoNodeError, ZooKeeperError):
            pass  # another broker purged it first

    def _numbered(self, children: list[str]) -> list[tuple[int, str]]:
        numbered = []
        for child in children:
            try:
                numbered.append((int(zk_data.sequence_number(child, self.prefix)), child))
            except (zk_data.ZkDataError, ValueError):
                log.debug("ignoring %s/%s: not a %s<sequence> notification", self.path, child, self.prefix)
        return numbered
