"""Consumer group membership and offset commits (the client side of the group coordinator).

Theory of operation. ``ConsumerCoordinator`` owns one task; its ``Heartbeat`` owns another.

* The coordinator task finds the group's coordinator (FindCoordinator), and whenever a
  rebalance is needed runs JoinGroup → (leader: run the agreed assignor over everyone's
  subscription) → SyncGroup, then applies the assignment and calls the rebalance
  listener. Between rebalances it auto-commits every ``auto_commit_interval_ms``.
* The heartbeat task sends Heartbeat every ``heartbeat_interval_ms`` while the member is
  stable. Its answers trigger rejoins (REBALANCE_IN_PROGRESS), or reset the membership
  (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: the partitions are *lost*). When ``poll`` has
  not been called for ``max_poll_interval_ms`` the member leaves the group.
* Eager protocol (range, roundrobin, sticky): revoke everything before joining.
  Cooperative protocol (cooperative-sticky, when every configured assignor supports it):
  keep the partitions that stay, revoke only those that move, and rejoin at once when
  something was revoked so the next rebalance can hand it over (KIP-429).
* Closing stops the coordinator task first (nothing may rejoin behind the LeaveGroup),
  then leaves with whatever member id the broker has given, whatever step the join was
  at: from MEMBER_ID_REQUIRED on, the broker holds a member under that id, and one left
  behind would hold every later rebalance of the group until its session times out.
* Static membership (``group_instance_id``, KIP-345): the id goes into every request;
  closing does not send LeaveGroup, so a restart within the session timeout keeps the
  assignment without a rebalance.

Coordinator requests use their own connection (id ``2**31-1-node``, as Kafka's client
does), so heartbeats never queue behind long-polling fetches.

Offset commits and fetches are ``offset_commits.OffsetCommits`` (``self.offsets``), the
heartbeat task ``heartbeat_task.Heartbeat``, the member's states and error-code sets
``member_state``, the subscription and assignment bytes ``consumer_protocol``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek._tasks import cancel_and_wait
from odradek.client.client_errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.consumer.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.client.consumer.heartbeat_task import Heartbeat
from odradek.client.consumer.member_state import (
    COORDINATOR_ERRORS,
    FATAL_JOIN,
    REBALANCING,
    RESET_GENERATION,
    RESET_MEMBER,
    STABLE,
    UNJOINED,
)
from odradek.client.consumer.offset_commits import OffsetCommits
from odradek.client.consumer.subscription import SubscriptionState
from odradek.client.netclient import Backoff, NetClient
from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, KafkaError, error_for

log = logging.getLogger("odradek.client.consumer")


class ConsumerCoordinator:
    def __init__(
        self, client: NetClient, subs: SubscriptionState, config: dict, assignors, run_callback, interceptors
    ):
        self.client = client
        self.subs = subs
        self.group_id = config["group_id"]
        self.instance_id = config["group_instance_id"]
        self.session_timeout_ms = config["session_timeout_ms"]
        self.rebalance_timeout_ms = config["max_poll_interval_ms"]
        self.heartbeat_interval = config["heartbeat_interval_ms"] / 1000
        self.max_poll_interval = config["max_poll_interval_ms"] / 1000
        self.auto_commit = config["enable_auto_commit"] and self.group_id is not None
        self.auto_commit_interval = config["auto_commit_interval_ms"] / 1000
        self.retry_backoff = config["retry_backoff_ms"] / 1000
        self.request_timeout = config["request_timeout_ms"] / 1000
        self.exclude_internal = config["exclude_internal_topics"]
        self.assignors = assignors
        self.protocol_kind = (
            "cooperative"
            if all(getattr(a, "rebalance_protocol", "eager") == "cooperative" for a in assignors)
            else "eager"
        )
        self._run_callback = run_callback
        self.interceptors = interceptors
        self.state = UNJOINED
        self.generation = -1
        self.member_id = ""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.coordinator_id: int | None = None  # connection id of the coordinator
        self._need_rejoin = False
        self._lost = False
        self._fatal: BaseException | None = None
        self._listener_error: BaseException | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._heartbeat = Heartbeat(self)
        self.offsets = OffsetCommits(self)
        self.last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self._assigned_snapshot: dict[str, int] = {}  # leader: partition counts it assigned with
        self._group_topics: set[str] = set()
        self._prev_assignment: set[TopicPartition] = set()
        self.closing = False
        self._unnamed_join: asyncio.Future | None = None  # a JoinGroup sent without a member id
        self.rebalances = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self.client.add_metadata_listener(self._on_metadata)
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"{self.client.client_id}-coordinator"
        )
        self._heartbeat.start()

    def wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def note_poll(self) -> None:
        self.last_poll = time.monotonic()
        if self.state == UNJOINED and self.subs.group_managed and not self._need_rejoin:
            self._need_rejoin = True
            self.wakeup()

    def subscription_changed(self) -> None:
        if self.subs.group_managed:
            self._need_rejoin = True
            self.client.set_topics(self.subs.topics)
            if self.subs.mode == self.subs.AUTO_PATTERN:
                self.client.want_all_topics(True)
            self.client.request_update()
        self.wakeup()

    def raise_pending(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._listener_error is not None:
            err, self._listener_error = self._listener_error, None
            raise err

    async def close(self, timeout: float) -> None:
        """Stop the group work and leave the group, whatever state the join is in.

        The coordinator task stops first, so nothing rejoins behind the LeaveGroup. A
        JoinGroup sent without a member id is still answered (the broker answers it at
        once), because its answer names the member the broker now holds for us; then
        LeaveGroup goes out with whatever member id the broker gave (MEMBER_ID_REQUIRED,
        a JoinGroup answer, or a completed rebalance). A JoinGroup or SyncGroup still
        waiting in the broker is answered there when the member leaves.
        """
        if self._task is None:
            return
        self.closing = True
        try:
            async with asyncio.timeout(timeout):
                await cancel_and_wait(self._task)
                await self._heartbeat.close()
                if self.instance_id is None:
                    await self._learn_member_id()
                if self.subs.group_managed:
                    await self._give_up_partitions()
                if self.instance_id is None:
                    await self.leave_group("the consumer is closing")
                if self.offsets.pending:
                    await asyncio.gather(*self.offsets.pending, return_exceptions=True)
        except TimeoutError:
            log.warning("consumer group close did not finish within %.1fs", timeout)
        except Exception as exc:
            log.warning("error while leaving group %s: %s", self.group_id, exc)
        finally:
            await self._heartbeat.close()
            await cancel_and_wait(self._task, *self.offsets.pending)

    async def _give_up_partitions(self) -> None:
        """Closing: commit what was consumed, then tell the listener the partitions are gone:
        revoked in a stable generation; lost in the middle of a rebalance (cooperative
        members keep partitions through one), as nothing can be committed for them then."""
        assigned = self.subs.assigned()
        if self.state == STABLE:
            await self._commit_before_revoke()
        if assigned:
            how = "on_partitions_revoked" if self.state == STABLE else "on_partitions_lost"
            await self._call_listener(how, assigned)

    async def _learn_member_id(self) -> None:
        """Wait for the answer to a JoinGroup sent without a member id, for the id it gives."""
        join, self._unnamed_join = self._unnamed_join, None
        if join is None or self.member_id:
            return
        try:
            resp = await join
        except (KafkaConnectionError, KafkaTimeoutError, ClientClosedError) as exc:
            log.info("group %s: no answer to the JoinGroup in flight: %s", self.group_id, exc)
            return
        if resp.member_id:
            self.member_id = resp.member_id

    # -- the task --------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff(int(self.retry_backoff * 1000), 1000)
        while True:
            try:
                await self._step()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("group %s: %s", self.group_id, exc)
                if isinstance(exc, KafkaConnectionError) or getattr(exc, "code", None) in COORDINATOR_ERRORS:
                    self.coordinator_dead()
                await asyncio.sleep(backoff.next())

    async def _step(self) -> None:
        """One turn of the task: (re)join when needed, else auto-commit and wait."""
        if self.subs.group_managed and self._fatal is None and not self.closing:
            await self.ensure_coordinator()
            if self._lost:
                await self._handle_lost()
            if self._need_rejoin or self.state == UNJOINED:
                await self._join_and_sync()
                return
        await self._maybe_auto_commit()
        await self._wait(self._next_wait())

    def _next_wait(self) -> float:
        if not self.auto_commit:
            return 1.0
        return max(0.0, min(1.0, self._next_auto_commit - time.monotonic()))

    async def _wait(self, timeout: float) -> None:
        if self._wake.is_set():
            self._wake.clear()
            return
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass
        self._wake.clear()

    def _on_metadata(self, cluster) -> None:
        if not self.subs.group_managed:
            return
        if self.subs.mode == self.subs.AUTO_PATTERN:
            internal = {t for t, info in cluster.topics.items() if info.is_internal}
            if self.subs.match_pattern(cluster.topics, self.exclude_internal, internal):
                log.info(
                    "group %s: pattern now matches %s; rejoining", self.group_id, sorted(self.subs.topics)
                )
                self._need_rejoin = True
                self.wakeup()
        if self.state == STABLE and self.leader_id == self.member_id and self._assigned_snapshot:
            for topic, count in self._assigned_snapshot.items():
                now = cluster.partition_count(topic) or 0
                if now and now != count:
                    log.info("group %s: %s now has %d partitions; rebalancing", self.group_id, topic, now)
                    self._need_rejoin = True
                    self.wakeup()
                    break

    # -- coordinator discovery -------------------------------------------------------------

    def coordinator_dead(self) -> None:
        if self.coordinator_id is not None:
            log.info(
                "group %s: coordinator %s is unavailable; looking it up again",
                self.group_id,
                self.coordinator_id,
            )
            self.coordinator_id = None

    async def ensure_coordinator(self) -> int:
        backoff = Backoff(int(self.retry_backoff * 1000), 1000)
        while self.coordinator_id is None:
            self.client.check_open()
            try:
                code, node, host, port = await self.client.find_coordinator(0, self.group_id)
                if code:
                    err = error_for(code)(f"FindCoordinator for group {self.group_id!r}")
                    if not err.retriable and code not in COORDINATOR_ERRORS:
                        raise err
                    raise KafkaConnectionError(str(err))
                conn_id = 0x7FFFFFFF - node
                self.client.register_node(conn_id, host, port)
                self.coordinator_id = conn_id
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                if self.closing:
                    raise
                log.debug("group %s: coordinator lookup failed: %s", self.group_id, exc)
                await asyncio.sleep(backoff.next())
        return self.coordinator_id

    async def call(self, api_key, values, timeout=None):
        """One request to the group coordinator (found first if need be)."""
        node = await self.ensure_coordinator()
        try:
            return await self.client.call(node, api_key, values, timeout=timeout)
        except KafkaConnectionError:
            self.coordinator_dead()
            raise

    # -- rebalance -------------------------------------------------------------------------

    async def _call_listener(self, method: str, partitions) -> None:
        listener = self.subs.listener
        if listener is None:
            return
        fn = getattr(listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(listener, "on_partitions_revoked", None)
        if fn is None:
            return
        try:
            await self._run_callback(fn, set(partitions))
        except Exception as exc:
            log.exception("rebalance listener %s failed", method)
            self._listener_error = exc

    async def _commit_before_revoke(self) -> None:
        if not self.auto_commit:
            return
        offsets = self.offsets.consumed()
        if not offsets:
            return
        try:
            await self.offsets.commit(offsets, timeout=self.request_timeout)
        except Exception as exc:
            log.warning("group %s: committing before rebalance failed: %s", self.group_id, exc)

    async def _handle_lost(self) -> None:
        self._lost = False
        assigned = self.subs.assigned()
        if assigned:
            await self._call_listener("on_partitions_lost", assigned)
            self.subs.set_assignment(set())

    def reset_generation(self, member: bool, lost: bool) -> None:
        self.generation = -1
        if member:
            self.member_id = ""
        self.state = UNJOINED
        self._need_rejoin = True
        if lost and self.subs.assigned():
            self._lost = True
        self.wakeup()

    @property
    def rejoin_needed(self) -> bool:
        return self._need_rejoin

    def request_rejoin(self) -> None:
        self._need_rejoin = True
        self.wakeup()

    def _subscribed_topics(self) -> set[str]:
        return set(self.subs.topics)

    async def _join_and_sync(self) -> None:
        self._need_rejoin = False
        try:
            await self._rebalance()
        except BaseException:
            # Interrupted (coordinator gone, connection lost, closing): try again later.
            self._need_rejoin = True
            if self.state == REBALANCING:
                self.state = UNJOINED
            raise

    async def _rebalance(self) -> None:
        # (A pattern that matches nothing yet still joins, so the group knows the member.)
        topics = self._subscribed_topics()
        assigned_before = self.subs.assigned()
        if self.state == STABLE:
            await self._commit_before_revoke()
        if self.protocol_kind == "eager" and assigned_before:
            await self._call_listener("on_partitions_revoked", assigned_before)
            self.subs.set_assignment(set())
        owned = self.subs.assigned() if self.protocol_kind == "cooperative" else set()
        self.state = REBALANCING
        protocols = [
            {
                "name": a.name,
                "metadata": encode_subscription(
                    topics, a.user_data(self._prev_assignment, self.generation), owned
                ),
            }
            for a in self.assignors
        ]
        join = await self._send_join(protocols)
        if join is None or self.closing:
            if self.state == REBALANCING:
                self.state = UNJOINED
            return
        self.rebalances += 1
        generation = int(join.generation_id)
        member_id = join.member_id
        protocol = join.protocol_name
        leader = join.leader
        assignments = []
        if leader == member_id and not getattr(join, "skip_assignment", False):
            assignments = await self._assign(protocol, join.members)
        resp = await self.call(
            api_keys.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": generation,
                "member_id": member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": "consumer",
                "protocol_name": protocol,
                "assignments": assignments,
            },
            timeout=self.rebalance_timeout_ms / 1000 + 5,
        )
        code = int(resp.error_code)
        if code:
            self.handle_group_error(code, "SyncGroup")
            return
        new_assignment, _ = decode_assignment(resp.assignment)
        self.generation = generation
        self.member_id = member_id
        self.protocol_name = protocol
        self.leader_id = leader
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is not None:
            assignor.on_assignment(new_assignment, generation)
        self._prev_assignment = set(new_assignment)
        self.state = STABLE
        self._heartbeat.reset()
        log.info(
            "group %s: generation %d, member %s%s, assigned %s",
            self.group_id,
            generation,
            member_id,
            " (leader)" if leader == member_id else "",
            sorted(new_assignment),
        )
        current = self.subs.assigned()
        if self.protocol_kind == "cooperative":
            revoked = current - new_assignment
            added = new_assignment - current
            if revoked:
                await self._commit_before_revoke()
                await self._call_listener("on_partitions_revoked", revoked)
                self.subs.remove_partitions(revoked)
                self._need_rejoin = True
            self.subs.add_partitions(added)
            await self._call_listener("on_partitions_assigned", added)
        else:
            self.subs.set_assignment(new_assignment)
            await self._call_listener("on_partitions_assigned", new_assignment)
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval

    async def _send_join(self, protocols):
        while not self.closing:
            node = await self.ensure_coordinator()
            try:
                conn = await self.client.get_connection(node)
            except KafkaConnectionError:
                self.coordinator_dead()
                raise
            sent = conn.send(
                api_keys.JOIN_GROUP,
                {
                    "group_id": self.group_id,
                    "session_timeout": self.session_timeout_ms,
                    "rebalance_timeout": self.rebalance_timeout_ms,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance_id,
                    "protocol_type": "consumer",
                    "protocols": protocols,
                    "reason": None,
                },
                timeout=self.rebalance_timeout_ms / 1000 + 5,
            )
            try:
                resp = await self._join_answer(sent)
            except KafkaConnectionError:
                self.coordinator_dead()
                raise
            code = int(resp.error_code)
            if code == int(ErrorCode.member_id_required):
                self.member_id = resp.member_id
                continue
            if code:
                self.handle_group_error(code, "JoinGroup")
                if code in (
                    int(ErrorCode.rebalance_in_progress),
                    int(ErrorCode.coordinator_load_in_progress),
                ):
                    await asyncio.sleep(self.retry_backoff)
                return None
            self.member_id = resp.member_id  # the broker holds a member under this id now
            return resp
        return None

    async def _join_answer(self, sent: asyncio.Future):
        if self.member_id:
            return await sent
        # Without a member id, the answer names the member the broker now holds for us.
        # close() cancels this task but still needs that name to leave: it takes the
        # answer from ``_unnamed_join`` (shielded from the cancellation).
        self._unnamed_join = sent
        try:
            resp = await asyncio.shield(sent)
        except asyncio.CancelledError:
            raise  # close() reads the answer
        except BaseException:
            self._unnamed_join = None
            raise
        self._unnamed_join = None
        return resp

    def handle_group_error(self, code: int, what: str) -> None:
        err = error_for(code)(f"{what} for group {self.group_id!r}")
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead()
            self._need_rejoin = True
        elif code in RESET_MEMBER:
            self.reset_generation(member=True, lost=True)
        elif code in RESET_GENERATION:
            self.reset_generation(member=False, lost=True)
        elif code == int(ErrorCode.rebalance_in_progress):
            self._need_rejoin = True
        elif code in FATAL_JOIN:
            log.error("group %s: %s", self.group_id, err)
            self._fatal = err
        else:
            self._need_rejoin = True
            log.warning("group %s: %s", self.group_id, err)
        if self.state == REBALANCING:
            self.state = UNJOINED

    async def _assign(self, protocol: str, members) -> list[dict]:
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise KafkaError(f"group chose assignor {protocol!r}, which this consumer does not have")
        subscriptions = {}
        for m in members:
            subscriptions[m.member_id] = decode_subscription(
                m.metadata, getattr(m, "group_instance_id", None)
            )
        all_topics = set().union(*(set(s.topics) for s in subscriptions.values())) if subscriptions else set()
        self._group_topics = all_topics
        if self.client.add_topics(all_topics) or any(
            self.client.cluster.partition_count(t) is None for t in all_topics
        ):
            try:
                await self.client.refresh(self.request_timeout)
            except KafkaTimeoutError:
                log.warning("group %s: metadata refresh before assignment timed out", self.group_id)
        cluster = self.client.cluster
        counts = {t: cluster.partition_count(t) for t in all_topics}
        counts = {t: n for t, n in counts.items() if n}
        self._assigned_snapshot = dict(counts)
        result = assignor.assign(counts, subscriptions)
        log.info(
            "group %s: leader assigned with %s: %s",
            self.group_id,
            protocol,
            {m: sorted(v) for m, v in result.items()},
        )
        return [{"member_id": m, "assignment": encode_assignment(result.get(m, []))} for m in subscriptions]

    async def leave_inactive(self) -> None:
        """poll() was not called for max_poll_interval_ms: leave the group; the partitions are lost."""
        await self.leave_group("consumer poll timeout has expired")
        self._lost = bool(self.subs.assigned())

    async def leave_group(self, reason: str) -> None:
        if not self.member_id:
            self.state = UNJOINED
            return
        log.info("group %s: member %s leaving: %s", self.group_id, self.member_id, reason)
        try:
            await self.call(
                api_keys.LEAVE_GROUP,
                {
                    "group_id": self.group_id,
                    "member_id": self.member_id,
                    "members": [
                        {"member_id": self.member_id, "group_instance_id": self.instance_id, "reason": reason}
                    ],
                },
            )
        except Exception as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.generation = -1
        self.member_id = ""
        self.state = UNJOINED

    # -- offsets ---------------------------------------------------------------------------

    async def _maybe_auto_commit(self) -> None:
        if not self.auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        if self.subs.group_managed and self.state != STABLE:
            return
        self.offsets.commit_consumed_async()

    async def commit(self, offsets, timeout: float) -> None:
        await self.offsets.commit(offsets, timeout)

    def commit_async(self, offsets, callback=None) -> asyncio.Task:
        return self.offsets.commit_async(offsets, callback)

    async def fetch_committed(
        self, partitions, timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self.offsets.fetch_committed(partitions, timeout)
