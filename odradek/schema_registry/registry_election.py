"""Electing the one registry instance that writes, through the broker's group protocol.

Theory of operation (Confluent's registry does the same with protocol type ``sr``). Every
instance joins the group ``schema.registry.group.id`` with its identity as metadata
(``{"host","port","scheme","leader_eligibility","version"}``). The group's leader (the
member the coordinator chose) picks the registry leader, the first leader-eligible member
by member id, and hands every member the same assignment ``{"version":1,"error":0,
"leader": member id, "leader_identity": identity}`` (error 1 and no leader when none is
eligible). Heartbeats keep the membership; a rebalance (an instance joined, left or died)
runs the election again. One task owns all of it; ``on_change`` hears every new result.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from odradek._tasks import cancel_and_wait
from odradek.client.client_config import resolve
from odradek.client.client_errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.netclient import NetClient
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode

log = logging.getLogger("odradek.schema_registry")

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
SESSION_TIMEOUT_MS = 10000
HEARTBEAT_S = 1.0
REJOIN = {int(ErrorCode.rebalance_in_progress)}
RESET_MEMBER = {int(ErrorCode.unknown_member_id), int(ErrorCode.illegal_generation)}
COORDINATOR_MOVED = {int(ErrorCode.not_coordinator), int(ErrorCode.coordinator_not_available)}


def choose_leader(members: dict[str, dict]) -> dict:
    """The assignment every member gets: the first eligible member by id leads."""
    eligible = sorted(m for m, ident in members.items() if ident.get("leader_eligibility", True))
    if not eligible:
        return {"version": 1, "error": 1, "leader": None, "leader_identity": None}
    return {"version": 1, "error": 0, "leader": eligible[0], "leader_identity": members[eligible[0]]}


class LeaderElector:
    def __init__(
        self,
        client_options: dict,
        group_id: str,
        identity: dict,
        on_change: Callable[[dict | None, bool], Awaitable[None]],
    ):
        self.group_id = group_id
        self.identity = identity
        self.on_change = on_change
        self.client = NetClient(resolve("admin", None, client_options), "admin")
        self.member_id = ""
        self.generation = -1
        self.coordinator: int | None = None
        self.leader_identity: dict | None = None
        self.is_leader = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.client.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="schema-registry-election")

    async def _coordinator(self) -> int:
        while self.coordinator is None:
            code, node, host, port = await self.client.find_coordinator(0, self.group_id)
            if code:
                await asyncio.sleep(0.5)
                continue
            conn_id = 0x7FFFFFFF - node
            self.client.register_node(conn_id, host, port)
            self.coordinator = conn_id
        return self.coordinator

    async def _call(self, api_key: int, values: dict, timeout: float = 30.0):
        node = await self._coordinator()
        try:
            return await self.client.call(node, api_key, values, timeout=timeout)
        except KafkaConnectionError:
            self.coordinator = None
            raise

    async def _run(self) -> None:
        while True:
            try:
                if await self._join_and_sync():
                    await self._heartbeat_until_rebalance()
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError, ClientClosedError, OSError) as exc:
                log.info("registry election in group %s: %s; retrying", self.group_id, exc)
                await self._set(None)
                await asyncio.sleep(1.0)

    def _handle(self, code: int) -> None:
        if code in RESET_MEMBER:
            self.member_id, self.generation = "", -1
        if code in COORDINATOR_MOVED:
            self.coordinator = None

    async def _join_and_sync(self) -> bool:
        join = await self._call(
            api_keys.JOIN_GROUP,
            {
                "group_id": self.group_id,
                "session_timeout": SESSION_TIMEOUT_MS,
                "rebalance_timeout": SESSION_TIMEOUT_MS,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": PROTOCOL_NAME, "metadata": json.dumps(self.identity).encode()}],
                "reason": None,
            },
            timeout=SESSION_TIMEOUT_MS / 1000 + 10,
        )
        code = int(join.error_code)
        if code == int(ErrorCode.member_id_required):
            self.member_id = join.member_id
            return False
        if code:
            self._handle(code)
            await asyncio.sleep(0.2)
            return False
        self.member_id, self.generation = join.member_id, int(join.generation_id)
        assignments = []
        if join.leader == join.member_id:
            members = {m.member_id: json.loads(bytes(m.metadata) or b"{}") for m in join.members}
            chosen = json.dumps(choose_leader(members)).encode()
            assignments = [{"member_id": m, "assignment": chosen} for m in members]
        sync = await self._call(
            api_keys.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": PROTOCOL_NAME,
                "assignments": assignments,
            },
        )
        code = int(sync.error_code)
        if code:
            self._handle(code)
            return False
        assignment = json.loads(bytes(sync.assignment) or b"{}")
        leader = assignment.get("leader_identity") if not assignment.get("error") else None
        await self._set(leader, assignment.get("leader") == self.member_id)
        return True

    async def _set(self, leader: dict | None, mine: bool = False) -> None:
        if leader == self.leader_identity and mine == self.is_leader:
            return
        self.leader_identity, self.is_leader = leader, mine
        log.info(
            "registry election in group %s: %s",
            self.group_id,
            "this instance leads" if mine else f"the leader is {leader}" if leader else "no eligible leader",
        )
        await self.on_change(leader, mine)

    async def _heartbeat_until_rebalance(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            resp = await self._call(
                api_keys.HEARTBEAT,
                {
                    "group_id": self.group_id,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                },
                timeout=SESSION_TIMEOUT_MS / 1000,
            )
            code = int(resp.error_code)
            if code:
                self._handle(code)
                return

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self.member_id and self.coordinator is not None:
            try:
                await self._call(
                    api_keys.LEAVE_GROUP,
                    {
                        "group_id": self.group_id,
                        "member_id": self.member_id,
                        "members": [{"member_id": self.member_id, "group_instance_id": None, "reason": "closing"}],
                    },
                    timeout=5,
                )
            except Exception as exc:
                log.info("registry election: LeaveGroup failed: %s", exc)
        await self.client.close()
