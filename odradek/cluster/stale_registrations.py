"""Clearing the registrations of brokers known to be dead, for whoever runs the brokers.

A broker killed with -9 leaves ``/brokers/ids/<id>`` (and ``/controller``, if it was the
controller) in ZooKeeper until its session expires. ``odradek cluster up`` knows better than
ZooKeeper: it saw the process exit, or it has just started the ZooKeeper itself and runs no
broker yet (ZooKeeper restores the old sessions with a fresh clock, so they would outlive every
quick retry). ``clear_stale_registrations`` deletes those ephemeral znodes so the broker can
register again at once; the controller sees the broker leave and come back, as after a session
expiry. A znode is deleted only if its session is not one that a live broker's registration
holds, and only at the version read (so a registration made meanwhile stays).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from odradek.cluster import zk_data
from odradek.cluster.zk_client import BadVersionError, NoNodeError, ZkClient


@dataclass
class ClearedRegistrations:
    """What was deleted: broker ids, whether ``/controller`` went too, and the dead sessions."""

    broker_ids: list[int] = field(default_factory=list)
    controller: bool = False
    sessions: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.broker_ids or self.controller)

    def describe(self) -> str:
        """``brokers 1, 2 and /controller (ZooKeeper sessions 0x…, 0x…)``."""
        what = []
        if self.broker_ids:
            noun = "broker" if len(self.broker_ids) == 1 else "brokers"
            what.append(f"{noun} {', '.join(map(str, sorted(self.broker_ids)))}")
        if self.controller:
            what.append("/controller")
        noun = "session" if len(self.sessions) == 1 else "sessions"
        sessions = ", ".join(f"0x{s:x}" for s in sorted(self.sessions))
        return f"{' and '.join(what)} (ZooKeeper {noun} {sessions})"


async def clear_stale_registrations(
    zookeeper_connect: str, dead_ids: Collection[int] | None, timeout_ms: int = 10_000
) -> ClearedRegistrations:
    """Delete the registrations of ``dead_ids`` (None: of every registered broker, when no
    broker of this cluster runs) and ``/controller`` if one of their sessions holds it."""
    cleared = ClearedRegistrations()
    zk = ZkClient(zookeeper_connect, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    await zk.start()
    try:
        try:
            registered = {int(child) for child in await zk.get_children(zk_data.BROKER_IDS_PATH)}
        except NoNodeError:
            return cleared
        owners = {}
        for broker_id in registered:
            stat = await zk.exists(zk_data.broker_path(broker_id))
            if stat is not None and stat.ephemeral_owner:
                owners[broker_id] = stat
        dead = set(owners) if dead_ids is None else set(owners) & set(dead_ids)
        live_sessions = {stat.ephemeral_owner for broker_id, stat in owners.items() if broker_id not in dead}
        for broker_id in sorted(dead):
            stat = owners[broker_id]
            if stat.ephemeral_owner in live_sessions:
                continue
            if await _delete(zk, zk_data.broker_path(broker_id), stat.version):
                cleared.broker_ids.append(broker_id)
                cleared.sessions.add(stat.ephemeral_owner)
        controller = await zk.exists(zk_data.CONTROLLER_PATH)
        if controller is not None and controller.ephemeral_owner in cleared.sessions:
            cleared.controller = await _delete(zk, zk_data.CONTROLLER_PATH, controller.version)
    finally:
        await zk.close()
    return cleared


async def _delete(zk: ZkClient, path: str, version: int) -> bool:
    try:
        await zk.delete(path, version=version)
    except (NoNodeError, BadVersionError):  # gone, or replaced by a live registration meanwhile
        return False
    return True
