"""The worker: runs the connectors and tasks a herder gives it (Kafka's ``Worker``), nothing more.

It instantiates a connector from its plugin, starts it (``start(props)``) and asks it for task
configs; it runs each task as a ``WorkerSourceTask``/``WorkerSinkTask`` with the plumbing of
its connector config; it keeps every connector's and task's state (UNASSIGNED, RUNNING,
PAUSED, STOPPED, FAILED with its trace) for the status API. Deciding what runs is the herder's.
Owned by the event loop; connector code runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.connect.api import (
    Connector,
    ConnectorContext,
    SinkConnector,
    SourceConnector,
    SourceConnectorContext,
)
from odradek.connect.offset_store import OffsetStore
from odradek.connect.plugins import PluginRegistry
from odradek.connect.source_eos import connector_defines_transactions, transaction_interval_s
from odradek.connect.task_plumbing import TaskPlumbing
from odradek.connect.worker_config import WorkerConfig
from odradek.connect.worker_tasks import (
    FAILED,
    PAUSED,
    RUNNING,
    UNASSIGNED,
    TaskRunner,
    WorkerSinkTask,
    WorkerSourceTask,
)

log = logging.getLogger("odradek.connect")

STOPPED = "STOPPED"


@dataclass
class ConnectorState:
    name: str
    instance: Connector
    type: str
    state: str = UNASSIGNED
    trace: str | None = None
    task_configs: list[dict[str, str]] = field(default_factory=list)


class _Context(SourceConnectorContext, ConnectorContext):
    def __init__(self, worker: Worker, name: str, loop: asyncio.AbstractEventLoop):
        self.worker, self.name, self.loop = worker, name, loop
        self.offset_storage_reader = worker.offset_store.reader(name)

    def request_task_reconfiguration(self) -> None:
        self.loop.call_soon_threadsafe(self.worker.reconfigure_requested, self.name)

    def raise_error(self, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.loop.call_soon_threadsafe(self.worker.connector_failed, self.name, trace)


class Worker:
    def __init__(self, config: WorkerConfig, plugins: PluginRegistry, offset_store: OffsetStore, worker_id: str):
        self.config = config
        self.plugins = plugins
        self.offset_store = offset_store
        self.worker_id = worker_id
        self.connectors: dict[str, ConnectorState] = {}
        self.tasks: dict[tuple[str, int], TaskRunner] = {}
        self.on_reconfigure: Callable[[str], None] | None = None  # set by the herder
        self.commits = {"success": 0, "failure": 0}

    def client_options(self, kind: str, connector_config: dict[str, str] | None = None) -> dict:
        options = self.config.client_options(kind)
        if connector_config and self.config["connector.client.config.override.policy"] != "None":
            prefix = f"{kind}.override."
            for key, value in connector_config.items():
                if key.startswith(prefix):
                    options[key[len(prefix):].replace(".", "_")] = value
        return options

    async def _in_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # -- connectors ------------------------------------------------------------------------

    async def start_connector(self, name: str, config: dict[str, str], target: str) -> ConnectorState:
        """Instantiate and (unless ``target`` is STOPPED) start it; a failure leaves it FAILED."""
        plugin = self.plugins.find(config["connector.class"])
        instance = plugin.cls()
        state = ConnectorState(name, instance, plugin.type)
        self.connectors[name] = state
        if target == STOPPED:
            state.state = STOPPED
            return state
        try:
            instance.initialize(_Context(self, name, asyncio.get_running_loop()))
            await self._in_thread(instance.start, dict(config))
            max_tasks = int(config.get("tasks.max", "1"))
            state.task_configs = [
                {**c, "task.class": f"{instance.task_class().__module__}.{instance.task_class().__qualname__}"}
                for c in await self._in_thread(instance.task_configs, max_tasks)
            ][:max_tasks]
            state.state = PAUSED if target == PAUSED else RUNNING
        except Exception:
            state.trace = traceback.format_exc()
            state.state = FAILED
            log.error("connector %s failed to start:\n%s", name, state.trace)
        return state

    def reconfigure_requested(self, name: str) -> None:
        if self.on_reconfigure is not None:
            self.on_reconfigure(name)

    def connector_failed(self, name: str, trace: str) -> None:
        state = self.connectors.get(name)
        if state is not None:
            state.state, state.trace = FAILED, trace

    async def task_configs(self, name: str, config: dict[str, str]) -> list[dict[str, str]]:
        state = self.connectors[name]
        max_tasks = int(config.get("tasks.max", "1"))
        configs = await self._in_thread(state.instance.task_configs, max_tasks)
        cls = state.instance.task_class()
        state.task_configs = [{**c, "task.class": f"{cls.__module__}.{cls.__qualname__}"} for c in configs][:max_tasks]
        return state.task_configs

    async def stop_connector(self, name: str) -> None:
        state = self.connectors.pop(name, None)
        if state is None:
            return
        if state.state in (RUNNING, PAUSED):
            try:
                await self._in_thread(state.instance.stop)
            except Exception:
                log.exception("connector %s: stop() raised", name)

    # -- tasks -----------------------------------------------------------------------------

    async def start_task(self, name: str, task_id: int, config: dict[str, str], paused: bool,
                         props: dict[str, str] | None = None) -> None:
        """Run a task; ``props`` (distributed mode: from the config topic) else the local connector's."""
        connector = self.connectors.get(name)
        instance = connector.instance if connector is not None else self.plugins.find(config["connector.class"]).cls()
        task_cls = instance.task_class()
        if props is None:
            assert connector is not None
            props = connector.task_configs[task_id]
        plumbing = TaskPlumbing(
            name, task_id, config, self.config, self.offset_store,
            lambda kind: self.client_options(kind, config), self._count_commit,
        )
        if isinstance(instance, SourceConnector) and getattr(self.offset_store, "exactly_once_group", None):
            plumbing.flush_interval_s = transaction_interval_s(config, self.config["offset.flush.interval.ms"])
            plumbing.connector_boundaries = connector_defines_transactions(config)
        runner_cls = WorkerSinkTask if isinstance(instance, SinkConnector) else WorkerSourceTask
        runner = runner_cls(name, task_id, task_cls(), props, plumbing, lambda r: None)
        self.tasks[(name, task_id)] = runner
        runner.start(paused)

    def failed_task(self, name: str, task_id: int, trace: str) -> None:
        """A task that could not even be built (a bad converter, a bad transform): FAILED."""
        runner = TaskRunner(name, task_id, None, {}, None, lambda r: None)
        runner.state, runner.trace = FAILED, trace
        self.tasks[(name, task_id)] = runner

    def _count_commit(self, ok: bool) -> None:
        self.commits["success" if ok else "failure"] += 1

    async def stop_tasks(self, name: str, only: list[int] | None = None) -> None:
        timeout = self.config["task.shutdown.graceful.timeout.ms"] / 1000
        ids = [key for key in self.tasks if key[0] == name and (only is None or key[1] in only)]
        runners = [self.tasks.pop(key) for key in ids]
        await asyncio.gather(*(r.stop(timeout) for r in runners if r.task is not None))

    def connector_tasks(self, name: str) -> list[TaskRunner]:
        return sorted((r for (n, _), r in self.tasks.items() if n == name), key=lambda r: r.id)

    def pause(self, name: str) -> None:
        state = self.connectors.get(name)
        if state is not None and state.state == RUNNING:
            state.state = PAUSED
        for runner in self.connector_tasks(name):
            runner.pause()

    def resume(self, name: str) -> None:
        state = self.connectors.get(name)
        if state is not None and state.state == PAUSED:
            state.state = RUNNING
        for runner in self.connector_tasks(name):
            runner.resume()

    async def stop(self) -> None:
        for name in list(self.connectors):
            await self.stop_tasks(name)
            await self.stop_connector(name)


def task_status(runner: TaskRunner, worker_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": runner.id, "state": runner.state, "worker_id": worker_id}
    if runner.trace:
        out["trace"] = runner.trace
    return out
