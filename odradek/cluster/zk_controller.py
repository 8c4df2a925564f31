"""The active controller of a ZooKeeper-mode cluster (Kafka's KafkaController).

Every broker runs one ``ZkController``; the one that creates ``/controller`` (atomically with
bumping ``/controller_epoch``) is active, the others watch ``/controller`` and try again when
it goes. Everything here runs on the cluster node's single event task (``cluster_node``): ZooKeeper
watches, broker answers and API calls (ControlledShutdown, ElectLeaders, reassignments) are
events handled one at a time, so the ``ControllerContext`` has one owner.

The active controller reads the cluster from ZooKeeper when elected, then reacts:

* ``/brokers/ids`` children: a broker that registers gets the metadata and its replicas' leaders;
  a broker whose znode goes (crash, lost session) loses its leaderships to live in-ISR replicas
  (new leader epochs) and leaves every ISR.
* ``/brokers/topics`` children and each topic's znode: new topics and partitions get leaders
  (state znodes created) and their replicas are told.
* ``/admin/delete_topics``: the topic's partitions are shown as being deleted
  (UpdateMetadata leader -2), its replicas stopped and deleted, then its znodes removed.
* ``/isr_change_notification``: leaders changed ISRs; the new ISRs go out as UpdateMetadata,
  and a reassignment whose new replicas caught up completes.
* ``/log_dir_event_notification``: a broker's log dir failed; it is sent LeaderAndIsr for its
  replicas, and those answering KAFKA_STORAGE_ERROR go offline (leaders move to other in-sync
  replicas), as in Kafka.
* ``/admin/reassign_partitions`` and ``/admin/preferred_replica_election``: the ZooKeeper-era
  ways to ask for a reassignment or a preferred election.

Leadership moves on request (controlled shutdown, ElectLeaders, auto rebalance) are in
``controller_elections``, reassignments in ``controller_reassignment`` (mixins of this class).

Every state write is a transaction fenced by the version of ``/controller_epoch``
(``ControllerMovedError`` means another controller was elected: this one resigns), and
conditional on the partition state znode's version. After each decision, one ``RequestBatch``
tells the brokers. Every state change is logged once, with its reason, on
``odradek.state.change``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable

from odradek.cluster import zk_data
from odradek.cluster.controller_channel import ControllerChannelManager
from odradek.cluster.controller_context import ControllerContext
from odradek.cluster.controller_elections import LeadershipMoves
from odradek.cluster.controller_reassignment import PartitionReassignments
from odradek.cluster.partitions import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from odradek.cluster.request_batch import RequestBatch
from odradek.cluster.state_machines import (
    ElectionStrategy,
    PartitionLifecycle,
    PartitionStateMachine,
    ReplicaLifecycle,
    ReplicaStateMachine,
    StateChangeLogger,
    remove_replica_from_isr,
)
from odradek.cluster.zk_client import (
    ZK_CHUNK,
    BadVersionError,
    ControllerMovedError,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SetDataOp,
    ZkClient,
    ZooKeeperError,
    gather_chunked,
)
from odradek.net.connection_security import ConnectionSecurity
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

P, R = PartitionLifecycle, ReplicaLifecycle

class NotActiveController(Exception):
    """This broker is not (or no longer) the active controller."""


class ZkController(LeadershipMoves, PartitionReassignments):
    def __init__(
        self,
        node_id: int,
        zk: ZkClient,
        config,
        *,
        on_change: Callable[[], None] | None = None,
        security: ConnectionSecurity | None = None,
    ):
        self.node_id = node_id
        self.zk = zk
        self.config = config
        # The controller talks to brokers through inter.broker.listener.name, with its security.
        self.listener_name: str | None = getattr(config, "inter_broker_listener_name", None)
        self.security = security
        self.ctx = ControllerContext()
        self.state_log = StateChangeLogger(node_id, lambda: self.ctx.epoch)
        self.psm = PartitionStateMachine(self.ctx, self.state_log)
        self.rsm = ReplicaStateMachine(self.ctx, self.state_log)
        self.channel: ControllerChannelManager | None = None
        self.batch = RequestBatch(node_id, self.ctx, self.listener_name)
        self.active = False
        self.active_controller_id = -1
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.on_change = on_change or (lambda: None)  # the active controller id changed
        self._post: Callable | None = None  # puts an event on the node's queue (set by the node)
        self._rebalance_task: asyncio.Task | None = None
        self.elected_at = 0.0

    # ---------------------------------------------------------------- election

    async def elect(self) -> None:
        """Try to become the controller; otherwise learn who is (and watch ``/controller``)."""
        if self.active:
            return
        while True:
            epoch, epoch_version = await self._read_controller_epoch()
            try:
                results = await self.zk.transaction(
                    [
                        CreateOp(zk_data.CONTROLLER_PATH, zk_data.encode_controller(self.node_id, _now_ms()), ephemeral=True),
                        SetDataOp(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(epoch + 1), epoch_version),
                    ]
                )
            except (NodeExistsError, BadVersionError):
                if await self._watch_controller():
                    return
                continue  # the controller went while we looked: try again
            self.ctx.reset()
            self.ctx.epoch, self.ctx.epoch_zk_version = epoch + 1, results[1].version
            await self._watch_controller()
            await self._on_controller_failover()
            return

    async def _read_controller_epoch(self) -> tuple[int, int]:
        try:
            data, stat = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            try:
                await self.zk.create(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        return zk_data.decode_controller_epoch(data), stat.version

    async def _watch_controller(self) -> bool:
        """Watch ``/controller`` and note who holds it; False if nobody does."""
        stat = await self.zk.exists(zk_data.CONTROLLER_PATH, watch=True)
        if stat is None:
            self._set_active_id(-1)
            return False
        try:
            data, _ = await self.zk.get(zk_data.CONTROLLER_PATH)
        except NoNodeError:
            self._set_active_id(-1)
            return False
        self._set_active_id(zk_data.decode_controller(data).broker_id)
        return True

    def _set_active_id(self, controller_id: int) -> None:
        if controller_id != self.active_controller_id:
            self.active_controller_id = controller_id
            self.on_change()

    async def on_controller_change(self) -> None:
        """``/controller`` changed or went: resign if it is no longer ours, elect if it is gone."""
        present = await self._watch_controller()
        if self.active and self.active_controller_id != self.node_id:
            await self.resign("another broker holds /controller")
        if present and not self.active and self.active_controller_id == self.node_id:
            # ours, but this controller resigned (fenced by a newer /controller_epoch): free it
            # so that a fresh election, with a new epoch, takes place
            await self._delete_quietly(zk_data.CONTROLLER_PATH)
            present = False
        if not present:
            await self.elect()

    async def resign(self, reason: str) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller (epoch %d): %s", self.node_id, self.ctx.epoch, reason)
        self.active = False
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        if self.channel is not None:
            await self.channel.close()
            self.channel = None
        self.ctx.reset()
        self.batch = RequestBatch(self.node_id, self.ctx, self.listener_name)
        if self.active_controller_id == self.node_id:
            self._set_active_id(-1)

    async def close(self) -> None:
        was_active = self.active
        await self.resign("the broker is shutting down")
        if was_active:
            try:
                await self.zk.delete(zk_data.CONTROLLER_PATH)
            except ZooKeeperError:
                pass

    # ---------------------------------------------------------------- failover

    async def _on_controller_failover(self) -> None:
        t0 = time.perf_counter()
        self.active = True
        self.elected_at = time.monotonic()
        self.state_log.info(f"Broker {self.node_id} elected controller with epoch {self.ctx.epoch}")
        self.channel = ControllerChannelManager(
            self.node_id, self.config.get("controller.socket.timeout.ms") / 1000, security=self.security
        )
        self.batch = RequestBatch(self.node_id, self.ctx, self.listener_name)
        brokers = await self._read_brokers()
        self.ctx.set_live_brokers(brokers)
        for broker_id, (registration, _) in brokers.items():
            self._add_channel(broker_id, registration)
        topics = await self.zk.get_children(zk_data.TOPICS_PATH, watch=True)
        self.ctx.set_all_topics(topics)
        await self._load_topics(topics)
        await self._load_partition_states(self.ctx.all_partitions)
        for topic, parts in self.ctx.partition_assignments.items():
            for p, assignment in parts.items():
                if assignment.is_being_reassigned:
                    self.ctx.partitions_being_reassigned.add(TopicPartition(topic, p))
        self.psm.initialize()
        self.rsm.initialize()
        await self._read_deletions()
        self.batch.add_full_update_metadata(self.ctx.live_or_shutting_down_broker_ids)
        for tp in self.ctx.all_partitions:
            if tp in self.ctx.partition_leadership:
                self.batch.add_leader_and_isr(self.ctx.live_replicas(tp), tp)
        await self._bring_online(self.psm.partitions_to_bring_online(), ElectionStrategy.OFFLINE, "controller failover")
        _, offline = self.ctx.online_and_offline_replicas()
        self.rsm.set_state(offline, R.OFFLINE, "controller failover: the broker is not alive")
        await self._remove_replicas_from_isr(offline, "controller failover: the broker is not alive")
        self._send()
        await self._resume_deletions()
        for tp in sorted(self.ctx.partitions_being_reassigned):
            await self._maybe_complete_reassignment(tp)
        await self._watch_admin_paths()
        await self.on_log_dir_event_notification()
        self._send()
        if self.config.get("auto.leader.rebalance.enable"):
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer(), name="leader-rebalance")
        log.info(
            "broker %d is the controller (epoch %d): %d brokers, %d topics, %d partitions, ready in %.0f ms",
            self.node_id,
            self.ctx.epoch,
            len(self.ctx.live_brokers),
            len(self.ctx.all_topics),
            len(self.ctx.all_partitions),
            (time.perf_counter() - t0) * 1000,
        )

    def _add_channel(self, broker_id: int, registration: zk_data.BrokerRegistration) -> None:
        endpoint = registration.inter_broker_endpoint(self.listener_name)
        if endpoint is None:
            log.warning("broker %d registered no endpoint; the controller cannot reach it", broker_id)
            return
        self.channel.add_broker(broker_id, endpoint.host or "127.0.0.1", endpoint.port)

    async def _read_brokers(self) -> dict[int, tuple[zk_data.BrokerRegistration, int]]:
        ids = [int(i) for i in await self.zk.get_children(zk_data.BROKER_IDS_PATH, watch=True) if i.isdigit()]
        # watched: a broker rewrites its znode when its advertised.listeners change
        results = await gather_chunked([self.zk.get(zk_data.broker_path(b), watch=True) for b in ids])
        brokers = {}
        for broker_id, result in zip(ids, results, strict=True):
            if isinstance(result, NoNodeError):
                continue  # gone while we read
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            brokers[broker_id] = (zk_data.decode_broker_registration(broker_id, data), stat.czxid)
        return brokers

    async def _load_topics(self, topics: Iterable[str]) -> list[str]:
        """Read the assignments (watching each topic's znode), ids and configs of ``topics``."""
        topics = list(topics)
        results = await gather_chunked([self.zk.get(zk_data.topic_path(t), watch=True) for t in topics])
        configs = await gather_chunked([self.zk.get(zk_data.entity_config_path(zk_data.TOPIC_CONFIG, t)) for t in topics])
        loaded = []
        for topic, result, config in zip(topics, results, configs, strict=True):
            if isinstance(result, NoNodeError):
                self.ctx.all_topics.discard(topic)
                continue
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            assignment = zk_data.decode_topic_assignment(topic, data)
            topic_id = assignment.topic_id
            if topic_id is None:  # written by a tool that knows no topic ids: give it one
                topic_id = uuid.uuid4()
                await self.zk.set(
                    zk_data.topic_path(topic),
                    zk_data.encode_topic_assignment(topic_id, assignment.partitions),
                    version=stat.version,
                )
            self.ctx.all_topics.add(topic)
            self.ctx.add_topic_id(topic, topic_id)
            for p, replicas in assignment.partitions.items():
                self.ctx.update_partition_full_replica_assignment(TopicPartition(topic, p), replicas)
            self.topic_configs[topic] = (
                zk_data.decode_entity_config(config[0]) if not isinstance(config, BaseException) else {}
            )
            loaded.append(topic)
        return loaded

    async def _load_partition_states(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = sorted(partitions)
        results = await gather_chunked([self.zk.get(zk_data.partition_state_path(tp)) for tp in partitions])
        for tp, result in zip(partitions, results, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            self.ctx.put_partition_leadership(tp, zk_data.decode_partition_state(tp, data, stat.version))

    async def _watch_admin_paths(self) -> None:
        if await self.zk.exists(zk_data.REASSIGN_PARTITIONS_PATH, watch=True):
            await self.on_zk_reassignment()
        if await self.zk.exists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True):
            await self.on_zk_preferred_election()
        await self.on_isr_change_notification()

    # ---------------------------------------------------------------- writing leader and ISR

    def _unclean_allowed(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config.get("unclean.leader.election.enable"))
        return value.strip().lower() == "true"

    async def _write_leader_and_isr(self, updates: dict[TopicPartition, LeaderAndIsr]) -> dict[TopicPartition, LeaderAndIsr]:
        """Write new leader-and-ISRs, each conditional on its znode version and fenced by the
        controller epoch; returns those written (with their new znode versions). A partition
        whose znode moved meanwhile is re-read, so the next attempt can succeed."""
        items = sorted(updates.items())
        calls = [
            self.zk.transaction(
                [
                    SetDataOp(
                        zk_data.partition_state_path(tp),
                        zk_data.encode_partition_state(LeaderIsrAndControllerEpoch(lai, self.ctx.epoch)),
                        lai.zk_version,
                    )
                ],
                controller_epoch_zk_version=self.ctx.epoch_zk_version,
            )
            for tp, lai in items
        ]
        written, stale = {}, []
        for (tp, lai), result in zip(items, await gather_chunked(calls), strict=True):
            if isinstance(result, ControllerMovedError):
                raise result
            if isinstance(result, BadVersionError | NoNodeError):
                stale.append(tp)
                continue
            if isinstance(result, BaseException):
                raise result
            written[tp] = lai.with_zk_version(result[0].version)
        if stale:
            self.state_log.error(f"Partition state znodes of {sorted(map(str, stale))} changed under the controller; re-read")
            await self._load_partition_states(stale)
        return written

    async def _create_partition_states(
        self, planned: dict[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Create the state znodes of new partitions (with their parents), fenced; returns the
        states created. Falls back to one partition at a time when some already exist."""
        created = {}
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in sorted(planned):
            by_topic.setdefault(tp.topic, []).append(tp)
        for topic, tps in by_topic.items():
            parent_missing = await self.zk.exists(zk_data.topic_partitions_path(topic)) is None
            for start in range(0, len(tps), ZK_CHUNK):
                chunk = tps[start : start + ZK_CHUNK]
                ops = [CreateOp(zk_data.topic_partitions_path(topic))] if parent_missing and start == 0 else []
                for tp in chunk:
                    ops.append(CreateOp(zk_data.partition_path(tp)))
                    ops.append(CreateOp(zk_data.partition_state_path(tp), zk_data.encode_partition_state(planned[tp])))
                try:
                    await self.zk.transaction(ops, controller_epoch_zk_version=self.ctx.epoch_zk_version)
                    created.update((tp, planned[tp]) for tp in chunk)
                except NodeExistsError:
                    created.update(await self._create_partition_states_one_by_one({tp: planned[tp] for tp in chunk}))
        return created

    async def _create_partition_states_one_by_one(self, planned) -> dict:
        created = {}
        for tp, state in planned.items():
            await self.zk.ensure_path(zk_data.partition_path(tp))
            try:
                await self.zk.transaction(
                    [CreateOp(zk_data.partition_state_path(tp), zk_data.encode_partition_state(state))],
                    controller_epoch_zk_version=self.ctx.epoch_zk_version,
                )
                created[tp] = state
            except NodeExistsError:
                await self._load_partition_states([tp])  # an earlier controller created it
        return created

    async def _bring_online(
        self, partitions: Iterable[TopicPartition], strategy: ElectionStrategy, reason: str, *, unclean: bool = False
    ) -> dict[TopicPartition, str]:
        """Move partitions to OnlinePartition (new ones get their first leader, the others an
        election under ``strategy``), write, and add the requests to the batch. Returns the
        partitions that could not be brought online, with why."""
        ctx = self.ctx
        partitions = list(partitions)
        new = [tp for tp in partitions if ctx.partition_state(tp) is P.NEW and tp not in ctx.partition_leadership]
        others = [tp for tp in partitions if tp not in set(new)]
        failed: dict[TopicPartition, str] = {}
        if new:
            planned, why = self.psm.plan_new_partition_leaders(new)
            failed.update(why)
            for tp, state in (await self._create_partition_states(planned)).items():
                self.psm.mark_online(tp, state, reason)
                self.batch.add_leader_and_isr(ctx.live_replicas(tp, include_shutting_down=True), tp, is_new=True)
        if others:
            results, why = self.psm.plan_elections(
                others, strategy, unclean_allowed=(lambda t: True) if unclean else self._unclean_allowed
            )
            failed.update(why)
            written = await self._write_leader_and_isr({tp: r.leader_and_isr for tp, r in results.items()})
            for tp, lai in written.items():
                if results[tp].unclean:
                    self.state_log.error(
                        f"Unclean leader election for {tp}: {lai.leader} was not in the ISR; records acknowledged "
                        "by the old ISR may be lost"
                    )
                self.psm.mark_online(tp, LeaderIsrAndControllerEpoch(lai, ctx.epoch), reason)
                recipients = set(results[tp].recipients) | ctx.live_replicas(tp, include_shutting_down=True)
                self.batch.add_leader_and_isr(recipients, tp)
            for tp in results.keys() - written.keys():
                failed[tp] = f"{tp}: its state znode changed meanwhile"
        for tp, why in sorted(failed.items()):
            self.state_log.error(f"Could not bring {tp} online ({reason}): {why}")
            if ctx.partition_state(tp) is P.NEW and tp not in ctx.partition_leadership:
                continue
            if ctx.partition_state(tp) is not P.OFFLINE:
                self.psm.set_state([tp], P.OFFLINE, reason)
        return failed

    async def _remove_replicas_from_isr(self, replicas: Iterable[PartitionAndReplica], reason: str) -> None:
        """Take (offline or stopping) replicas out of their partitions' ISRs."""
        ctx = self.ctx
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for replica in sorted(replicas):
            tp = replica.topic_partition
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                continue
            current = updates.get(tp) or ctx.partition_leader_and_isr(tp)
            if current is None:
                continue
            changed = remove_replica_from_isr(current, replica.replica)
            if changed is not None:
                # several replicas of one partition: one write, one epoch bump
                updates[tp] = changed if tp not in updates else LeaderAndIsr(
                    changed.leader, current.leader_epoch, changed.isr, changed.leader_recovery_state, changed.zk_version
                )
        written = await self._write_leader_and_isr(updates)
        for tp, lai in written.items():
            ctx.put_partition_leadership(tp, LeaderIsrAndControllerEpoch(lai, ctx.epoch))
            self.state_log.info(
                f"Partition {tp} now has leader {lai.leader}, leader epoch {lai.leader_epoch}, ISR {list(lai.isr)} ({reason})"
            )
            if lai.leader < 0 and ctx.partition_state(tp) is not P.OFFLINE:
                self.psm.set_state([tp], P.OFFLINE, reason)
            self.batch.add_leader_and_isr(ctx.live_replicas(tp, include_shutting_down=True), tp)

    def _send(self) -> None:
        if self.active and self.channel is not None and not self.batch.empty:
            self.batch.send(self.channel, self._on_leader_and_isr_response)

    def _on_leader_and_isr_response(self, broker: int, response) -> None:
        if response.error_code:
            log.warning("broker %d answered LeaderAndIsr with %s", broker, ErrorCode(response.error_code).name)
            return
        if self._post is None:
            return
        by_id = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        answers = {
            TopicPartition(by_id[t.topic_id], e.partition_index): int(e.error_code)
            for t in response.topics
            if t.topic_id in by_id
            for e in t.partition_errors
        }
        self._post(lambda: self._on_replica_answers(broker, answers))

    async def _on_replica_answers(self, broker: int, answers: dict[TopicPartition, int]) -> None:
        """Kafka's LeaderAndIsrResponseReceived: replicas answering KAFKA_STORAGE_ERROR live in a
        failed log dir of ``broker`` and go offline (leaders move to other in-sync replicas);
        those answering NONE are online again (the broker restarted with the dir repaired)."""
        if not self.active or broker not in self.ctx.live_or_shutting_down_broker_ids:
            return
        ctx = self.ctx
        before = set(ctx.replicas_on_offline_dirs.get(broker, ()))
        now = (before - {tp for tp, code in answers.items() if code == 0}) | {
            tp for tp, code in answers.items() if code == ErrorCode.kafka_storage_error
        }
        ctx.replicas_on_offline_dirs[broker] = now
        new = sorted(now - before)
        if new:
            self.state_log.info(f"Mark replicas {', '.join(map(str, new))} on broker {broker} as offline (a failed log dir)")
            await self._on_replicas_offline(broker, new, f"broker {broker}'s log dir failed")
            self._send()

    async def _on_replicas_offline(self, broker: int, partitions: list[TopicPartition], reason: str) -> None:
        """Kafka's onReplicasBecomeOffline for one broker's replicas in a failed log dir."""
        ctx = self.ctx
        led = sorted(ctx.partitions_with_offline_leader() - ctx.partitions_in_state(P.OFFLINE))
        self.psm.set_state(led, P.OFFLINE, reason)
        await self._bring_online(self.psm.partitions_to_bring_online(), ElectionStrategy.OFFLINE, reason)
        replicas = [
            PartitionAndReplica(tp, broker) for tp in partitions if not ctx.is_topic_queued_up_for_deletion(tp.topic)
        ]
        for r in replicas:
            self.batch.add_stop_replica(broker, r.topic_partition, delete=False)
        self.rsm.set_state(replicas, R.OFFLINE, reason)
        await self._remove_replicas_from_isr(replicas, reason)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, set(partitions))

    async def on_log_dir_event_notification(self) -> None:
        """``/log_dir_event_notification``: brokers whose log dir failed. Each is asked about all its
        replicas with LeaderAndIsr; those in the failed dir answer KAFKA_STORAGE_ERROR (see
        ``_on_replica_answers``). The notifications are deleted, as Kafka's controller does."""
        if not self.active:
            return
        children = await self.zk.get_children(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH, watch=True)
        brokers: set[int] = set()
        for child in sorted(children):
            path = f"{zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH}/{child}"
            try:
                data, _ = await self.zk.get(path)
                brokers.add(zk_data.decode_log_dir_event(data))
            except NoNodeError:
                continue
            except zk_data.ZkDataError as exc:
                log.warning("ignoring log dir event notification %s: %s", path, exc)
            await self._delete_quietly(path)
        brokers &= self.ctx.live_or_shutting_down_broker_ids
        if not brokers:
            return
        ctx = self.ctx
        self.state_log.info(f"Log dir failure reported by brokers {sorted(brokers)}: asking them about their replicas")
        for r in sorted(ctx.replicas_on_brokers(brokers)):
            if r.topic_partition in ctx.partition_leadership:
                self.batch.add_leader_and_isr([r.replica], r.topic_partition)
        self._send()

    # ---------------------------------------------------------------- brokers

    async def on_broker_change(self) -> None:
        if not self.active:
            return
        ctx = self.ctx
        current = await self._read_brokers()
        known = ctx.live_or_shutting_down_broker_ids
        new = set(current) - known
        dead = known - set(current)
        bounced = {b for b in set(current) & known if current[b][1] != ctx.live_broker_epochs.get(b)}
        moved = {b for b in set(current) & known - bounced if current[b][0].moved_from(ctx.live_brokers.get(b))}
        for broker in moved:  # Kafka's BrokerModifications: new addresses, told to every broker
            self.state_log.info(f"Broker {broker} changed its endpoints")
            ctx.add_live_brokers({broker: current[broker]})
            self._add_channel(broker, current[broker][0])
        if moved:
            self.batch.add_full_update_metadata(ctx.live_or_shutting_down_broker_ids)
        if dead:
            await self._on_broker_failure(dead, "its registration znode went away")
        if bounced:
            await self._on_broker_failure(bounced, "it registered again with a new session")
        for broker in new | bounced:
            ctx.add_live_brokers({broker: current[broker]})
            self._add_channel(broker, current[broker][0])
        if new | bounced:
            await self._on_broker_startup(new | bounced)
        self._send()

    async def _on_broker_failure(self, brokers: set[int], why: str) -> None:
        ctx = self.ctx
        self.state_log.info(f"Brokers {sorted(brokers)} failed: {why}")
        ctx.remove_live_brokers(brokers)
        ctx.shutting_down_broker_ids -= brokers
        for broker in brokers:
            self.channel.remove_broker(broker)
        reason = f"broker {', '.join(map(str, sorted(brokers)))} failed"
        led = sorted(
            tp
            for tp, leadership in ctx.partition_leadership.items()
            if leadership.leader_and_isr.leader in brokers and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        )
        self.psm.set_state(led, P.OFFLINE, reason)
        await self._bring_online(self.psm.partitions_to_bring_online(), ElectionStrategy.OFFLINE, reason)
        replicas = ctx.replicas_on_brokers(brokers)
        self.rsm.set_state(replicas, R.OFFLINE, reason)
        await self._remove_replicas_from_isr(replicas, reason)
        for topic in {r.topic_partition.topic for r in replicas} & ctx.topics_to_be_deleted:
            ctx.topics_ineligible_for_deletion.add(topic)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, {r.topic_partition for r in replicas})

    async def _on_broker_startup(self, brokers: set[int]) -> None:
        ctx = self.ctx
        self.state_log.info(f"Brokers {sorted(brokers)} started (registered)")
        for broker in brokers:  # a restarted broker says again which of its log dirs failed
            ctx.replicas_on_offline_dirs.pop(broker, None)
        reason = f"broker {', '.join(map(str, sorted(brokers)))} started"
        self.batch.add_full_update_metadata(ctx.live_or_shutting_down_broker_ids)
        replicas = ctx.replicas_on_brokers(brokers)
        self.rsm.set_state(replicas, R.ONLINE, reason)
        for tp in sorted({r.topic_partition for r in replicas}):
            if tp in ctx.partition_leadership:
                self.batch.add_leader_and_isr(brokers & set(ctx.partition_replica_assignment(tp)), tp)
        await self._bring_online(self.psm.partitions_to_bring_online(), ElectionStrategy.OFFLINE, reason)
        ctx.topics_ineligible_for_deletion -= {r.topic_partition.topic for r in replicas}
        await self._resume_deletions()

    # ---------------------------------------------------------------- topics and partitions

    async def on_topic_change(self) -> None:
        if not self.active:
            return
        ctx = self.ctx
        children = set(await self.zk.get_children(zk_data.TOPICS_PATH, watch=True))
        for gone in ctx.all_topics - children:
            if gone not in ctx.topics_to_be_deleted:
                self.state_log.info(f"Topic {gone} disappeared from ZooKeeper; forgetting it")
                ctx.remove_topic(gone)
        new = sorted(children - ctx.all_topics)
        if not new:
            return
        loaded = await self._load_topics(new)
        partitions = [tp for t in loaded for tp in sorted(ctx.partitions_for_topic(t))]
        await self._load_partition_states(partitions)  # none, unless a previous controller began
        await self._on_new_partitions(partitions, f"new topic{'s' if len(loaded) > 1 else ''} {', '.join(loaded)}")
        self._send()

    async def on_partition_modification(self, topic: str) -> None:
        """A topic's znode changed: CreatePartitions added partitions (or a tool rewrote it)."""
        if not self.active or topic not in self.ctx.all_topics:
            return
        try:
            data, _ = await self.zk.get(zk_data.topic_path(topic), watch=True)
        except NoNodeError:
            return
        assignment = zk_data.decode_topic_assignment(topic, data)
        added = []
        for p, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, p)
            if p not in self.ctx.partition_assignments.get(topic, {}):
                self.ctx.update_partition_full_replica_assignment(tp, replicas)
                added.append(tp)
        if added:
            await self._on_new_partitions(added, f"partitions added to {topic}")
            self._send()

    async def _on_new_partitions(self, partitions: list[TopicPartition], reason: str) -> None:
        ctx = self.ctx
        fresh = [tp for tp in partitions if tp not in ctx.partition_leadership]
        self.psm.set_state(fresh, P.NEW, reason)
        self.rsm.set_state(ctx.replicas_for_partitions(fresh), R.NEW, reason)
        existing = [tp for tp in partitions if tp in ctx.partition_leadership]
        for tp in existing:  # a previous controller got as far as the state znode
            ctx.partition_states[tp] = P.OFFLINE
        await self._bring_online(partitions, ElectionStrategy.OFFLINE, reason)
        online = [r for r in ctx.replicas_for_partitions(partitions) if ctx.is_replica_online(r.replica, r.topic_partition)]
        self.rsm.set_state(online, R.ONLINE, reason)

    # ---------------------------------------------------------------- topic deletion

    async def _read_deletions(self) -> None:
        for topic in await self.zk.get_children(zk_data.DELETE_TOPICS_PATH, watch=True):
            if topic not in self.ctx.all_topics or not self.config.get("delete.topic.enable"):
                await self._delete_quietly(zk_data.delete_topic_path(topic))
            else:
                self.ctx.queue_topic_deletion([topic])

    async def on_topic_deletion(self) -> None:
        if not self.active:
            return
        await self._read_deletions()
        await self._resume_deletions()
        self._send()

    async def _resume_deletions(self) -> None:
        ctx = self.ctx
        for topic in sorted(ctx.topics_to_be_deleted):
            replicas = ctx.replicas_for_topic(topic)
            if any(not ctx.is_replica_online(r.replica, r.topic_partition, include_shutting_down=True) for r in replicas):
                if topic not in ctx.topics_ineligible_for_deletion:
                    self.state_log.info(f"Deletion of topic {topic} waits: some of its replicas are on brokers that are down")
                ctx.topics_ineligible_for_deletion.add(topic)
                continue
            ctx.topics_ineligible_for_deletion.discard(topic)
            if ctx.is_topic_deletion_in_progress(topic):
                if all(ctx.replica_state(r) is R.DELETION_SUCCESSFUL for r in replicas):
                    await self._finish_deletion(topic)
                continue
            ctx.begin_topic_deletion([topic])
            reason = f"topic {topic} is being deleted"
            partitions = ctx.partitions_for_topic(topic)
            self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, partitions)
            self.psm.set_state(partitions, P.OFFLINE, reason)
            self.rsm.set_state(replicas, R.OFFLINE, reason)
            self.rsm.set_state(replicas, R.DELETION_STARTED, reason)
            if not replicas:
                await self._finish_deletion(topic)
                continue
            for r in replicas:
                self.batch.add_stop_replica(
                    r.replica, r.topic_partition, delete=True, on_response=self._stop_replica_callback(r.replica)
                )

    def _stop_replica_callback(self, broker: int):
        def on_response(response) -> None:
            if self._post is not None:
                self._post(lambda: self._on_stop_replica_response(broker, response))

        return on_response

    async def _on_stop_replica_response(self, broker: int, response) -> None:
        if not self.active:
            return
        ctx = self.ctx
        done, failed = [], []
        for e in response.partition_errors:
            replica = PartitionAndReplica(TopicPartition(e.topic_name, e.partition_index), broker)
            if ctx.replica_state(replica) is R.DELETION_STARTED:
                (failed if e.error_code else done).append(replica)
        self.rsm.set_state(done, R.DELETION_SUCCESSFUL, f"broker {broker} deleted its replica")
        self.rsm.set_state(failed, R.DELETION_INELIGIBLE, f"broker {broker} could not delete its replica")
        await self._resume_deletions()
        self._send()

    async def _finish_deletion(self, topic: str) -> None:
        ctx = self.ctx
        reason = f"topic {topic} deleted"
        self.rsm.set_state(ctx.replicas_for_topic(topic), R.NON_EXISTENT, reason)
        self.psm.set_state(ctx.partitions_for_topic(topic), P.NON_EXISTENT, reason)
        await self.zk.delete(zk_data.topic_path(topic), recursive=True)
        await self._delete_quietly(zk_data.entity_config_path(zk_data.TOPIC_CONFIG, topic))
        await self._delete_quietly(zk_data.delete_topic_path(topic))
        ctx.remove_topic(topic)
        self.topic_configs.pop(topic, None)
        self.state_log.info(f"Deletion of topic {topic} finished")

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self.zk.delete(path)
        except NoNodeError:
            pass

    # ---------------------------------------------------------------- ISR changes

    async def on_isr_change_notification(self) -> None:
        if not self.active:
            return
        children = await self.zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH, watch=True)
        partitions: set[TopicPartition] = set()
        for child in children:
            path = f"{zk_data.ISR_CHANGE_NOTIFICATION_PATH}/{child}"
            try:
                data, _ = await self.zk.get(path)
                partitions |= zk_data.decode_isr_change(data)
            except NoNodeError:
                continue
            except zk_data.ZkDataError as exc:
                log.warning("ignoring ISR change notification %s: %s", path, exc)
            await self._delete_quietly(path)
        partitions = {tp for tp in partitions if tp.topic in self.ctx.all_topics}
        if not partitions:
            return
        await self._load_partition_states(partitions)
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids, partitions)
        for tp in sorted(partitions & self.ctx.partitions_being_reassigned):
            await self._maybe_complete_reassignment(tp)
        self._send()

    # ---------------------------------------------------------------- helpers

    def _require_active(self) -> None:
        if not self.active:
            raise NotActiveController(f"broker {self.node_id} is not the controller")


def _now_ms() -> int:
    return int(time.time() * 1000)
