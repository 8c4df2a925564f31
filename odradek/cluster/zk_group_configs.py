"""Group configs in cluster mode, under Odradek's own znodes.

Kafka keeps group configs (KIP-848, KIP-932: ``consumer.session.timeout.ms``,
``share.auto.offset.reset`` ...) as ConfigRecords in its KRaft metadata log only; ZooKeeper
mode has no place for them. Odradek keeps them in ZooKeeper the way Kafka keeps topic
configs: one znode per group, ``/odradek/config/groups/<sanitized group id>`` holding
``{"version": 1, "config": {...}}``, and after each write a ``/config/changes`` notification
whose ``entity_path`` is ``odradek-groups/<sanitized group id>``, which every broker's config
change watch hands back here to re-read that group. A group without overrides has no znode.

Every broker reads all of them when it starts, so lookups are in memory (and synchronous).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.cluster import zk_data
from odradek.cluster.zk_client import NoNodeError, ZkClient

log = logging.getLogger(__name__)

GROUP_CONFIGS_PATH = "/odradek/config/groups"
GROUP_CONFIG_CHANGE = "odradek-groups"  # the entity type in /config/changes notifications


def group_config_path(group_id: str) -> str:
    return f"{GROUP_CONFIGS_PATH}/{zk_data.sanitize(group_id)}"


class ZkGroupConfigs:
    """The groups' config overrides of one broker, as ZooKeeper has them."""

    def __init__(self, zk: ZkClient, read_config: Callable[[str], Awaitable[dict[str, str]]]):
        self.zk = zk
        self._read_config = read_config  # the store's reading of a config znode
        self.configs: dict[str, dict[str, str]] = {}
        self._writing = asyncio.Lock()  # one write at a time, so that the last one wins

    async def load(self) -> None:
        try:
            children = await self.zk.get_children(GROUP_CONFIGS_PATH)
        except NoNodeError:
            return
        for child in children:
            group_id = zk_data.desanitize(child)
            self._keep(group_id, await self._read(group_id))

    async def reload(self, sanitized: str) -> str:
        """A change notification for ``sanitized``: re-read it; returns the group id."""
        group_id = zk_data.desanitize(sanitized)
        self._keep(group_id, await self._read(group_id))
        return group_id

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self.configs.get(group_id, {}))

    def set_local(self, group_id: str, configs: dict[str, str]) -> None:
        self._keep(group_id, dict(configs))

    async def write(self, group_id: str) -> None:
        """The group's configs as this broker has them now, in Kafka's order for entity configs:
        the znode (deleted when empty), then a notification."""
        async with self._writing:
            await self._write(group_id, self.get(group_id))

    async def _write(self, group_id: str, configs: dict[str, str]) -> None:
        path = group_config_path(group_id)
        if configs:
            data = zk_data.encode_entity_config(configs)
            try:
                await self.zk.set(path, data)
            except NoNodeError:
                await self.zk.create(path, data, makepath=True)
        else:
            try:
                await self.zk.delete(path)
            except NoNodeError:
                pass
        await self.zk.create(
            zk_data.config_change_path(),
            zk_data.encode_config_change(f"{GROUP_CONFIG_CHANGE}/{zk_data.sanitize(group_id)}"),
            sequential=True,
        )

    def _keep(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self.configs[group_id] = configs
        else:
            self.configs.pop(group_id, None)

    async def _read(self, group_id: str) -> dict[str, str]:
        return await self._read_config(group_config_path(group_id))
