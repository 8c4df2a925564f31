"""The console's view of any Kafka cluster, read through the Kafka protocol (``odradek console``).

Odradek's own asyncio client does the talking: an Admin for metadata, configs, groups
and actions, a group-less Consumer for log offsets, and a short-lived Consumer per
message-browser request. What the protocol does not tell (partition sizes, bytes in and
out) is ``None``; the overview charts messages per second from the log end offsets
instead. A cluster that does not answer makes the API answer 503 with the address.
"""

from __future__ import annotations

import asyncio
import functools
import time

from odradek.client.admin import Admin
from odradek.client.client_errors import ClientError
from odradek.client.consumer.consumer import Consumer
from odradek.client.structs import ConfigResource, NewTopic, TopicPartition
from odradek.http import shapes
from odradek.http.shapes import ApiError, not_found
from odradek.protocol import errors
from odradek.protocol.uuids import topic_id_text

BROWSE_TIMEOUT_S = 3.0


def _reachable(method):
    """Client failures (no connection, timeouts) become a 503 naming the cluster."""

    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except ClientError as exc:
            raise ApiError(503, f"the cluster at {self.bootstrap} did not answer: {exc}") from None

    return wrapper


class RemoteView:
    source = "remote"

    def __init__(
        self, bootstrap: str, admin_options: dict | None = None, consumer_options: dict | None = None
    ):
        """``*_options``: client options (e.g. security settings) for the admin and the consumers."""
        self.bootstrap = bootstrap
        # A page refreshes every 2 s: say soon that the cluster does not answer.
        timeouts = {"default_api_timeout_ms": 5000, "request_timeout_ms": 5000}
        self.admin = Admin({**timeouts, **(admin_options or {}), "bootstrap_servers": bootstrap})
        self.consumer_options = {
            **timeouts,
            **(consumer_options or {}),
            "bootstrap_servers": bootstrap,
            "group_id": None,
            "enable_auto_commit": False,
            "allow_auto_create_topics": False,
        }
        self.offsets = self._consumer()

    def _consumer(self, **extra) -> Consumer:
        return Consumer({**self.consumer_options, **extra})

    async def start(self) -> None:
        await self.admin.start()
        await self.offsets.start()

    async def close(self) -> None:
        await self.offsets.close()
        await self.admin.close()

    # -- health ---------------------------------------------------------------------------

    async def readiness(self) -> list[str]:
        try:
            await asyncio.wait_for(self.admin.describe_cluster(), 5)
        except (ClientError, errors.KafkaError, TimeoutError) as exc:
            return [f"the cluster at {self.bootstrap} does not answer: {exc}"]
        return []

    # -- reading --------------------------------------------------------------------------

    async def _described(self, names=None) -> dict:
        return await self.admin.describe_topics(names)

    async def _log_offsets(self, tps: list[TopicPartition]) -> tuple[dict, dict]:
        if not tps:
            return {}, {}
        start = await self.offsets.beginning_offsets(tps)
        end = await self.offsets.end_offsets(tps)
        return start, end

    async def _everything(self) -> tuple:
        """The cluster description, every topic, and the log start and end offsets of all partitions."""
        desc = await self.admin.describe_cluster()
        topics = await self._described()
        tps = [TopicPartition(t, p.partition) for t, d in topics.items() for p in d.partitions]
        starts, ends = await self._log_offsets(tps)
        return desc, topics, starts, ends

    @_reachable
    async def cluster(self) -> dict:
        desc, topics, _, ends = await self._everything()
        out = shapes.cluster_json(
            desc.cluster_id,
            desc.controller_id,
            [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in desc.brokers],
            [_topic_meta(d) for d in topics.values()],
        )
        out["io"] = None
        out["end_offset_sum"] = sum(ends.values())
        out["source"] = self.source
        out["broker_id"] = None  # served by `odradek console`, not by a broker
        out["time_ms"] = int(time.time() * 1000)
        return out

    async def brokers(self) -> list[dict]:
        return (await self.cluster())["brokers"]

    @_reachable
    async def topics(self) -> list[dict]:
        topics = await self._described()
        tps = [TopicPartition(t, p.partition) for t, d in topics.items() for p in d.partitions]
        _, ends = await self._log_offsets(tps)
        rows = []
        for name, d in sorted(topics.items()):
            rows.append(
                {
                    "name": name,
                    "internal": d.is_internal,
                    "partitions": len(d.partitions),
                    "replication_factor": len(d.partitions[0].replicas) if d.partitions else 0,
                    "size": None,
                    "end_offset_sum": sum(
                        ends.get(TopicPartition(name, p.partition), 0) for p in d.partitions
                    ),
                    "messages_in": None,
                    "under_replicated": sum(1 for p in d.partitions if len(p.isr) < len(p.replicas)),
                }
            )
        return rows

    @_reachable
    async def topic(self, name: str) -> dict:
        try:
            d = (await self._described([name]))[name]
        except errors.UnknownTopicOrPartitionError:
            raise not_found(f"topic {name!r}") from None
        tps = [TopicPartition(name, p.partition) for p in d.partitions]
        starts, ends = await self._log_offsets(tps)
        partitions = []
        for row in _topic_meta(d)["partitions"]:
            tp = TopicPartition(name, row["partition"])
            row.update(
                log_start=starts.get(tp), log_end=None, high_watermark=ends.get(tp), size=None, segments=None
            )
            partitions.append(row)
        resource = ConfigResource("topic", name)
        entries = (await self.admin.describe_configs([resource])).get(resource, {})
        configs = [
            shapes.config_json(e.name, e.value, e.source if e.source >= 0 else (5 if e.is_default else 1),
                               e.is_sensitive, e.read_only)
            for e in sorted(entries.values())
        ]  # fmt: skip
        return {
            "name": name,
            "topic_id": topic_id_text(d.topic_id),
            "internal": d.is_internal,
            "partitions": partitions,
            "configs": configs,
        }

    @_reachable
    async def messages(
        self, topic: str, partition: int, offset: int | None, timestamp: int | None, limit: int
    ) -> dict:
        tp = TopicPartition(topic, partition)
        try:
            d = (await self._described([topic]))[topic]
        except errors.UnknownTopicOrPartitionError:
            raise not_found(f"topic {topic!r}") from None
        if partition not in {p.partition for p in d.partitions}:
            raise not_found(f"partition {partition} of topic {topic!r}")
        starts, ends = await self._log_offsets([tp])
        start_offset, end = starts[tp], ends[tp]
        if timestamp is not None:
            found = (await self.offsets.offsets_for_times({tp: timestamp}))[tp]
            position = end if found is None else found.offset
        elif offset is None:
            position = max(start_offset, end - limit)
        else:
            position = offset
        position = min(max(position, start_offset), end)
        records = await self._browse(tp, position, end, limit) if position < end else []
        return {
            "topic": topic,
            "partition": partition,
            "start": position,
            "next_offset": records[-1]["offset"] + 1 if records else position,
            "log_start": start_offset,
            "high_watermark": end,
            "records": records,
        }

    async def _browse(self, tp: TopicPartition, position: int, end: int, limit: int) -> list[dict]:
        consumer = self._consumer(max_poll_records=limit)
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, position)
            out: list[dict] = []
            deadline = time.monotonic() + BROWSE_TIMEOUT_S
            while len(out) < limit and time.monotonic() < deadline:
                batch = await consumer.poll(timeout=0.2, max_records=limit - len(out))
                for r in batch:
                    out.append(
                        shapes.record_json(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
                    )
                if out and out[-1]["offset"] >= end - 1:
                    break
            return out[:limit]
        finally:
            await consumer.close()

    @_reachable
    async def groups(self) -> list[dict]:
        rows = []
        for listing in await self.admin.list_groups():
            detail = await self._group(listing.group_id)
            rows.append(
                {
                    "group_id": listing.group_id,
                    "state": detail["state"],
                    "protocol_type": listing.protocol_type,
                    "members": len(detail["members"]),
                    "lag": detail["lag"],
                    "partitions": len(detail["offsets"]),
                }
            )
        return sorted(rows, key=lambda r: r["group_id"])

    async def _group(self, group_id: str) -> dict:
        described = (await self.admin.describe_groups([group_id]))[group_id]
        committed = {
            tuple(tp): om.offset for tp, om in (await self.admin.list_group_offsets(group_id)).items()
        }
        _, ends = await self._log_offsets([TopicPartition(*tp) for tp in committed])
        rows, total = shapes.group_offsets_json(committed, {tuple(tp): v for tp, v in ends.items()})
        return {
            "group_id": group_id,
            "state": described.state,
            "protocol_type": described.protocol_type,
            "protocol": described.protocol,
            "coordinator": None,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": sorted([t, p] for t, p in m.assignment),
                }
                for m in described.members
            ],
            "offsets": rows,
            "lag": total,
            "time_ms": int(time.time() * 1000),
        }

    @_reachable
    async def group(self, group_id: str) -> dict:
        detail = await self._group(group_id)
        if detail["state"] == "Dead" and not detail["offsets"]:
            raise not_found(f"group {group_id!r}")
        return detail

    @_reachable
    async def broker_configs(self, broker_id: int) -> list[dict]:
        resource = ConfigResource("broker", str(broker_id))
        entries = (await self.admin.describe_configs([resource])).get(resource, {})
        return [
            shapes.config_json(e.name, e.value, e.source if e.source >= 0 else 4, e.is_sensitive, e.read_only)
            for e in sorted(entries.values())
        ]

    # -- actions --------------------------------------------------------------------------

    @_reachable
    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict) -> dict:
        await self.admin.create_topics([NewTopic(name, partitions, replication_factor, configs or None)])
        d = (await self._described([name]))[name]
        return {
            "name": name,
            "partitions": len(d.partitions),
            "topic_id": topic_id_text(d.topic_id),
        }

    @_reachable
    async def delete_records(self, topic: str, offsets: dict[int, int]) -> dict:
        results = {}
        for index, offset in offsets.items():
            try:
                low = await self.admin.delete_records({TopicPartition(topic, index): offset})
                results[str(index)] = {"low_watermark": low[TopicPartition(topic, index)]}
            except errors.KafkaError as exc:
                results[str(index)] = {"error": exc.message, "code": exc.code.name.upper()}
        return {"topic": topic, "partitions": results}

    @_reachable
    async def reset_offsets(self, group_id: str, topic: str, to: str, value: int | None) -> dict:
        try:
            d = (await self._described([topic]))[topic]
        except errors.UnknownTopicOrPartitionError:
            raise not_found(f"topic {topic!r}") from None
        tps = [TopicPartition(topic, p.partition) for p in d.partitions]
        starts, ends = await self._log_offsets(tps)
        if to == "earliest":
            targets = dict(starts)
        elif to == "latest":
            targets = dict(ends)
        elif to == "offset":
            targets = {tp: min(max(value, starts[tp]), ends[tp]) for tp in tps}
        else:
            found = await self.offsets.offsets_for_times(dict.fromkeys(tps, value))
            targets = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
        try:
            await self.admin.alter_group_offsets(group_id, targets)
        except errors.KafkaError as exc:
            raise ApiError(409, shapes.reset_refusal(group_id, exc.code.name.upper(), exc.message)) from None
        return {
            "group_id": group_id,
            "topic": topic,
            "offsets": {str(tp.partition): off for tp, off in targets.items()},
        }

    # -- metrics --------------------------------------------------------------------------

    @_reachable
    async def exporter_snapshot(self) -> dict:
        desc, topics, starts, ends = await self._everything()
        partitions = [
            (name, p.partition, p.leader, len(p.replicas), len(p.isr),
             starts.get(TopicPartition(name, p.partition), -1), ends.get(TopicPartition(name, p.partition), -1))
            for name, d in topics.items()
            for p in d.partitions
        ]  # fmt: skip
        groups = []
        for listing in await self.admin.list_groups():
            detail = await self._group(listing.group_id)
            committed = {(o["topic"], o["partition"]): o["committed"] for o in detail["offsets"]}
            ends_of = {(o["topic"], o["partition"]): o["end"] for o in detail["offsets"]}
            groups.append((listing.group_id, len(detail["members"]), committed, ends_of))
        return {"brokers": len(desc.brokers), "partitions": partitions, "groups": groups}


def _topic_meta(d) -> dict:
    return {
        "name": d.name,
        "internal": d.is_internal,
        "partitions": [
            {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
             "replicas": list(p.replicas), "isr": list(p.isr)}
            for p in d.partitions
        ],
    }  # fmt: skip
