"""The distributed herder: connectors and tasks spread over the workers of one ``group.id`` (Kafka's ``DistributedHerder``).

Every worker reads the config, offset and status topics to their end at start and follows
them, so its view of connectors, target states, task configs, offsets and statuses is the
topics'. A REST change writes a config record (on the leader, where the REST layer forwards
writes) and waits until the record is read back. The group leader hands out connectors and
tasks (``IncrementalAssignor``); each worker runs what it was assigned and reconciles its
running work with every config record: the connector's owner writes task configs
(``task-…`` then ``commit-…``) when they change, a task's owner restarts it with new configs,
and the leader rebalances when the set of work changes. Each worker publishes the states of
what it runs to the status topic. Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from odradek.client.producer.producer import Producer
from odradek.connect.connect_assignor import IncrementalAssignor, Item, items_of
from odradek.connect.connect_group import ConnectGroupMember
from odradek.connect.connect_protocol import CONNECTOR_TASK, Assignment, WorkerMetadata
from odradek.connect.herder import HerderError, StandaloneHerder
from odradek.connect.kafka_stores import ConfigState, KafkaOffsetStore, dumps, loads, target_state_value
from odradek.connect.topic_log import TopicLog
from odradek.connect.worker import STOPPED, Worker
from odradek.connect.worker_tasks import FAILED, PAUSED, RUNNING, UNASSIGNED

log = logging.getLogger("odradek.connect")

STATUS_INTERVAL_S = 0.5
FENCE_RETRY_S = 5.0


async def fence_producer(options: dict, transactional_id: str) -> None:
    producer = Producer(**options, enable_idempotence=True, transactional_id=transactional_id)
    await producer.start()
    try:
        await producer.init_transactions()
    finally:
        await producer.close()


class DistributedHerder(StandaloneHerder):
    def __init__(self, worker: Worker, offset_store: KafkaOffsetStore):
        super().__init__(worker)
        self.state = ConfigState()
        self.configs = self.state.connectors  # the base class's reads see the topic's state
        self.targets = self.state.targets
        self.statuses: dict[str, dict[str, Any]] = {}
        self.offset_store = offset_store
        self.exactly_once_source = offset_store.exactly_once_group is not None
        self.owned: set[Item] = set()
        self.generation = -1
        self.url = ""
        self.leader_url = ""
        cfg = worker.config
        options = worker.config.client_options
        self.config_log = TopicLog(cfg["config.storage.topic"], 1, cfg["config.storage.replication.factor"],
                                   options, self._on_config)
        self.offset_log = TopicLog(cfg["offset.storage.topic"], cfg["offset.storage.partitions"],
                                   cfg["offset.storage.replication.factor"], options, offset_store.on_record)
        self.status_log = TopicLog(cfg["status.storage.topic"], cfg["status.storage.partitions"],
                                   cfg["status.storage.replication.factor"], options, self._on_status)
        offset_store.log = self.offset_log
        self.assignor = IncrementalAssignor(cfg["scheduled.rebalance.max.delay.ms"])
        self.group = ConnectGroupMember(
            cfg.client_options("consumer"), cfg["group.id"],
            {k: cfg[k] for k in ("session.timeout.ms", "rebalance.timeout.ms", "heartbeat.interval.ms")},
            cfg["connect.protocol"], self._metadata, self._assign, self._on_assignment,
        )
        self._published: dict[str, tuple[str, str | None]] = {}
        self._changes: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._background: list[asyncio.Task] = []
        self._work_signature: dict[str, int] | None = None
        self.rebalances = 0

    async def start(self, url: str) -> None:
        self.url = url
        for topic_log in (self.config_log, self.offset_log, self.status_log):
            await topic_log.start()
        self._work_signature = self._signature()
        loop = asyncio.get_running_loop()
        self._background = [loop.create_task(self._reconcile_loop()), loop.create_task(self._publish_loop())]
        self.group.start()

    # -- the topics ------------------------------------------------------------------------

    def _on_config(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        text = key.decode()
        change = self.state.apply(text, loads(value))
        if change is not None:
            if change[0] == "restart":
                change = ("restart:" + (value or b"{}").decode(), change[1])
            self._changes.put_nowait(change)

    def _on_status(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        if value is None:
            self.statuses.pop(key.decode(), None)
        else:
            self.statuses[key.decode()] = loads(value)

    def _signature(self) -> dict[str, int]:
        return {name: len(self.state.tasks.get(name, [])) for name in self.state.connectors}

    def _work(self) -> set[Item]:
        work = {(name, CONNECTOR_TASK) for name in self.state.connectors}
        for name in self.state.connectors:
            work |= {(name, t) for t in range(len(self.state.tasks.get(name, [])))}
        return work

    # -- the group -------------------------------------------------------------------------

    def _metadata(self) -> WorkerMetadata:
        alloc: dict[str, list[int]] = {}
        for connector, task in sorted(self.owned):
            alloc.setdefault(connector, []).append(task)
        return WorkerMetadata(self.url, self.state.offset, alloc)

    def _assign(self, protocol: str, leader: str, members: dict[str, WorkerMetadata],
                generation: int) -> dict[str, Assignment]:
        work = self._work()
        self._work_signature = self._signature()  # what this round assigns (a new leader's was stale)
        plan, delay = self.assignor.assign(leader, self.url, self.state.offset, work, members, generation,
                                           self.group.generation, self._last_owners(work))
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.group.request_rejoin)
        return plan

    def _last_owners(self, work: set[Item]) -> dict[Item, str]:
        """The worker each connector and task last reported from (the status topic), unless it stopped it."""
        out: dict[Item, str] = {}
        for name, task in work:
            key = f"status-connector-{name}" if task == CONNECTOR_TASK else f"status-task-{name}-{task}"
            status = self.statuses.get(key) or {}
            if status.get("worker_id") and status.get("state") != UNASSIGNED:
                out[(name, task)] = str(status["worker_id"])
        return out

    async def _on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.generation, self.leader_url = generation, assignment.leader_url
        self.rebalances += 1
        if assignment.config_offset > self.state.offset:
            await self.config_log.read_to_end()
        async with self.lock:
            wanted = items_of(assignment.assigned)
            await self._stop_items(self.owned - wanted)
            self.owned = set(wanted)
            for name in sorted({c for c, t in wanted if t == CONNECTOR_TASK}):
                if name not in self.worker.connectors:
                    await self._start_connector(name)
            for name, task in sorted(wanted):
                if task != CONNECTOR_TASK and (name, task) not in self.worker.tasks:
                    await self._start_owned_task(name, task)
        if assignment.revoked:
            self.group.request_rejoin()

    async def _stop_items(self, items: set[Item]) -> None:
        for name, task in sorted(items):
            if task != CONNECTOR_TASK:
                await self.worker.stop_tasks(name, [task])
        for name, task in sorted(items):
            if task == CONNECTOR_TASK:
                await self.worker.stop_connector(name)
        self.owned -= items
        await self._publish_unassigned(items)

    async def _start_connector(self, name: str) -> None:
        config = self.state.connectors.get(name)
        if config is None:
            return
        target = self.state.targets.get(name, RUNNING)
        try:
            state = await self.worker.start_connector(name, config, target)
        except Exception:
            log.error("connector %s cannot be started:\n%s", name, traceback.format_exc())
            return
        if target == STOPPED:
            if self.state.tasks.get(name):
                await self._write_task_configs(name, [])
            return
        if state.state != FAILED:
            await self._write_task_configs(name, state.task_configs)
            if self._awaits_fencing(name):  # its last worker died between the task configs and the fencing
                await self._fence_zombies(name)

    async def _write_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        if self.state.tasks.get(name) == configs and name in self.state.tasks:
            return
        records = [(f"task-{name}-{i}".encode(), dumps({"properties": c})) for i, c in enumerate(configs)]
        records.append((f"commit-{name}".encode(), dumps({"tasks": len(configs)})))
        await self.config_log.send_many(records)

    def _fences(self, name: str) -> bool:
        """Whether new task configs of ``name`` wait for its earlier tasks' producers to be fenced (KIP-618)."""
        return self.exactly_once_source and self.connector_type(name) == "source"

    def _awaits_fencing(self, name: str) -> bool:
        return name in self.state.fenced_counts and self._fences(name)

    async def _fence_zombies(self, name: str) -> None:
        """On the connector's worker, after new task configs: fence the transactional producers of
        every task of the earlier generation, then write the ``task-count-record`` that lets the
        new tasks start (Kafka's order).

        A task of an earlier generation may still run on a worker the group has lost sight of (a
        zombie); once its transactional id is fenced it can commit nothing more, whatever the new
        task count. InitProducerId on each id, as Kafka's ``Admin.fenceProducers``, aborts the
        zombie's open transaction."""
        count = self.state.fenced_counts[name]
        ids = [tid for task in range(count) if (tid := self.offset_store.transactional_id(name, task))]
        try:
            await asyncio.gather(*(fence_producer(self.worker.client_options("producer"), tid) for tid in ids))
        except Exception as exc:  # no new task starts before the old ones are fenced
            log.error("connector %s: cannot fence the producers of its earlier tasks (%s); retried in %.0f s",
                      name, exc, FENCE_RETRY_S)
            asyncio.get_running_loop().call_later(FENCE_RETRY_S, self._changes.put_nowait, ("commit", name))
            return
        if ids:
            log.info("connector %s: fenced the producers of its %d earlier task(s)", name, len(ids))
        await self.config_log.send(f"task-count-record-{name}".encode(),
                                   dumps({"task-count": len(self.state.tasks.get(name, []))}))

    async def _start_owned_task(self, name: str, task: int) -> None:
        configs = self.state.tasks.get(name, [])
        config = self.state.connectors.get(name)
        if config is None or task >= len(configs) or self.state.targets.get(name) == STOPPED:
            return
        if self._awaits_fencing(name):
            return  # started when the task-count record is read
        try:
            await self.worker.start_task(name, task, config, self.state.targets.get(name) == PAUSED, configs[task])
        except Exception:
            trace = traceback.format_exc()
            log.error("task %s-%d cannot be started:\n%s", name, task, trace)
            self.worker.failed_task(name, task, trace)

    # -- reconciling with config records ---------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            kind, name = await self._changes.get()
            try:
                async with self.lock:
                    await self._reconcile(kind, name)
            except Exception:
                log.exception("applying the config change %s of %s failed", kind, name)
            if self.group.is_leader and self._signature() != self._work_signature:
                self._work_signature = self._signature()
                self.group.request_rejoin()

    async def _reconcile(self, kind: str, name: str) -> None:
        owns_connector = (name, CONNECTOR_TASK) in self.owned
        local_tasks = sorted(t for c, t in self.owned if c == name and t != CONNECTOR_TASK)
        if name not in self.state.connectors:  # deleted
            await self._stop_items({i for i in self.owned if i[0] == name})
            if owns_connector:
                await self._tombstone_statuses(name)
            return
        if kind == "connector" and owns_connector:
            await self.worker.stop_connector(name)
            await self._start_connector(name)
        elif kind == "target":
            await self._apply_target(name, owns_connector, local_tasks)
        elif kind == "commit" and self._awaits_fencing(name):
            # The earlier generation stops everywhere; the connector's worker fences its producers.
            await self.worker.stop_tasks(name)
            if owns_connector:
                await self._fence_zombies(name)
        elif kind == "fenced":
            for task in local_tasks:
                if (name, task) not in self.worker.tasks:
                    await self._start_owned_task(name, task)
        elif kind == "commit":
            configs = self.state.tasks.get(name, [])
            for task in local_tasks:
                runner = self.worker.tasks.get((name, task))
                if task >= len(configs):
                    await self._stop_items({(name, task)})
                elif runner is None or runner.props != configs[task]:
                    await self.worker.stop_tasks(name, [task])
                    await self._start_owned_task(name, task)
        elif kind.startswith("restart:"):
            await self._apply_restart(name, loads(kind[len("restart:"):].encode()), owns_connector, local_tasks)

    async def _apply_target(self, name: str, owns_connector: bool, local_tasks: list[int]) -> None:
        target = self.state.targets.get(name, RUNNING)
        state = self.worker.connectors.get(name)
        was_stopped = state is not None and state.state == STOPPED
        if target == STOPPED or was_stopped:
            await self.worker.stop_tasks(name)
            if owns_connector:
                await self.worker.stop_connector(name)
                await self._start_connector(name)
            if target != STOPPED:
                for task in local_tasks:
                    await self._start_owned_task(name, task)
        elif target == PAUSED:
            self.worker.pause(name)
        else:
            self.worker.resume(name)

    async def _apply_restart(self, name: str, request: dict, owns_connector: bool, local_tasks: list[int]) -> None:
        only_failed = bool(request.get("only-failed"))
        state = self.worker.connectors.get(name)
        if owns_connector and (not only_failed or state is None or state.state == FAILED):
            await self.worker.stop_connector(name)
            await self._start_connector(name)
        if request.get("include-tasks"):
            for task in local_tasks:
                runner = self.worker.tasks.get((name, task))
                if not only_failed or runner is None or runner.state == FAILED:
                    await self.worker.stop_tasks(name, [task])
                    await self._start_owned_task(name, task)

    # -- statuses --------------------------------------------------------------------------

    def _local_states(self) -> dict[str, tuple[str, str | None]]:
        out: dict[str, tuple[str, str | None]] = {}
        for name, state in self.worker.connectors.items():
            if (name, CONNECTOR_TASK) in self.owned:
                out[f"status-connector-{name}"] = (state.state, state.trace)
        for (name, task), runner in self.worker.tasks.items():
            out[f"status-task-{name}-{task}"] = (runner.state, runner.trace)
        return out

    async def _publish_loop(self) -> None:
        while True:
            try:
                await self.publish_statuses()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cannot write statuses: %s", exc)
            await asyncio.sleep(STATUS_INTERVAL_S)

    async def publish_statuses(self) -> None:
        records = []
        for key, (state, trace) in self._local_states().items():
            if self._published.get(key) != (state, trace):
                self._published[key] = (state, trace)
                value = {"state": state, "trace": trace, "worker_id": self.worker.worker_id,
                         "generation": self.generation}
                records.append((key.encode(), dumps(value)))
        if records:
            await self.status_log.send_many(records)

    async def _publish_unassigned(self, items: set[Item]) -> None:
        """What this worker stopped is UNASSIGNED, as Kafka's worker reports a connector or task
        it shuts down; a status another worker wrote since (a newer owner) is left alone."""
        records = []
        for name, task in sorted(items):
            key = f"status-connector-{name}" if task == CONNECTOR_TASK else f"status-task-{name}-{task}"
            current = self.statuses.get(key)
            if current is not None and current.get("worker_id") not in (None, "", self.worker.worker_id):
                continue
            self._published[key] = (UNASSIGNED, None)
            value = {"state": UNASSIGNED, "trace": None, "worker_id": self.worker.worker_id,
                     "generation": self.generation}
            records.append((key.encode(), dumps(value)))
        if records:
            try:
                await self.status_log.send_many(records)
            except Exception as exc:  # the statuses are advisory; the stop itself succeeded
                log.warning("cannot write UNASSIGNED statuses: %s", exc)

    async def _tombstone_statuses(self, name: str) -> None:
        keys = [k for k in self.statuses if k == f"status-connector-{name}" or k.startswith(f"status-task-{name}-")]
        for key in keys:
            self._published.pop(key, None)
        await self.status_log.send_many([(k.encode(), None) for k in keys])

    def rebalance_metrics(self) -> dict[str, Any]:
        return {"leader_name": self.leader_url, "epoch": self.generation, "rebalancing": self.group.rebalancing,
                "completed_rebalances_total": self.rebalances}

    # -- the REST API's reads --------------------------------------------------------------

    def connector_type(self, name: str) -> str:
        try:
            return self.worker.plugins.find(self._config(name)["connector.class"]).type
        except Exception:
            return "unknown"

    def info(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        tasks = [{"connector": name, "task": i} for i in range(len(self.state.tasks.get(name, [])))]
        return {"name": name, "config": dict(config), "tasks": tasks, "type": self.connector_type(name)}

    def _status_entry(self, key: str) -> dict[str, Any]:
        found = self.statuses.get(key)
        if found is None:
            return {"state": UNASSIGNED, "worker_id": ""}
        out = {"state": found.get("state", UNASSIGNED), "worker_id": found.get("worker_id", "")}
        if found.get("trace"):
            out["trace"] = found["trace"]
        return out

    def status(self, name: str) -> dict[str, Any]:
        self._config(name)
        tasks = [{"id": i, **self._status_entry(f"status-task-{name}-{i}")}
                 for i in range(len(self.state.tasks.get(name, [])))]
        return {"name": name, "connector": self._status_entry(f"status-connector-{name}"), "tasks": tasks,
                "type": self.connector_type(name)}

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        self._config(name)
        if task_id >= len(self.state.tasks.get(name, [])):
            raise HerderError(404, f"Task {name}-{task_id} not found")
        return {"id": task_id, **self._status_entry(f"status-task-{name}-{task_id}")}

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._config(name)
        return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                for i, c in enumerate(self.state.tasks.get(name, []))]

    # -- the REST API's writes (on the leader) ---------------------------------------------

    async def put_config(self, name: str, config: dict[str, str], allow_replace: bool,
                         initial_state: str = RUNNING) -> tuple[bool, dict[str, Any]]:
        if not name or "/" in name:
            raise HerderError(400, f"Connector name {name!r} is invalid: it must be non-empty and without '/'")
        config = {**{k: str(v) for k, v in config.items()}, "name": name}
        exists = name in self.state.connectors
        if exists and not allow_replace:
            raise HerderError(409, f"Connector {name} already exists")
        self._check(config)
        records = []
        if not exists:
            records.append((f"target-state-{name}".encode(), dumps(target_state_value(initial_state))))
        records.append((f"connector-{name}".encode(), dumps({"properties": config})))
        await self.config_log.send_many(records)
        await self.config_log.read_to_end()
        return not exists, self.info(name)

    async def delete(self, name: str) -> None:
        self._config(name)
        await self.config_log.send_many([(f"connector-{name}".encode(), None),
                                         (f"target-state-{name}".encode(), None)])
        await self.config_log.read_to_end()

    async def set_target(self, name: str, target: str) -> None:
        self._config(name)
        await self.config_log.send(f"target-state-{name}".encode(), dumps(target_state_value(target)))
        await self.config_log.read_to_end()

    async def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any]:
        self._config(name)
        request = {"include-tasks": include_tasks, "only-failed": only_failed}
        await self.config_log.send(f"restart-connector-{name}".encode(), dumps(request))
        await self.config_log.read_to_end()
        return self.status(name)

    async def restart_task(self, name: str, task_id: int) -> None:
        self._config(name)
        if task_id >= len(self.state.tasks.get(name, [])):
            raise HerderError(404, f"Task {name}-{task_id} not found")
        async with self.lock:
            if (name, task_id) not in self.owned:
                raise HerderError(409, f"Task {name}-{task_id} runs on {self._status_entry(f'status-task-{name}-{task_id}')['worker_id']}; "
                                       "send the restart there")
            await self.worker.stop_tasks(name, [task_id])
            await self._start_owned_task(name, task_id)

    def _reconfigure_soon(self, name: str) -> None:
        async def regenerate() -> None:
            async with self.lock:
                if (name, CONNECTOR_TASK) in self.owned and name in self.state.connectors:
                    configs = await self.worker.task_configs(name, self.state.connectors[name])
                    await self._write_task_configs(name, configs)

        task = asyncio.get_running_loop().create_task(regenerate())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def close(self) -> None:
        for task in self._background:
            task.cancel()
        await self._stop_owned_for_shutdown()
        await self.group.close()
        await super().close()
        for topic_log in (self.config_log, self.offset_log, self.status_log):
            await topic_log.close()

    async def _stop_owned_for_shutdown(self) -> None:
        """Stop what this worker runs and report it UNASSIGNED before leaving the group; if a
        rebalance holds the lock past the graceful timeout, the worker's own stop does it."""
        try:
            await asyncio.wait_for(self.lock.acquire(), self.worker.config["task.shutdown.graceful.timeout.ms"] / 1000)
        except TimeoutError:
            log.warning("shutdown: a rebalance is still running; stopping without UNASSIGNED statuses")
            return
        try:
            await self._stop_items(set(self.owned))
        finally:
            self.lock.release()

    def task_owner(self, name: str, task_id: int) -> str:
        """The worker id (host:port) the status topic says runs the task, or ''."""
        return str(self.statuses.get(f"status-task-{name}-{task_id}", {}).get("worker_id") or "")
