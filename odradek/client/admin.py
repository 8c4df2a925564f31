"""The asyncio admin client: topics, partitions, configs, groups, offsets, records, cluster.

Each method sends one kind of request to the broker that must answer it (the controller
for topic changes, the group coordinator for group operations, partition leaders for
DeleteRecords). Per-item errors raise the typed Kafka exception of the first failed item,
naming it; the exception's ``errors`` attribute maps every failed item to its error.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.client import client_config as config_mod
from odradek.client.client_errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.security_admin import AclAdmin, QuotaAdmin, SecurityAdmin
from odradek.protocol import api_keys
from odradek.protocol.errors import KafkaError, error_for

from .admin_errors import item_error as _item_error
from .admin_errors import raise_items as _raise_items
from .admin_groups import GroupAdmin
from .admin_placement import LeadersAndPlacement
from .netclient import NetClient
from .structs import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    LogDirDescription,
    NewPartitions,
    NewTopic,
    PartitionInfo,
    ReplicaLogDirInfo,
    TopicDescription,
    TopicPartition,
)

log = logging.getLogger("odradek.client.admin")

RESOURCE_TYPES = {"topic": 2, "group": 3, "broker": 4, "broker_logger": 8}
OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}
_CONTROLLER_MOVED = {41}  # NOT_CONTROLLER
_ITEM_LISTS = ("topics", "responses", "results")  # CreateTopics, DeleteTopics, CreatePartitions


def _answered_not_controller(resp) -> bool:
    """Whether a controller-bound answer says the broker is not (or no longer) the controller:
    the whole answer's error, or one of its topics' (Kafka's admin client retries the call)."""
    if int(getattr(resp, "error_code", 0) or 0) in _CONTROLLER_MOVED:
        return True
    for name in _ITEM_LISTS:
        for item in getattr(resp, name, None) or ():
            if int(getattr(item, "error_code", 0) or 0) in _CONTROLLER_MOVED:
                return True
    return False


def _raise_topic_errors(results) -> None:
    """Raise for the failed topics of a per-topic result list (``name``, ``error_code``,
    optional ``error_message``), as ``_raise_items`` does."""
    errors = {
        r.name: _item_error(int(r.error_code), getattr(r, "error_message", None), f"topic {r.name!r}")
        for r in results
        if r.error_code
    }
    _raise_items(errors, "topics")


def _resource(res) -> tuple[int, str]:
    if isinstance(res, ConfigResource):
        rtype, name = res
    else:
        rtype, name = res
    if isinstance(rtype, str):
        try:
            rtype = RESOURCE_TYPES[rtype.lower()]
        except KeyError:
            raise ValueError(
                f"unknown resource type {rtype!r} (topic, broker, broker_logger, group)"
            ) from None
    return int(rtype), str(name)


class Admin(SecurityAdmin, AclAdmin, QuotaAdmin, LeadersAndPlacement, GroupAdmin):
    """The asyncio admin client. Options: the common client options plus ``default_api_timeout_ms``."""

    def __init__(self, config: dict | None = None, **options):
        self.config = config_mod.resolve("admin", config, options)
        self._client = NetClient(self.config, "admin", allow_auto_topic_creation=False)
        self._timeout = self.config["default_api_timeout_ms"] / 1000
        self._started = False
        self._closed = False

    async def start(self) -> None:
        if self._closed:
            raise ClientClosedError("admin client is closed")
        if not self._started:
            self._started = True
            self._client.start()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def _ready(self) -> None:
        if self._closed:
            raise ClientClosedError("admin client is closed")
        await self.start()

    def _t(self, timeout):
        return self._timeout if timeout is None else timeout

    async def _retrying(self, attempt, timeout: float, what: str):
        """Run ``attempt()`` until it succeeds or fails for good; retriable failures
        (unreachable brokers, moved coordinators) are retried until ``timeout``."""
        await self._ready()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = self.config["retry_backoff_ms"] / 1000
        last = None
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                hint = f": {last}" if last is not None else self._client._error_hint()
                raise KafkaTimeoutError(f"{what} did not complete within {timeout}s{hint}")
            try:
                async with asyncio.timeout(remaining):
                    return await attempt()
            except TimeoutError:
                continue
            except (KafkaConnectionError, KafkaError) as exc:
                if not getattr(exc, "retriable", False):
                    raise
                last = exc
            await asyncio.sleep(min(delay, max(deadline - loop.time(), 0)))
            delay = min(delay * 2, self.config["retry_backoff_max_ms"] / 1000)

    async def _any(self, api_key, values, timeout):
        async def attempt():
            conn = await self._client.any_connection()
            return await conn.send(api_key, values)

        from odradek.protocol.messages import api_name

        return await self._retrying(attempt, timeout, api_name(api_key))

    async def _metadata(self, topics, timeout):
        def values(v):
            if topics is None and v == 0:
                return {"topics": ()}
            return {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False,
            }

        return await self._any(api_keys.METADATA, values, timeout)

    async def _controller_call(self, api_key, values, timeout):
        """Send to the controller (as the metadata names it). An answer of NOT_CONTROLLER (the
        controller moved, or the metadata was stale) is retried like a failed connection: fresh
        metadata, then the controller it names, with backoff, until ``timeout``."""
        from odradek.protocol.messages import api_name

        async def attempt():
            md = await self._metadata([], timeout)
            node = int(md.controller_id)
            if node < 0 or node not in {int(b.node_id) for b in md.brokers}:
                named = f"a broker (the metadata names no live controller: {node})"
                conn = await self._client.any_connection()
            else:
                named = f"broker {node}, which the metadata named the controller,"
                if node not in self._client.cluster.brokers:
                    from odradek.client.cluster_metadata import ClusterMetadata

                    self._client.cluster = ClusterMetadata.from_response(md, self._client.cluster)
                conn = await self._client.get_connection(node)
            resp = await conn.send(api_key, values)
            if _answered_not_controller(resp):
                log.info("%s: %s answered NOT_CONTROLLER; retrying with fresh metadata", api_name(api_key), named)
                raise error_for(41)(
                    f"{named} answered NOT_CONTROLLER: the controller moved or is being elected"
                )
            return resp

        return await self._retrying(attempt, timeout, api_name(api_key))

    # -- topics ----------------------------------------------------------------------------

    async def create_topics(
        self, new_topics, timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Create topics (``NewTopic`` or names). Raises e.g. TopicAlreadyExistsError per failed topic."""
        timeout = self._t(timeout)
        topics = []
        for nt in new_topics:
            if isinstance(nt, str):
                nt = NewTopic(nt)
            elif isinstance(nt, dict):
                nt = NewTopic(**nt)
            elif not isinstance(nt, NewTopic):
                nt = NewTopic(*nt)
            assignments = [
                {"partition_index": p, "broker_ids": list(b)}
                for p, b in sorted((nt.replica_assignments or {}).items())
            ]
            topics.append(
                {
                    "name": nt.name,
                    "num_partitions": nt.num_partitions if not assignments else -1,
                    "replication_factor": nt.replication_factor if not assignments else -1,
                    "assignments": assignments,
                    "configs": [
                        {"name": k, "value": None if v is None else str(v)}
                        for k, v in (nt.configs or {}).items()
                    ],
                }
            )
        resp = await self._controller_call(
            api_keys.CREATE_TOPICS,
            {"topics": topics, "timeout": int(timeout * 1000), "validate_only": validate_only},
            timeout,
        )
        _raise_topic_errors(resp.topics)
        self._client.request_update()

    async def delete_topics(self, topics, timeout: float | None = None) -> None:
        timeout = self._t(timeout)
        topics = [topics] if isinstance(topics, str) else list(topics)
        resp = await self._controller_call(
            api_keys.DELETE_TOPICS,
            {
                "topic_names": topics,
                "topics": [{"name": t, "topic_id": None} for t in topics],
                "timeout": int(timeout * 1000),
            },
            timeout,
        )
        _raise_topic_errors(resp.responses)

    async def list_topics(self, internal: bool = False, timeout: float | None = None) -> list[str]:
        md = await self._metadata(None, self._t(timeout))
        return sorted(t.name for t in md.topics if not t.error_code and (internal or not t.is_internal))

    async def describe_topics(self, topics=None, timeout: float | None = None) -> dict[str, TopicDescription]:
        topics = [topics] if isinstance(topics, str) else (None if topics is None else list(topics))
        md = await self._metadata(topics, self._t(timeout))
        out = {}
        errors = {}
        for t in md.topics:
            if t.error_code:
                errors[t.name] = _item_error(int(t.error_code), None, f"topic {t.name!r}")
                continue
            parts = sorted(
                (
                    PartitionInfo(
                        t.name,
                        int(p.partition_index),
                        int(p.leader_id),
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                        int(p.error_code),
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
            out[t.name] = TopicDescription(t.name, getattr(t, "topic_id", None), bool(t.is_internal), parts)
        _raise_items(errors, "topics")
        return out

    async def create_partitions(
        self, new_partitions: dict, timeout: float | None = None, validate_only: bool = False
    ):
        """``{topic: NewPartitions(total_count) or total_count}``."""
        timeout = self._t(timeout)
        topics = []
        for name, np_ in new_partitions.items():
            if isinstance(np_, int):
                np_ = NewPartitions(np_)
            topics.append(
                {
                    "name": name,
                    "count": np_.total_count,
                    "assignments": None
                    if not np_.new_assignments
                    else [{"broker_ids": list(b)} for b in np_.new_assignments],
                }
            )
        resp = await self._controller_call(
            api_keys.CREATE_PARTITIONS,
            {"topics": topics, "timeout": int(timeout * 1000), "validate_only": validate_only},
            timeout,
        )
        _raise_topic_errors(resp.results)
        self._client.request_update()

    # -- configs ---------------------------------------------------------------------------

    async def _config_call(self, api_key, resources, build, timeout):
        """Broker resources go to that broker; the rest to any broker."""
        await self._ready()
        by_node: dict[int | None, list] = {}
        for res in resources:
            rtype, name = _resource(res)
            node = int(name) if rtype in (4, 8) and name.isdigit() else None
            by_node.setdefault(node, []).append((rtype, name, res))
        if any(n is not None for n in by_node):
            await self._client.refresh(timeout)
        responses = []
        for node, items in by_node.items():
            values = build(items)
            async with asyncio.timeout(timeout):
                if node is None:
                    conn = await self._client.any_connection()
                else:
                    conn = await self._client.get_connection(node)
                responses.append((items, await conn.send(api_key, values)))
        return responses

    async def describe_configs(
        self, resources, timeout: float | None = None, include_documentation: bool = False
    ) -> dict:
        """``{ConfigResource: {name: ConfigEntry}}`` for ``[ConfigResource("topic", "orders"), ...]``;
        with ``include_documentation`` each entry carries the broker's text for its key."""
        timeout = self._t(timeout)
        resources = [resources] if isinstance(resources, ConfigResource) else list(resources)

        def build(items):
            return {
                "resources": [
                    {"resource_type": t, "resource_name": n, "configuration_keys": None} for t, n, _ in items
                ],
                "include_synonyms": False,
                "include_documentation": include_documentation,
            }

        out = {}
        errors = {}
        for items, resp in await self._config_call(api_keys.DESCRIBE_CONFIGS, resources, build, timeout):
            lookup = {(t, n): r for t, n, r in items}
            for r in resp.results:
                key = lookup.get(
                    (int(r.resource_type), r.resource_name),
                    ConfigResource(int(r.resource_type), r.resource_name),
                )
                if r.error_code:
                    errors[key] = _item_error(int(r.error_code), r.error_message, f"config resource {key}")
                    continue
                entries = {}
                for c in r.configs:
                    source = int(getattr(c, "config_source", -1))
                    entries[c.name] = ConfigEntry(
                        c.name,
                        c.value,
                        bool(c.read_only),
                        source == 5 if source >= 0 else bool(getattr(c, "is_default", False)),
                        bool(c.is_sensitive),
                        source,
                        getattr(c, "documentation", None),
                    )
                out[key] = entries
        _raise_items(errors, "resources")
        return out

    async def alter_configs(
        self, configs: dict, timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Replace whole configs (legacy AlterConfigs): ``{ConfigResource: {name: value}}``."""
        timeout = self._t(timeout)

        def build(items):
            return {
                "resources": [
                    {
                        "resource_type": t,
                        "resource_name": n,
                        "configs": [
                            {"name": k, "value": None if v is None else str(v)} for k, v in configs[r].items()
                        ],
                    }
                    for t, n, r in items
                ],
                "validate_only": validate_only,
            }

        await self._alter(api_keys.ALTER_CONFIGS, configs, build, timeout)

    async def incremental_alter_configs(
        self, configs: dict, timeout: float | None = None, validate_only: bool = False
    ):
        """``{ConfigResource: {name: value}}``; a value of None deletes the key, or give
        ``(op, value)`` with op "set"/"delete"/"append"/"subtract"."""
        timeout = self._t(timeout)

        def op(v):
            if isinstance(v, tuple):
                o, val = v
                return OPS[o], None if val is None else str(val)
            return (1, None) if v is None else (0, str(v))

        def build(items):
            return {
                "resources": [
                    {
                        "resource_type": t,
                        "resource_name": n,
                        "configs": [
                            {"name": k, "config_operation": op(v)[0], "value": op(v)[1]}
                            for k, v in configs[r].items()
                        ],
                    }
                    for t, n, r in items
                ],
                "validate_only": validate_only,
            }

        await self._alter(api_keys.INCREMENTAL_ALTER_CONFIGS, configs, build, timeout)

    async def _alter(self, api_key, configs, build, timeout):
        errors = {}
        for items, resp in await self._config_call(api_key, list(configs), build, timeout):
            lookup = {(t, n): r for t, n, r in items}
            for r in resp.responses:
                if r.error_code:
                    key = lookup.get(
                        (int(r.resource_type), r.resource_name), (int(r.resource_type), r.resource_name)
                    )
                    errors[key] = _item_error(int(r.error_code), r.error_message, f"config resource {key}")
        _raise_items(errors, "resources")

    # -- records and cluster ---------------------------------------------------------------

    async def delete_records(self, before: dict, timeout: float | None = None) -> dict[TopicPartition, int]:
        """Delete records before the given offsets: ``{tp: offset}`` (-1: the high watermark).

        Returns the new low watermark of each partition.
        """
        timeout = self._t(timeout)
        await self._ready()
        tps = {TopicPartition(*tp): int(off) for tp, off in before.items()}
        self._client.add_topics({tp.topic for tp in tps})
        await self._client.refresh(timeout)
        cluster = self._client.cluster
        by_node: dict[int, dict] = {}
        errors = {}
        for tp, off in tps.items():
            leader = cluster.leaders.get(tp, -1)
            if leader < 0:
                errors[tp] = _item_error(3, None, f"{tp.topic}-{tp.partition}")
                continue
            by_node.setdefault(leader, {})[tp] = off
        out = {}
        for node, items in by_node.items():
            topics: dict[str, list] = {}
            for tp, off in items.items():
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": off})
            async with asyncio.timeout(timeout):
                resp = await self._client.call(
                    node,
                    api_keys.DELETE_RECORDS,
                    {
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                        "timeout": int(timeout * 1000),
                    },
                )
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    if p.error_code:
                        errors[tp] = _item_error(int(p.error_code), None, f"{t.name}-{p.partition_index}")
                    else:
                        out[tp] = int(p.low_watermark)
        _raise_items(errors, "partitions")
        return out

    async def describe_cluster(self, timeout: float | None = None) -> ClusterDescription:
        timeout = self._t(timeout)
        await self._ready()
        conn = None
        async with asyncio.timeout(timeout):
            conn = await self._client.any_connection()
        if conn.supports(api_keys.DESCRIBE_CLUSTER):
            resp = await self._any(
                api_keys.DESCRIBE_CLUSTER,
                {"include_cluster_authorized_operations": False, "endpoint_type": 1},
                timeout,
            )
            if resp.error_code:
                raise error_for(int(resp.error_code))(resp.error_message or "DescribeCluster")
            brokers = [BrokerInfo(int(b.broker_id), b.host, int(b.port), b.rack) for b in resp.brokers]
            return ClusterDescription(resp.cluster_id, int(resp.controller_id), sorted(brokers))
        md = await self._metadata([], timeout)
        brokers = [BrokerInfo(int(b.node_id), b.host, int(b.port), b.rack) for b in md.brokers]
        return ClusterDescription(
            getattr(md, "cluster_id", None), int(getattr(md, "controller_id", -1)), sorted(brokers)
        )

    async def describe_log_dirs(
        self, topics=None, brokers=None, timeout: float | None = None
    ) -> dict[int, list[LogDirDescription]]:
        """Each broker's log dirs and the partition replicas in them (kafka-log-dirs.sh).
        ``topics``: names to list (default all); ``brokers``: ids to ask (default all)."""
        timeout = self._t(timeout)
        if brokers is None:
            brokers = [b.node_id for b in (await self.describe_cluster(timeout)).brokers]
        values = {"topics": None}
        if topics is not None:
            md = await self._metadata(list(topics), timeout)
            values["topics"] = [
                {"topic": t.name, "partitions": [int(p.partition_index) for p in t.partitions]}
                for t in md.topics
                if not t.error_code
            ]
        await self._client.refresh(timeout)  # the connections to brokers go by its metadata
        out = {}
        for node in brokers:
            async with asyncio.timeout(timeout):
                conn = await self._client.get_connection(node)
                resp = await conn.send(api_keys.DESCRIBE_LOG_DIRS, values)
            if getattr(resp, "error_code", 0):
                raise error_for(int(resp.error_code))(f"DescribeLogDirs on broker {node}")
            out[node] = [
                LogDirDescription(
                    r.log_dir,
                    int(r.error_code),
                    [
                        ReplicaLogDirInfo(
                            t.name, int(p.partition_index), int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                        )
                        for t in r.topics
                        for p in t.partitions
                    ],
                    int(getattr(r, "total_bytes", -1)),
                    int(getattr(r, "usable_bytes", -1)),
                )
                for r in resp.results
            ]
        return out

    async def api_versions(self, timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """The versions the broker supports per API key (from the ApiVersions exchange)."""
        await self._ready()
        async with asyncio.timeout(self._t(timeout)):
            conn = await self._client.any_connection()
        return dict(conn.broker_versions)
