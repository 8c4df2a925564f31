"""A Connect worker's membership of its ``group.id`` (Kafka's ``WorkerGroupMember``/``WorkerCoordinator``).

The group has protocol type ``connect``; the sub-protocols offered are ``connect.protocol``'s
(``sessioned``, ``compatible``, ``default``), with each worker's metadata (its REST URL, the
config offset it has read, what it runs now). One task: JoinGroup → (leader: ``assign``) →
SyncGroup → ``on_assignment``, then Heartbeat every ``heartbeat.interval.ms`` until the broker
says a rebalance is under way, the member is unknown or ``request_rejoin()`` is called.
Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.client import client_config as config_mod
from odradek.client.client_errors import KafkaConnectionError, KafkaTimeoutError
from odradek.client.netclient import NetClient
from odradek.connect.connect_protocol import (
    PROTOCOLS_OFFERED,
    Assignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, error_for

log = logging.getLogger("odradek.connect")

REJOIN_CODES = {int(ErrorCode.rebalance_in_progress)}
RESET_CODES = {int(ErrorCode.illegal_generation), int(ErrorCode.unknown_member_id),
               int(ErrorCode.fenced_instance_id)}
COORDINATOR_CODES = {int(ErrorCode.not_coordinator), int(ErrorCode.coordinator_not_available),
                     int(ErrorCode.coordinator_load_in_progress)}

JOIN_RETRY_S = 0.2
CONFIG_ERROR_RETRY_S = 10.0  # a worker config the brokers refuse: retried, but without flooding the log

# (protocol, leader member id, members, this round's generation) -> each member's assignment
AssignFn = Callable[[str, str, dict[str, WorkerMetadata], int], dict[str, Assignment]]


class ConnectGroupMember:
    def __init__(self, client_options: dict, group_id: str, settings: dict[str, int], protocol: str,
                 metadata: Callable[[], WorkerMetadata], assign: AssignFn,
                 on_assignment: Callable[[Assignment, int], Awaitable[None]]):
        cfg = config_mod.resolve("consumer", None, client_options)
        self.client = NetClient(cfg, "connect")
        self.group_id = group_id
        self.session_timeout_ms = settings["session.timeout.ms"]
        self.rebalance_timeout_ms = settings["rebalance.timeout.ms"]
        self.heartbeat_s = settings["heartbeat.interval.ms"] / 1000
        self.protocols = PROTOCOLS_OFFERED[protocol]
        self.metadata, self.assign, self.on_assignment = metadata, assign, on_assignment
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.rebalancing = True
        self._coordinator: int | None = None
        self._rejoin = asyncio.Event()
        self._rejoin.set()
        self._retry_s = JOIN_RETRY_S
        self._task: asyncio.Task | None = None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id and not self.rebalancing

    def start(self) -> None:
        self.client.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"connect-group-{self.group_id}")

    def request_rejoin(self) -> None:
        self._rejoin.set()

    async def _coordinator_node(self) -> int:
        while self._coordinator is None:
            try:
                code, node, host, port = await self.client.find_coordinator(0, self.group_id)
                if code:
                    raise KafkaConnectionError(f"FindCoordinator error {code}")
                conn_id = 0x7FFFFFFF - node
                self.client.register_node(conn_id, host, port)
                self._coordinator = conn_id
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("group %s: coordinator lookup failed: %s", self.group_id, exc)
                await asyncio.sleep(0.5)
        return self._coordinator

    async def _call(self, api_key: int, values: dict, timeout: float):
        node = await self._coordinator_node()
        try:
            return await self.client.call(node, api_key, values, timeout=timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._coordinator = None
            raise

    async def _run(self) -> None:
        while True:
            try:
                if self._rejoin.is_set():
                    self._rejoin.clear()
                    self.rebalancing = True
                    if not await self._join():
                        self._rejoin.set()
                        await asyncio.sleep(self._retry_s)
                        continue
                await self._heartbeat()
                try:
                    await asyncio.wait_for(self._rejoin.wait(), self.heartbeat_s)
                except TimeoutError:
                    pass
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.info("group %s: %s; retrying", self.group_id, exc)
                await asyncio.sleep(0.5)
            except Exception:
                log.exception("group %s: membership step failed", self.group_id)
                self._rejoin.set()
                await asyncio.sleep(0.5)

    def _error(self, code: int, what: str) -> None:
        self._retry_s = JOIN_RETRY_S
        if code in RESET_CODES:
            self.member_id, self.generation = "", -1
        if code in COORDINATOR_CODES:
            self._coordinator = None
        if code == int(ErrorCode.invalid_session_timeout):
            log.error("group %s: the brokers refuse session.timeout.ms=%d: set it within their "
                      "group.min.session.timeout.ms and group.max.session.timeout.ms (6000 and 1800000 by "
                      "default)", self.group_id, self.session_timeout_ms)
            self._retry_s = CONFIG_ERROR_RETRY_S
        elif code not in REJOIN_CODES:
            log.warning("group %s: %s answered %s", self.group_id, what, error_for(code).__name__)
        self._rejoin.set()

    async def _heartbeat(self) -> None:
        resp = await self._call(api_keys.HEARTBEAT, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None,
        }, timeout=self.session_timeout_ms / 1000)
        if int(resp.error_code):
            self._error(int(resp.error_code), "Heartbeat")

    async def _join(self) -> bool:
        meta = self.metadata()
        timeout = self.rebalance_timeout_ms / 1000 + 5
        while True:
            resp = await self._call(api_keys.JOIN_GROUP, {
                "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "connect",
                "protocols": [{"name": p, "metadata": encode_metadata(p, meta)} for p in self.protocols],
                "reason": None,
            }, timeout=timeout)
            code = int(resp.error_code)
            if code == int(ErrorCode.member_id_required):
                self.member_id = resp.member_id
                continue
            if code:
                self._error(code, "JoinGroup")
                return False
            break
        self.member_id, generation, protocol = resp.member_id, int(resp.generation_id), resp.protocol_name
        assignments: list[dict] = []
        if resp.leader == self.member_id:
            members = {m.member_id: decode_metadata(m.metadata) for m in resp.members}
            plan = self.assign(protocol, self.member_id, members, generation)
            assignments = [{"member_id": m, "assignment": encode_assignment(protocol, a)} for m, a in plan.items()]
        sync = await self._call(api_keys.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": "connect", "protocol_name": protocol,
            "assignments": assignments,
        }, timeout=timeout)
        if int(sync.error_code):
            self._error(int(sync.error_code), "SyncGroup")
            return False
        assignment = decode_assignment(sync.assignment)
        self.generation, self.leader_id = generation, resp.leader
        self.rebalancing = False
        log.info("group %s: generation %d, member %s%s (protocol %s), assigned %s, revoked %s",
                 self.group_id, generation, self.member_id, " (leader)" if self.is_leader else "", protocol,
                 assignment.assigned, assignment.revoked)
        await self.on_assignment(assignment, generation)
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self.member_id and self._coordinator is not None:
            try:
                await self.client.call(self._coordinator, api_keys.LEAVE_GROUP, {
                    "group_id": self.group_id, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None,
                                 "reason": "the worker is stopping"}],
                }, timeout=5)
            except Exception as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        await self.client.close()
