"""ReplicaManager: the partitions this broker hosts, and appends and reads across them.

It keeps ``Partition`` objects in step with the metadata image (creating and deleting
logs through the LogManager), applies produce requests partition by partition, reads
for fetches, and wakes delayed fetches after each append. Handlers call it; it never
sees a socket. Called only from the event loop.

Creating a log costs a directory (about a millisecond on a journaling file system), so a
topic with more than ``INLINE_CREATES`` new local partitions gets its logs from a background
task that works in slices of ``CREATE_SLICE_S`` and yields to the loop between them; its
partitions appear as their logs do, ``logs_ready(name)`` waits for the last, and
``on_ready(name)`` is called then (the broker re-announces the topic to the coordinators).

In a cluster (``enable_replication``) the controller decides what this broker leads and
follows: ``apply_leader_and_isr`` (LeaderAndIsr) makes the logs the request brings, then
applies its states in the request's order, both in slices of ``CREATE_SLICE_S`` that yield to
the loop (thousands of new partitions do not stall the other requests);
``stop_replicas`` (StopReplica) stops and deletes. Together they create the partitions, make them leaders or followers and hand followers to the replica
fetchers (``replica_fetcher.py``). As leader it records followers' fetches
(``read_for_follower``), moves high watermarks, shrinks the ISR of followers lagging more
than ``replica.lag.time.max.ms`` and expands it when they catch up (``isr_updater.py``
writes the change to ZooKeeper), and completes acks=all produces waiting in the produce
purgatory (``delayed_produce.py``). In single-node mode none of this runs.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek._tasks import cancel_and_wait
from odradek.broker.broker_metrics import BrokerTopicMetrics, ReplicaMetrics
from odradek.broker.partition import Partition
from odradek.cluster.metadata_image import BrokerInfo, PartitionState
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INLINE_CREATES = 64
CREATE_SLICE_S = 0.02


class ReplicaManager:
    def __init__(self, node_id: int, log_manager, store, log_config_for, on_append=None, on_ready=None):
        self.node_id = node_id
        self.log_manager = log_manager
        self.store = store
        self.log_config_for = log_config_for  # topic name -> LogConfig
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.on_append = on_append or (lambda key: 0)  # (topic, partition) appended to
        self.on_ready = on_ready or (lambda name: None)
        self._creating: dict[str, asyncio.Task] = {}  # topic -> task creating its logs
        self.topic_metrics = BrokerTopicMetrics()
        self.replica_metrics = ReplicaMetrics()
        # -- replication (cluster mode; see enable_replication) --
        self.replicated = False  # LeaderAndIsr, not the local image, decides roles
        self.controller_epoch = -1
        self.broker_epoch = -1  # the czxid of this broker's registration, once registered
        self.fetchers = None  # ReplicaFetcherManager
        self.isr_updater = None  # IsrUpdater, or None: ISR changes are applied here alone
        self.on_high_watermark = lambda key: None  # wakes the fetch and produce purgatories
        self.on_role_change = lambda partition, leader: None  # coordinators load / unload
        self.replica_lag_time_max_ms = 30000
        self.replica_selector = None  # KIP-392: (partition, client rack, fetch offset) -> replica id or None
        self._tasks: set[asyncio.Task] = set()

    # -- keeping in step with metadata ------------------------------------------------------

    def sync_topic(self, name: str) -> None:
        """Create or refresh the local replicas of ``name`` from the metadata image. With
        replication the controller creates and deletes replicas (LeaderAndIsr, StopReplica);
        the image only refreshes their configs."""
        topic = self.store.image.topics.get(name)
        if self.replicated:
            if topic is not None:
                config = self.log_config_for(name)
                for (t, _), partition in self.partitions.items():
                    if t == name:
                        partition.update_config(config)
            return
        if topic is None:
            self.remove_topic(name)
            return
        config = self.log_config_for(name)
        missing = []
        for index, state in topic.partitions.items():
            if self.node_id not in state.replicas:
                continue
            partition = self.partitions.get((name, index))
            if partition is None:
                missing.append(index)
            else:
                partition.update_config(config)
        if not missing or name in self._creating:
            return  # a running creation task picks up new partitions before it ends
        if len(missing) <= INLINE_CREATES or not _loop_running():
            failed = None
            for index in missing:
                try:
                    self._create_partition(name, index, config, sync_dir=True)
                except errors.KafkaStorageErrorError as exc:
                    failed = exc  # its log dir is offline: the other partitions go on
            if failed is not None:
                log.error("some partitions of %s have no log on this broker: %s", name, failed.message)
            return
        task = asyncio.get_running_loop().create_task(self._create_in_slices(name), name=f"create-logs-{name}")
        self._creating[name] = task
        task.add_done_callback(lambda done: self._creation_done(name, done))

    def _create_partition(self, name: str, index: int, config, *, sync_dir: bool) -> None:
        state = self.store.image.topics[name].partitions[index]
        plog = self.log_manager.get_or_create_log(name, index, config, sync_dir=sync_dir)
        partition = Partition(name, index, plog, state, self.node_id, config)
        partition.counters = self.topic_metrics.for_topic(name)
        self.partitions[(name, index)] = partition
        if partition.is_leader:
            partition.become_leader(state)

    async def _create_in_slices(self, name: str) -> None:
        t0 = time.perf_counter()
        created = 0
        while True:
            topic = self.store.image.topics.get(name)
            if topic is None:
                return  # deleted meanwhile: remove_topic took what was made
            config = self.log_config_for(name)
            missing = [
                index
                for index, state in topic.partitions.items()
                if self.node_id in state.replicas and (name, index) not in self.partitions
            ]
            if not missing:
                break
            deadline = time.perf_counter() + CREATE_SLICE_S
            for index in missing:
                if self.store.image.topics.get(name) is not topic:
                    break  # deleted (or recreated) during the last yield
                self._create_partition(name, index, config, sync_dir=False)
                created += 1
                if time.perf_counter() >= deadline:
                    self.log_manager.sync_dirs()
                    await asyncio.sleep(0)
                    config = self.log_config_for(name)  # it may have been altered meanwhile
                    deadline = time.perf_counter() + CREATE_SLICE_S
            self.log_manager.sync_dirs()
        log.info("created %d logs of %s in %.1f s", created, name, time.perf_counter() - t0)

    def _creation_done(self, name: str, task: asyncio.Task) -> None:
        if self._creating.get(name) is task:
            del self._creating[name]
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, errors.KafkaError):
            log.error("creating the logs of %s failed: %s", name, exc)
            return
        if exc is not None:
            log.error("creating the logs of %s failed", name, exc_info=exc)
            return
        if name in self.store.image.topics:
            self.sync_topic(name)  # partitions added after the task's last look
            self.on_ready(name)

    async def logs_ready(self, name: str) -> None:
        """Wait until every local log of ``name`` exists (at once if none is being created)."""
        task = self._creating.get(name)
        if task is not None:
            await asyncio.shield(task)  # a client hanging up must not stop the creation

    def sync_all(self) -> None:
        for name in list(self.store.image.topics):
            self.sync_topic(name)

    def remove_topic(self, name: str) -> None:
        task = self._creating.pop(name, None)
        if task is not None:
            task.cancel()
        for key in [k for k in self.partitions if k[0] == name]:
            self.partitions.pop(key)
            self.log_manager.delete_log(*key)
            self.on_high_watermark(key)  # fetches waiting on it answer now, with the error
        self.topic_metrics.remove_topic(name)

    async def close(self) -> None:
        await cancel_and_wait(*self._creating.values())
        self._creating.clear()
        if self.fetchers is not None:
            await self.fetchers.close()
        await cancel_and_wait(*self._tasks)
        if self.isr_updater is not None:
            await self.isr_updater.close()

    def track(self, task: asyncio.Task) -> None:
        """Keep a background task until it ends; its failure is logged, close() cancels it."""
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("replica manager task %s failed", task.get_name(), exc_info=task.exception())

    # -- replication: roles from the controller (LeaderAndIsr, StopReplica) --------------

    def enable_replication(self, config_get, isr_updater=None, security=None) -> None:
        """Cluster mode: roles come from the controller, followers fetch, the ISR is kept.
        ``config_get`` reads broker config keys; ``isr_updater`` writes ISR changes to
        ZooKeeper (None: applied locally, for tests without a controller); ``security`` (a
        ``ConnectionSecurity``) is how fetchers connect to the inter-broker listener."""
        from odradek.broker.replica_fetcher import FetcherConfig, ReplicaFetcherManager
        from odradek.broker.replica_selector import replica_selector

        self.replicated = True
        self.isr_updater = isr_updater
        self.replica_selector = replica_selector(config_get("replica.selector.class"), self.store)
        self.replica_lag_time_max_ms = config_get("replica.lag.time.max.ms")
        self.fetchers = ReplicaFetcherManager(self, FetcherConfig.from_getter(self.node_id, config_get, security))
        self.track(asyncio.get_running_loop().create_task(self._isr_expiration(), name="isr-expiration"))

    async def create_logs(self, request) -> None:
        """Create the logs of the partitions a LeaderAndIsr makes this broker a replica of
        and it has none of yet, yielding to the loop every ``CREATE_SLICE_S`` (the directories
        are fsynced per slice). Nothing else changes: ``become_leader_or_follower`` then finds
        the logs and applies the states. A log that cannot be created is left to it (it
        answers KAFKA_STORAGE_ERROR for that partition)."""
        t0 = time.perf_counter()
        deadline = t0 + CREATE_SLICE_S
        created = 0
        for topic_state in request.topic_states:
            name = topic_state.topic_name
            config = None
            for ps in topic_state.partition_states:
                index = ps.partition_index
                if (name, index) in self.partitions or self.node_id not in ps.replicas:
                    continue
                if self.log_manager.get_log(name, index) is not None:
                    continue
                if config is None:
                    config = self.log_config_for(name)
                try:
                    self.log_manager.get_or_create_log(name, index, config, sync_dir=False)
                except errors.KafkaStorageErrorError:
                    continue
                created += 1
                if time.perf_counter() >= deadline:
                    self.log_manager.sync_dirs()
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + CREATE_SLICE_S
        if created:
            self.log_manager.sync_dirs()
            if created > INLINE_CREATES:
                log.info("LeaderAndIsr: created %d logs in %.1f s", created, time.perf_counter() - t0)

    def become_leader_or_follower(self, request) -> tuple[int, list[tuple[str, int, int]]]:
        """Apply a LeaderAndIsr request (Kafka's becomeLeaderOrFollower). ``request`` has
        Kafka's fields (``controller_epoch``, ``topic_states[].partition_states[]`` with
        ``leader``, ``leader_epoch``, ``isr``, ``replicas``, ``partition_epoch``; and
        ``live_leaders[]`` with ``broker_id``, ``host_name``, ``port``). Returns the
        request's error code and ``(topic, partition, error code)`` per partition:
        STALE_CONTROLLER_EPOCH for an older controller (nothing applied) or a leader epoch
        older than the one this broker has, UNKNOWN_TOPIC_OR_PARTITION when this broker is
        not a replica, KAFKA_STORAGE_ERROR when its log dir is offline."""
        if self._stale(request):
            return ErrorCode.stale_controller_epoch, []
        results: list[tuple[str, int, int]] = []
        for _ in self._apply_states(request, results):
            pass
        return 0, results

    async def apply_leader_and_isr(self, request) -> tuple[int, list[tuple[str, int, int]]]:
        """``become_leader_or_follower`` for the LeaderAndIsr handler, which must not stall
        the loop for a request of thousands of partitions: the logs are created first
        (``create_logs``), then the states applied in the request's order, both yielding to
        the loop every ``CREATE_SLICE_S``. A newer controller heard from meanwhile wins: the
        states not applied yet answer STALE_CONTROLLER_EPOCH."""
        if self._stale(request):
            return ErrorCode.stale_controller_epoch, []
        await self.create_logs(request)
        if self._stale(request):
            return ErrorCode.stale_controller_epoch, []
        results: list[tuple[str, int, int]] = []
        deadline = time.perf_counter() + CREATE_SLICE_S
        for _ in self._apply_states(request, results):
            if time.perf_counter() >= deadline:
                await asyncio.sleep(0)
                deadline = time.perf_counter() + CREATE_SLICE_S
                if request.controller_epoch < self.controller_epoch:
                    break
        done = {(t, p) for t, p, _ in results}
        results += [
            (ts.topic_name, ps.partition_index, ErrorCode.stale_controller_epoch)
            for ts in request.topic_states
            for ps in ts.partition_states
            if (ts.topic_name, ps.partition_index) not in done
        ]
        return 0, results

    def _stale(self, request) -> bool:
        """Whether ``request`` comes from an older controller than one heard from (else its
        epoch becomes the current one)."""
        if request.controller_epoch < self.controller_epoch:
            log.warning(
                "ignoring LeaderAndIsr from controller %d with epoch %d: the current controller epoch is %d",
                request.controller_id,
                request.controller_epoch,
                self.controller_epoch,
            )
            return True
        self.controller_epoch = request.controller_epoch
        return False

    def _apply_states(self, request, results: list):
        """Apply the request's partition states in order, appending ``(topic, partition,
        error code)`` to ``results``; yields after each one."""
        leaders = {b.broker_id: BrokerInfo(b.broker_id, b.host_name, b.port) for b in request.live_leaders}
        now_ms = int(time.time() * 1000)
        for topic_state in request.topic_states:
            name = topic_state.topic_name
            configs: list = []  # the topic's LogConfig, looked up once
            for ps in topic_state.partition_states:
                key = (name, ps.partition_index)
                code = self._apply_partition_state(key, ps, request.controller_epoch, leaders, now_ms, configs)
                results.append((name, ps.partition_index, code))
                yield

    def _apply_partition_state(self, key, ps, controller_epoch: int, leaders, now_ms: int, configs: list) -> int:
        name, index = key
        replicas = list(ps.replicas)
        if self.node_id not in replicas:
            log.warning("LeaderAndIsr for %s-%d, of which broker %d is not a replica", name, index, self.node_id)
            return ErrorCode.unknown_topic_or_partition
        if self.log_manager.offline_dirs and self.log_manager.is_offline(name, index):
            log.warning("LeaderAndIsr for %s-%d: its log dir is offline; answering KAFKA_STORAGE_ERROR", name, index)
            return ErrorCode.kafka_storage_error
        partition = self.partitions.get(key)
        if partition is not None and ps.leader_epoch < partition.leader_epoch:
            log.warning(
                "ignoring LeaderAndIsr for %s-%d with leader epoch %d: this broker has epoch %d",
                name,
                index,
                ps.leader_epoch,
                partition.leader_epoch,
            )
            return ErrorCode.stale_controller_epoch
        state = PartitionState(ps.leader, ps.leader_epoch, replicas, list(ps.isr), ps.partition_epoch)
        try:
            if partition is None:
                if not configs:
                    configs.append(self.log_config_for(name))
                config = configs[0]
                plog = self.log_manager.get_or_create_log(name, index, config, sync_dir=True)
                partition = Partition(name, index, plog, state, self.node_id, config)
                partition.state = PartitionState(-1, -1, replicas, [], ps.partition_epoch)  # no role yet
                partition.counters = self.topic_metrics.for_topic(name)
                self.partitions[key] = partition
            if ps.leader == self.node_id:
                self.fetchers.remove_partition(key)
                if getattr(ps, "leader_recovery_state", 0) == 1:
                    log.warning(
                        "%s-%d: leader by unclean election at epoch %d: records acknowledged by the "
                        "former in-sync replicas and missing here are lost",
                        name,
                        index,
                        ps.leader_epoch,
                    )
                if partition.make_leader(state, controller_epoch, now_ms):
                    log.info("%s: leader at epoch %d, ISR %s", partition, state.leader_epoch, state.isr)
                    self.on_role_change(partition, True)
            else:
                was_leader = partition.is_leader
                changed = partition.make_follower(state, controller_epoch)
                if was_leader:
                    self.on_role_change(partition, False)
                leader = leaders.get(ps.leader)
                if ps.leader < 0 or leader is None:
                    self.fetchers.remove_partition(key)  # no live leader: wait for the next state
                elif changed or self.fetchers.leader_of(key) != ps.leader:
                    self.fetchers.add_partition(key, leader, state.leader_epoch)
                    log.info("%s: follower of broker %d at epoch %d", partition, ps.leader, state.leader_epoch)
            self.on_high_watermark(key)  # waiting produces and fetches re-check their partition
        except errors.KafkaStorageErrorError as exc:
            log.error("LeaderAndIsr for %s-%d: %s", name, index, exc.message)
            return ErrorCode.kafka_storage_error
        return 0

    def stop_replicas(self, request) -> tuple[int, list[tuple[str, int, int]]]:
        """Apply a StopReplica request (Kafka's stopReplicas): stop fetching, stop leading,
        and with ``delete_partition`` delete the log. A leader epoch older than this
        broker's answers FENCED_LEADER_EPOCH (-1 and -2, "no epoch" and "during a topic
        deletion", always match)."""
        if request.controller_epoch < self.controller_epoch:
            return ErrorCode.stale_controller_epoch, []
        self.controller_epoch = request.controller_epoch
        results = []
        for topic_state in request.topic_states:
            name = topic_state.topic_name
            for ps in topic_state.partition_states:
                key = (name, ps.partition_index)
                results.append((name, ps.partition_index, self._stop_replica(key, ps.leader_epoch, ps.delete_partition)))
        return 0, results

    def _stop_replica(self, key, leader_epoch: int, delete: bool) -> int:
        partition = self.partitions.get(key)
        if partition is not None and leader_epoch >= 0 and leader_epoch < partition.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if self.fetchers is not None:
            self.fetchers.remove_partition(key)
        if partition is None:
            if delete and self.log_manager.get_log(*key) is not None:
                self.log_manager.delete_log(*key)
            return 0
        was_leader = partition.is_leader
        state = partition.state
        partition.state = PartitionState(-1, state.leader_epoch, state.replicas, [], state.partition_epoch)
        if delete:
            self.partitions.pop(key, None)
            self.log_manager.delete_log(*key)
        if was_leader:
            self.on_role_change(partition, False)
        self.on_high_watermark(key)
        return 0

    # -- replication: the leader's side ----------------------------------------------------

    def read_for_follower(
        self,
        replica_id: int,
        plan,
        max_bytes: int,
        *,
        file_slices: bool = False,
        log_starts=None,
        last_fetched=None,
    ):
        """A follower's fetch: record how far each of its logs reaches (its fetch offset) and
        where it starts (``log_starts``: (topic, partition) -> its log start offset),
        advancing high watermarks and low watermarks and expanding ISRs, then read up to the
        log end (not the high watermark). A partition whose log diverged from this one
        (``last_fetched``, see ``read``) tells nothing of the follower's log: its fetch
        offset is past the divergence. Same results as ``read``."""
        now_ms = int(time.time() * 1000)
        refused = {}  # (topic, partition) -> error code: not a replica of it, for one
        for topic, index, offset, _, epoch in plan:
            partition = self.partitions.get((topic, index))
            if partition is None or not partition.is_leader:
                continue
            key = (topic, index)
            try:
                partition.check_leader(epoch)
                fetched_epoch = last_fetched.get(key, -1) if last_fetched else -1
                if fetched_epoch >= 0 and partition.diverging_epoch(fetched_epoch, offset) is not None:
                    continue  # read() answers where the logs part
                low = partition.low_watermark
                moved = partition.update_follower_fetch_state(
                    replica_id, offset, now_ms, log_starts.get(key, -1) if log_starts else -1
                )
            except errors.KafkaError as exc:
                refused[key] = exc.code
                log.warning("%s: fetch from broker %d refused: %s", partition, replica_id, exc.message)
                continue
            expanded = partition.isr_to_expand(replica_id)
            if expanded is not None:
                self.change_isr(partition, expanded, f"broker {replica_id} caught up")
            if moved or partition.low_watermark != low:
                self.on_high_watermark(key)
        topics, total, had_error = self.read(
            plan, max_bytes, 0, file_slices=file_slices, replica_id=replica_id, last_fetched=last_fetched
        )
        if refused:
            had_error = True
            topics = [
                (
                    topic,
                    [
                        (e[0], refused[(topic, e[0])], -1, -1, -1, None, b"") if (topic, e[0]) in refused else e
                        for e in entries
                    ],
                )
                for topic, entries in topics
            ]
        return topics, total, had_error

    def on_follower_append(self, key) -> None:
        """A fetcher appended to a follower: fetches waiting here (other followers, rare) wake."""
        self.on_append(key)

    def change_isr(self, partition: Partition, isr: list[int], why: str) -> None:
        """Record ``isr`` for ``partition`` (ZooKeeper first when there is an updater)."""
        if self.isr_updater is None:
            self._apply_isr(partition, isr, partition.state.partition_epoch + 1, why)
            return
        partition.isr_change_in_flight = True
        self.track(
            asyncio.get_running_loop().create_task(self._write_isr(partition, isr, why), name=f"isr-{partition}")
        )

    async def _write_isr(self, partition: Partition, isr: list[int], why: str) -> None:
        state = partition.state
        epoch = state.leader_epoch
        try:
            version = await self.isr_updater.write(
                partition.topic,
                partition.index,
                self.node_id,
                epoch,
                isr,
                partition.controller_epoch,
                state.partition_epoch,
            )
        except Exception as exc:
            log.warning(
                "%s: could not record ISR %s (%s): %s; waiting for the controller's next state",
                partition,
                isr,
                why,
                exc,
            )
            return
        finally:
            partition.isr_change_in_flight = False
        if partition.is_leader and partition.leader_epoch == epoch:
            self._apply_isr(partition, isr, version, why)

    def _apply_isr(self, partition: Partition, isr: list[int], version: int, why: str) -> None:
        old = list(partition.state.isr)
        partition.apply_isr(isr, version)
        if len(isr) < len(old):
            self.replica_metrics.isr_shrinks += 1
        else:
            self.replica_metrics.isr_expands += 1
        level = logging.WARNING if len(isr) < len(old) else logging.INFO
        log.log(level, "%s: ISR %s -> %s (%s)", partition, old, isr, why)
        self.on_high_watermark((partition.topic, partition.index))

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every half of ``replica.lag.time.max.ms``."""
        while True:
            await asyncio.sleep(max(self.replica_lag_time_max_ms / 2000, 0.01))
            now_ms = int(time.time() * 1000)
            for partition in list(self.partitions.values()):
                shrunk = partition.isr_to_shrink(now_ms, self.replica_lag_time_max_ms)
                if shrunk is not None:
                    out = [r for r in partition.state.isr if r not in shrunk]
                    self.change_isr(
                        partition, shrunk, f"{out} not caught up for {self.replica_lag_time_max_ms} ms"
                    )

    # -- access ----------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            info = self.store.image.topics.get(topic)
            if info is not None and index in info.partitions:  # it exists, on other brokers (Kafka's rule)
                raise errors.NotLeaderOrFollowerError(f"broker {self.node_id} hosts no replica of {topic}-{index}")
            raise errors.UnknownTopicOrPartitionError(f"this broker has no partition {topic}-{index}")
        return partition

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}

    # -- produce ---------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        index: int,
        records,
        required_acks: int,
        now_ms: int | None = None,
        origin: str = "client",
    ):
        """Append to one partition as leader; raises KafkaError on failure. ``origin``
        "coordinator" lets the group and transaction coordinators write transaction markers."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self.get_partition(topic, index)  # raises
        if self.log_manager.offline_dirs and self.log_manager.is_offline(topic, index):
            raise errors.KafkaStorageErrorError(
                f"{topic}-{index} is in an offline log dir: writes are refused until the broker restarts"
            )
        counters = partition.counters
        counters.produce_requests += 1
        try:
            info = partition.append_as_leader(
                records, required_acks, int(time.time() * 1000) if now_ms is None else now_ms, origin
            )
        except errors.KafkaError:
            counters.failed_produce_requests += 1
            raise
        except OSError as exc:  # the log's dir failed under it
            counters.failed_produce_requests += 1
            self.log_manager._on_log_disk_error(partition.log, exc)
            raise errors.KafkaStorageErrorError(f"{topic}-{index}: {exc.strerror or exc}") from None
        counters.messages_in += info.record_count
        counters.bytes_in += len(records)
        self.on_append((topic, index))
        return partition, info

    # -- delete records ------------------------------------------------------------------

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """Move a partition's log start offset up to ``offset`` (-1: the high watermark), as
        DeleteRecords does; returns the new log start offset. Raises KafkaError. Internal
        topics are refused (INVALID_TOPIC_EXCEPTION), as in Kafka."""
        info = self.store.image.topics.get(topic)
        if info is not None and info.internal:
            raise errors.InvalidTopicExceptionError(
                f"records of internal topic '{topic}' cannot be deleted: they are its coordinator's state"
            )
        partition = self.get_partition(topic, index)
        partition.check_leader()
        return partition.delete_records_on_leader(offset)

    # -- fetch -----------------------------------------------------------------------------

    def read(
        self,
        plan,
        max_bytes: int,
        isolation_level: int,
        *,
        file_slices: bool = False,
        sizes_only: bool = False,
        replica_id: int = -1,
        client_rack: str = "",
        follower_reads: bool = False,
        last_fetched=None,
    ):
        """Read the partitions of a fetch (Kafka's ``readFromLocalLog``): ``plan`` is
        ``(topic, partition, fetch offset, partition max bytes, current leader epoch or -1)``
        in request order. Returns (per topic, in request order, the partitions' results as
        ``protocol.hot_responses.fetch_response`` takes them; total bytes; whether any
        partition failed). Each partition reads up to the high watermark (read_committed: the
        last stable offset, with the aborted transactions its records overlap) and
        ``min(partition max bytes, what is left of max_bytes)``; the first partition with
        data returns at least one whole batch (KIP-74).

        Record data comes back as file slices with ``file_slices`` (the connection sends them
        with zero copy), else as bytes read from the page cache; ``sizes_only`` reads only how
        much there is (a waiting fetch asking whether it can complete). A follower
        (``replica_id`` >= 0) reads up to the log end offset. In a cluster a consumer
        speaking Fetch v11+ (``follower_reads``) may read a follower (up to its high
        watermark), as Kafka allows since KIP-392; with a replica selector
        (``replica.selector.class``, KIP-392) the leader answers a consumer with a
        ``client_rack`` by naming a replica in that rack instead of sending records.

        ``last_fetched`` (Fetch v12+) maps partitions to the leader epoch of the last batch
        the fetcher has: where its log diverged from this one the partition answers no
        records and a 9th item, the diverging epoch ``(epoch, end offset)`` (KIP-595), and
        the fetch counts as failed (it is answered at once).
        """
        partitions = self.partitions
        results: dict[str, list] = {}
        total = 0
        had_error = False
        for topic, index, offset, partition_max, epoch in plan:
            out = results.setdefault(topic, [])
            try:
                partition = partitions.get((topic, index))
                if partition is None:
                    partition = self.get_partition(topic, index)  # raises
                if follower_reads and self.replicated and not partition.is_leader:
                    partition.check_replica(epoch)
                else:
                    partition.check_leader(epoch)
                if last_fetched:
                    fetched_epoch = last_fetched.get((topic, index), -1)
                    diverging = partition.diverging_epoch(fetched_epoch, offset) if fetched_epoch >= 0 else None
                    if diverging is not None:
                        had_error = True
                        hw, lso, start = partition.high_watermark, partition.last_stable_offset, partition.log_start_offset
                        out.append((index, 0, hw, lso, start, None, b"", -1, diverging))
                        continue
                if client_rack and self.replica_selector is not None and replica_id < 0:
                    preferred = self.replica_selector(partition, client_rack, offset)
                    if preferred is not None and preferred != self.node_id:
                        hw = partition.high_watermark
                        lso = partition.last_stable_offset
                        out.append((index, 0, hw, lso, partition.log_start_offset, None, b"", preferred))
                        continue
                budget = min(partition_max, max_bytes - total)
                lso = partition.last_stable_offset
                if replica_id < 0:
                    read = partition.read(
                        offset, max(budget, 0), isolation_level=isolation_level, min_one_message=total == 0
                    )
                else:
                    read = partition.log.read(offset, max(budget, 0), min_one_message=total == 0)
                records = None
                size = 0
                aborted = None
                if read.records is not None:
                    size = read.records.size
                    if not sizes_only and size:
                        records = read.records if file_slices else read.records.read()
                        if isolation_level == 1:
                            aborted = partition.aborted_transactions(offset, read.records, lso)
                total += size
                out.append(
                    (
                        index,
                        0,
                        partition.high_watermark,
                        lso,
                        partition.log_start_offset,
                        (aborted or []) if isolation_level == 1 else None,
                        records if records is not None else b"",
                    )
                )
            except errors.KafkaError as exc:
                had_error = True
                out.append((index, exc.code, -1, -1, -1, None, b""))
        return list(results.items()), total, had_error


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
