"""The herder: decides which connectors and tasks run, and answers the REST API (Kafka's ``Herder``).

``StandaloneHerder`` keeps connector configs in memory (from the files on the command line and
the REST API) and runs everything on its own worker. Every operation raises ``HerderError``
with Kafka's HTTP status (404 unknown connector, 409 exists already, 400 bad config) for the
REST layer to turn into ``{"error_code", "message"}``. One owner: the event loop; operations
are serialised by one lock, as Kafka's standalone herder is synchronized.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from odradek.config_def import AtLeast
from odradek.connect.api import ConfigDef, Importance, SinkConnector, SourceConnector
from odradek.connect.error_handling import ERROR_CONFIG
from odradek.connect.errors import ConnectException
from odradek.connect.source_eos import SOURCE_EOS_CONFIG, check_source_eos
from odradek.connect.transforms import validate_transforms
from odradek.connect.worker import STOPPED, Worker, task_status
from odradek.connect.worker_tasks import FAILED, PAUSED, RUNNING

log = logging.getLogger("odradek.connect")

COMMON_CONFIG = (
    ConfigDef()
    .define("name", "STRING", importance=Importance.HIGH, group="Common", doc="Globally unique connector name.")
    .define("connector.class", "STRING", importance=Importance.HIGH, group="Common",
            doc="The connector's class name or alias.")
    .define("tasks.max", "INT", 1, AtLeast(1), Importance.HIGH, group="Common", doc="Maximum number of tasks.")
    .define("key.converter", "CLASS", None, group="Common", doc="Overrides the worker's key.converter.")
    .define("value.converter", "CLASS", None, group="Common", doc="Overrides the worker's value.converter.")
    .define("header.converter", "CLASS", None, group="Common", doc="Overrides the worker's header.converter.")
    .define("transforms", "LIST", [], group="Transforms", doc="Aliases of the transformations to apply.")
    .define("predicates", "LIST", [], group="Predicates", doc="Aliases of the predicates transforms use.")
)
SINK_TOPICS_CONFIG = (
    ConfigDef()
    .define("topics", "LIST", [], group="Common", doc="Topics to consume.")
    .define("topics.regex", "STRING", "", group="Common", doc="Pattern of topics to consume.")
)
TARGET_STATES = (RUNNING, PAUSED, STOPPED)


class HerderError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def not_found(name: str) -> HerderError:
    return HerderError(404, f"Connector {name} not found")


class StandaloneHerder:
    exactly_once_source = False  # KIP-618 source transactions (distributed mode only, as Kafka's)

    def __init__(self, worker: Worker):
        self.worker = worker
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, str] = {}
        self.lock = asyncio.Lock()
        worker.on_reconfigure = self._reconfigure_soon
        self._pending: set[asyncio.Task] = set()

    # -- reading ---------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        return sorted(self.configs)

    def _config(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise not_found(name)
        return self.configs[name]

    def rebalance_metrics(self) -> dict[str, Any] | None:
        """The group's metrics (distributed mode only)."""
        return None

    def connector_type(self, name: str) -> str:
        state = self.worker.connectors.get(name)
        if state is not None:
            return state.type
        try:
            return self.worker.plugins.find(self._config(name)["connector.class"]).type
        except ConnectException:
            return "unknown"

    def info(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        tasks = [{"connector": name, "task": r.id} for r in self.worker.connector_tasks(name)]
        return {"name": name, "config": dict(config), "tasks": tasks, "type": self.connector_type(name)}

    def config(self, name: str) -> dict[str, str]:
        return dict(self._config(name))

    def status(self, name: str) -> dict[str, Any]:
        self._config(name)
        state = self.worker.connectors.get(name)
        connector: dict[str, Any] = {"state": state.state if state else "UNASSIGNED", "worker_id": self.worker.worker_id}
        if state is not None and state.trace:
            connector["trace"] = state.trace
        tasks = [task_status(r, self.worker.worker_id) for r in self.worker.connector_tasks(name)]
        return {"name": name, "connector": connector, "tasks": tasks, "type": self.connector_type(name)}

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        self._config(name)
        runner = self.worker.tasks.get((name, task_id))
        if runner is None:
            raise HerderError(404, f"Task {name}-{task_id} not found")
        return task_status(runner, self.worker.worker_id)

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._config(name)
        state = self.worker.connectors.get(name)
        configs = state.task_configs if state else []
        return [{"id": {"connector": name, "task": i}, "config": dict(c)} for i, c in enumerate(configs)]

    def topics(self, name: str) -> dict[str, Any]:
        self._config(name)
        topics: set[str] = set()
        for runner in self.worker.connector_tasks(name):
            topics |= runner.topics
        return {name: {"topics": sorted(topics)}}

    def reset_topics(self, name: str) -> None:
        self._config(name)
        for runner in self.worker.connector_tasks(name):
            runner.topics.clear()

    # -- validating ------------------------------------------------------------------------

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        """Kafka's ``ConfigInfos`` of ``config``: each key's definition, value and errors."""
        class_name = config.get("connector.class")
        if not class_name:
            raise HerderError(400, f"Connector config {({k: v for k, v in config.items()})} contains no connector type")
        try:
            plugin = self.worker.plugins.find(str(class_name))
        except ConnectException as exc:
            raise HerderError(400, str(exc)) from None
        instance = plugin.cls()
        common = COMMON_CONFIG.merge(ERROR_CONFIG)
        if issubclass(plugin.cls, SinkConnector):
            common = common.merge(SINK_TOPICS_CONFIG)
        elif issubclass(plugin.cls, SourceConnector):
            common = common.merge(SOURCE_EOS_CONFIG)
        text = {k: v if isinstance(v, str) else str(v) for k, v in config.items() if v is not None}
        values = {v.name: v for v in common.validate(text)}
        own_def = instance.config_def()
        try:
            own = instance.validate(text).config_values
        except Exception as exc:
            own = []
            values["connector.class"].add_error(f"validate() raised {exc}")
        for value in own:
            values[value.name] = value
        if issubclass(plugin.cls, SinkConnector):
            has_topics, has_regex = bool(text.get("topics")), bool(text.get("topics.regex"))
            if has_topics == has_regex:
                values["topics"].add_error("Must configure one of topics or topics.regex" if not has_topics
                                           else "topics and topics.regex are mutually exclusive")
        elif issubclass(plugin.cls, SourceConnector):
            check_source_eos(instance, text, values, self.exactly_once_source)
        for key, message in validate_transforms(text):
            target = values.get(key) or values["transforms"]
            target.add_error(message)
        definitions = common.merge(own_def)
        configs: list[dict[str, Any]] = []
        for name, value in values.items():
            found = definitions.keys.get(name)
            definition = found.definition() if found else {
                "name": name, "type": "STRING", "required": False, "default_value": None, "importance": "MEDIUM",
                "documentation": "", "group": None, "width": "NONE", "display_name": name, "dependents": [],
                "order": -1,
            }
            shown = text.get(name)
            if shown is None and found is not None:
                shown = found.default_text()
            configs.append({"definition": definition, "value": value.info(shown)})
        return {
            "name": plugin.class_name,
            "error_count": sum(len(c["value"]["errors"]) for c in configs),
            "groups": list(dict.fromkeys(c["definition"]["group"] for c in configs if c["definition"]["group"])),
            "configs": configs,
        }

    def _check(self, config: dict[str, str]) -> None:
        result = self.validate(config)
        if result["error_count"]:
            problems = [
                f"{c['value']['name']}: {e}" for c in result["configs"] for e in c["value"]["errors"]
            ]
            raise HerderError(
                400,
                f"Connector configuration is invalid and contains the following {result['error_count']} "
                f"error(s):\n" + "\n".join(problems)
                + "\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`",
            )

    # -- changing --------------------------------------------------------------------------

    async def put_config(
        self, name: str, config: dict[str, str], allow_replace: bool, initial_state: str = RUNNING
    ) -> tuple[bool, dict[str, Any]]:
        """Create or replace; ``(created, info)``."""
        if not name or "/" in name:
            raise HerderError(400, f"Connector name {name!r} is invalid: it must be non-empty and without '/'")
        config = {**{k: str(v) for k, v in config.items()}, "name": name}
        async with self.lock:
            exists = name in self.configs
            if exists and not allow_replace:
                raise HerderError(409, f"Connector {name} already exists")
            self._check(config)
            if exists:
                await self._stop_all(name)
            self.configs[name] = config
            if not exists:
                self.targets[name] = initial_state
            await self._start_all(name)
        return not exists, self.info(name)

    async def delete(self, name: str) -> None:
        async with self.lock:
            self._config(name)
            await self._stop_all(name)
            del self.configs[name]
            self.targets.pop(name, None)

    async def _stop_all(self, name: str) -> None:
        await self.worker.stop_tasks(name)
        await self.worker.stop_connector(name)

    async def _start_all(self, name: str) -> None:
        config, target = self.configs[name], self.targets.get(name, RUNNING)
        state = await self.worker.start_connector(name, config, target)
        if state.state in (FAILED, STOPPED):
            return
        for task_id in range(len(state.task_configs)):
            await self._start_task(name, task_id, config, target == PAUSED)

    async def _start_task(self, name: str, task_id: int, config: dict[str, str], paused: bool) -> None:
        try:
            await self.worker.start_task(name, task_id, config, paused)
        except Exception:
            trace = traceback.format_exc()
            log.error("task %s-%d cannot be started:\n%s", name, task_id, trace)
            self.worker.failed_task(name, task_id, trace)

    def _reconfigure_soon(self, name: str) -> None:
        task = asyncio.get_running_loop().create_task(self.restart(name, include_tasks=True, only_failed=False))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any]:
        """KIP-745: restart the connector (and its tasks); the status as it is after."""
        async with self.lock:
            self._config(name)
            state = self.worker.connectors.get(name)
            connector_failed = state is None or state.state == FAILED
            if include_tasks:
                failed = [r.id for r in self.worker.connector_tasks(name) if r.state == FAILED]
                if not only_failed or connector_failed:
                    await self._stop_all(name)
                    await self._start_all(name)
                elif failed:
                    await self.worker.stop_tasks(name, failed)
                    for task_id in failed:
                        await self._start_task(name, task_id, self.configs[name], self.targets[name] == PAUSED)
            elif not only_failed or connector_failed:
                await self._stop_all(name)
                await self._start_all(name)
        return self.status(name)

    async def restart_task(self, name: str, task_id: int) -> None:
        async with self.lock:
            config = self._config(name)
            if (name, task_id) not in self.worker.tasks:
                raise HerderError(404, f"Task {name}-{task_id} not found")
            await self.worker.stop_tasks(name, [task_id])
            await self._start_task(name, task_id, config, self.targets.get(name) == PAUSED)

    async def set_target(self, name: str, target: str) -> None:
        async with self.lock:
            self._config(name)
            previous = self.targets.get(name, RUNNING)
            self.targets[name] = target
            if target == STOPPED:
                await self._stop_all(name)
                self.worker.connectors.pop(name, None)
                await self.worker.start_connector(name, self.configs[name], STOPPED)
            elif previous == STOPPED:
                await self._stop_all(name)
                await self._start_all(name)
            elif target == PAUSED:
                self.worker.pause(name)
            else:
                self.worker.resume(name)

    # -- offsets (KIP-875) -----------------------------------------------------------------

    async def offsets(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        if self.connector_type(name) == "sink":
            return {"offsets": await self._sink_offsets(name, config)}
        stored = self.worker.offset_store.connector_offsets(name)
        return {"offsets": [{"partition": p, "offset": o} for p, o in stored]}

    async def _sink_offsets(self, name: str, config: dict[str, str]) -> list[dict[str, Any]]:
        from odradek.client.admin import Admin

        async with Admin(**self.worker.client_options("admin")) as admin:
            committed = await admin.list_group_offsets(f"connect-{name}")
        return [
            {"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition}, "offset": {"kafka_offset": o.offset}}
            for tp, o in sorted(committed.items())
        ]

    async def alter_offsets(self, name: str, offsets: list[dict[str, Any]] | None) -> str:
        """PATCH (``offsets``) or DELETE (None) the connector's offsets; it must be STOPPED."""
        async with self.lock:
            config = self._config(name)
            if self.targets.get(name) != STOPPED:
                raise HerderError(400, f"Connectors must be in the STOPPED state before their offsets can be "
                                       f"modified. This can be done for the specified connector by issuing a 'PUT' "
                                       f"request to the '/connectors/{name}/stop' endpoint")
            if self.connector_type(name) == "sink":
                await self._alter_sink_offsets(name, offsets)
            else:
                if offsets is None:
                    pairs = [(p, None) for p, _ in self.worker.offset_store.connector_offsets(name)]
                else:
                    pairs = [(o["partition"], o.get("offset")) for o in offsets]
                await self.worker.offset_store.write(name, pairs)
            del config
        verb = "reset" if offsets is None else "altered"
        return f"The offsets for this connector have been {verb} successfully"

    async def _alter_sink_offsets(self, name: str, offsets: list[dict[str, Any]] | None) -> None:
        from odradek.client.admin import Admin
        from odradek.client.structs import OffsetAndMetadata, TopicPartition

        group = f"connect-{name}"
        async with Admin(**self.worker.client_options("admin")) as admin:
            if offsets is None:
                await admin.delete_groups([group])
                return
            changes = {}
            for entry in offsets:
                part = entry.get("partition") or {}
                try:
                    tp = TopicPartition(str(part["kafka_topic"]), int(part["kafka_partition"]))
                except (KeyError, TypeError, ValueError):
                    raise HerderError(400, "each sink offset partition needs kafka_topic and kafka_partition") from None
                offset = (entry.get("offset") or {}).get("kafka_offset")
                if offset is not None:
                    changes[tp] = OffsetAndMetadata(int(offset))
            await admin.alter_group_offsets(group, changes)

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await self.worker.stop()
