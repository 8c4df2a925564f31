"""The console's view from inside a broker: read from the components the Kafka handlers use.

Brokers, racks, the controller, topics and partition states come from the metadata image
(which will list every broker in cluster mode); offsets, sizes and records from the
replica manager's partitions; groups and committed offsets from the group coordinator.
Actions go to the same owners the Kafka handlers call (the controller creates topics,
the replica manager moves log start offsets, the group coordinator commits offsets).
Everything runs on the broker's event loop, between Kafka requests, and reads at most a
bounded number of records per call.
"""

from __future__ import annotations

import time

from odradek.http import shapes
from odradek.http.shapes import ApiError, not_found
from odradek.protocol import errors
from odradek.protocol.uuids import topic_id_text

_READ_BYTES = 1 << 20


def topic_meta(info) -> dict:
    """A metadata image topic as the shape ``shapes.cluster_json`` counts over."""
    return {
        "name": info.name,
        "internal": info.internal,
        "partitions": [
            {
                "partition": i,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for i, p in sorted(info.partitions.items())
        ],
    }


def zookeeper_reason(broker) -> str | None:
    """Why a cluster-mode broker is not ready as far as ZooKeeper goes (None: registered, or
    no cluster)."""
    cluster = broker.cluster
    if cluster is None or cluster.registered_session is not None:
        return None
    return (
        f"not registered in ZooKeeper (/brokers/ids/{cluster.broker_id}): its session is lost "
        "or being re-established"
    )


class LocalView:
    source = "broker"

    def __init__(self, broker):
        self.broker = broker
        self.started_ms = int(time.time() * 1000)

    # -- health ---------------------------------------------------------------------------

    async def readiness(self) -> list[str]:
        """Why this broker is not ready to serve yet (empty: ready)."""
        broker = self.broker
        reasons = []
        if not broker.started.is_set():
            reasons.append("the broker is starting (loading logs, binding listeners)")
            return reasons
        unregistered = zookeeper_reason(broker)
        if unregistered:
            reasons.append(unregistered)
        for name, coordinator, topic in (
            ("group coordinator", broker.group_coordinator, "__consumer_offsets"),
            ("transaction coordinator", broker.transaction_coordinator, "__transaction_state"),
        ):
            if not coordinator.active:
                reasons.append(f"the {name} is not running")
            elif coordinator.loading:
                loading = ", ".join(str(p) for p in sorted(coordinator.loading))
                reasons.append(f"the {name} is loading {topic} partitions {loading}")
        return reasons

    # -- cluster --------------------------------------------------------------------------

    def _partition(self, topic: str, index: int):
        return self.broker.replica_manager.partitions.get((topic, index))

    async def cluster(self) -> dict:
        broker = self.broker
        image = broker.image
        out = shapes.cluster_json(
            image.cluster_id,
            image.controller_id,
            [_broker_json(b) for b in image.brokers.values()],
            [topic_meta(t) for t in image.topics.values()],
        )
        totals = broker.replica_manager.topic_metrics.all_topics()
        out["io"] = {
            "bytes_in": totals.bytes_in,
            "bytes_out": totals.bytes_out,
            "messages_in": totals.messages_in,
        }
        out["end_offset_sum"] = sum(p.high_watermark for p in broker.replica_manager.partitions.values())
        out["source"] = self.source
        out["broker_id"] = broker.node_id  # the broker serving this page
        out["time_ms"] = int(time.time() * 1000)
        return out

    async def brokers(self) -> list[dict]:
        broker = self.broker
        cluster = await self.cluster()
        rows = cluster["brokers"]
        for row in rows:
            if row["id"] != broker.node_id:
                continue
            logs = broker.log_manager.logs()
            row["local"] = {
                "log_dirs": list(broker.log_manager.log_dirs),
                "log_size": sum(log.size for log in logs),
                "partitions_hosted": len(logs),
                "connections": len(broker.network.connections),
                "started_ms": self.started_ms,
                "listeners": [f"{n}://{h}:{p}" for n, (h, p) in broker.network.bound.items()],
            }
        return rows

    async def topics(self) -> list[dict]:
        broker = self.broker
        rows = []
        metrics = broker.replica_manager.topic_metrics.topics
        for info in broker.image.topics.values():
            size = 0
            end_sum = 0
            under = 0
            for index, state in info.partitions.items():
                partition = self._partition(info.name, index)
                if partition is not None:
                    size += partition.log.size
                    end_sum += partition.high_watermark
                if len(state.isr) < len(state.replicas):
                    under += 1
            counters = metrics.get(info.name)
            first = next(iter(info.partitions.values()), None)
            rows.append(
                {
                    "name": info.name,
                    "internal": info.internal,
                    "partitions": len(info.partitions),
                    "replication_factor": len(first.replicas) if first else 0,
                    "size": size,
                    "end_offset_sum": end_sum,
                    "messages_in": counters.messages_in if counters else 0,
                    "under_replicated": under,
                }
            )
        rows.sort(key=lambda r: r["name"])
        return rows

    async def topic(self, name: str) -> dict:
        broker = self.broker
        info = broker.image.topics.get(name)
        if info is None:
            raise not_found(f"topic {name!r}")
        partitions = []
        for row in topic_meta(info)["partitions"]:
            partition = self._partition(name, row["partition"])
            if partition is not None:
                log = partition.log
                row.update(
                    log_start=log.log_start_offset,
                    log_end=log.log_end_offset,
                    high_watermark=partition.high_watermark,
                    size=log.size,
                    segments=len(log.segments),
                )
            partitions.append(row)
        configs = [
            shapes.config_json(e.name, e.value, e.source, e.is_sensitive, e.read_only)
            for e in broker.topic_config_entries(info.configs)
        ]
        return {
            "name": name,
            "topic_id": topic_id_text(info.topic_id),
            "internal": info.internal,
            "partitions": partitions,
            "configs": configs,
        }

    async def messages(
        self, topic: str, partition: int, offset: int | None, timestamp: int | None, limit: int
    ) -> dict:
        if topic not in self.broker.image.topics:
            raise not_found(f"topic {topic!r}")
        part = self._partition(topic, partition)
        if part is None:
            raise not_found(f"partition {partition} of topic {topic!r} on this broker")
        log = part.log
        start_offset, end = log.log_start_offset, part.high_watermark
        if timestamp is not None:
            found = log.fetch_offset_by_timestamp(timestamp)
            position = end if found is None else found[0]
        elif offset is None:
            position = max(start_offset, end - limit)
        else:
            position = offset
        position = min(max(position, start_offset), end)
        records = _read_records(part, position, limit)
        next_offset = records[-1]["offset"] + 1 if records else position
        return {
            "topic": topic,
            "partition": partition,
            "start": position,
            "next_offset": next_offset,
            "log_start": start_offset,
            "high_watermark": end,
            "records": records,
        }

    # -- groups ---------------------------------------------------------------------------

    def _committed(self, group_id: str) -> dict:
        try:
            offsets = self.broker.group_coordinator.fetch_offsets(group_id, None)
        except errors.KafkaError:
            return {}
        return {tuple(tp): om.offset for tp, om in offsets if om is not None}

    def _ends(self, keys) -> dict:
        out = {}
        for topic, index in keys:
            partition = self._partition(topic, index)
            out[(topic, index)] = partition.high_watermark if partition is not None else None
        return out

    async def groups(self) -> list[dict]:
        coordinator = self.broker.group_coordinator
        _, listed = coordinator.list_groups()
        rows = []
        for entry in listed:
            group_id = entry["group_id"]
            described = _describe(coordinator, group_id)
            committed = self._committed(group_id)
            _, total = shapes.group_offsets_json(committed, self._ends(committed))
            rows.append(
                {
                    "group_id": group_id,
                    "state": entry["group_state"],
                    "protocol_type": entry["protocol_type"],
                    "members": len(described["members"]) if described else 0,
                    "lag": total,
                    "partitions": len(committed),
                }
            )
        rows.sort(key=lambda r: r["group_id"])
        return rows

    async def group(self, group_id: str) -> dict:
        coordinator = self.broker.group_coordinator
        described = _describe(coordinator, group_id)
        committed = self._committed(group_id)
        if described is None and not committed:
            raise not_found(f"group {group_id!r}")
        rows, total = shapes.group_offsets_json(committed, self._ends(committed))
        members = []
        for m in (described or {}).get("members", []):
            members.append(
                {
                    "member_id": m["member_id"],
                    "group_instance_id": m["group_instance_id"],
                    "client_id": m["client_id"],
                    "client_host": m["client_host"],
                    "assignment": _assignment(described["protocol_type"], m["member_assignment"]),
                }
            )
        return {
            "group_id": group_id,
            "state": described["group_state"] if described else "Empty",
            "protocol_type": described["protocol_type"] if described else "",
            "protocol": described["protocol_data"] if described else "",
            "coordinator": self.broker.node_id,
            "members": members,
            "offsets": rows,
            "lag": total,
            "time_ms": int(time.time() * 1000),
        }

    # -- configs --------------------------------------------------------------------------

    async def broker_configs(self, broker_id: int) -> list[dict]:
        if broker_id != self.broker.node_id:
            raise ApiError(404, f"broker {broker_id}'s configs are served by broker {broker_id} itself")
        return [
            shapes.config_json(e.name, e.value, e.source, e.is_sensitive, e.read_only)
            for e in self.broker.broker_config_entries()
        ]

    # -- actions --------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict) -> dict:
        created = self.broker.controller.create_topic(name, partitions, replication_factor, None, configs)
        return {"name": name, "partitions": len(created.partitions), "topic_id": topic_id_text(created.topic_id)}

    async def delete_records(self, topic: str, offsets: dict[int, int]) -> dict:
        if topic not in self.broker.image.topics:
            raise not_found(f"topic {topic!r}")
        results = {}
        for index, offset in offsets.items():
            try:
                low = self.broker.replica_manager.delete_records(topic, index, offset)
                results[str(index)] = {"low_watermark": low}
            except errors.KafkaError as exc:
                results[str(index)] = {"error": exc.message, "code": exc.code.name.upper()}
        return {"topic": topic, "partitions": results}

    async def reset_offsets(self, group_id: str, topic: str, to: str, value: int | None) -> dict:
        from odradek.broker.group.offset_and_metadata import OffsetAndMetadata

        info = self.broker.image.topics.get(topic)
        if info is None:
            raise not_found(f"topic {topic!r}")
        targets = {}
        for index in sorted(info.partitions):
            partition = self._partition(topic, index)
            if partition is None:
                raise ApiError(409, f"partition {index} of {topic!r} is not on this broker")
            targets[(topic, index)] = _target_offset(partition, to, value)
        coordinator = self.broker.group_coordinator
        node = coordinator.find_coordinator(group_id)  # creates __consumer_offsets on first use
        if node != self.broker.node_id:
            raise ApiError(409, f"group {group_id!r} is coordinated by broker {node}: use that broker's console")
        results = coordinator.commit_offsets(
            group_id, "", None, -1, {tp: OffsetAndMetadata(off) for tp, off in targets.items()}
        )
        failed = {tp: code for tp, code in results.items() if code}
        if failed:
            code = next(iter(failed.values()))
            raise ApiError(409, shapes.reset_refusal(group_id, errors.error_for(code).code.name.upper()))
        return {
            "group_id": group_id,
            "topic": topic,
            "offsets": {str(p): off for (_, p), off in targets.items()},
        }

    # -- metrics --------------------------------------------------------------------------

    async def exporter_snapshot(self) -> dict:
        """What the kafka-exporter metric families need (see ``exporter.exporter_families``)."""
        image = self.broker.image
        partitions = []
        for info in image.topics.values():
            for index, state in info.partitions.items():
                partition = self._partition(info.name, index)
                if partition is None:
                    continue
                partitions.append(
                    (info.name, index, state.leader, len(state.replicas), len(state.isr),
                     partition.log_start_offset, partition.high_watermark)
                )  # fmt: skip
        groups = []
        coordinator = self.broker.group_coordinator
        _, listed = coordinator.list_groups()
        for entry in listed:
            group_id = entry["group_id"]
            described = _describe(coordinator, group_id)
            committed = self._committed(group_id)
            ends = self._ends(committed)
            groups.append((group_id, len(described["members"]) if described else 0, committed, ends))
        return {"brokers": len(image.brokers), "partitions": partitions, "groups": groups}


def _broker_json(b) -> dict:
    return {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}


def _describe(coordinator, group_id: str) -> dict | None:
    """The group as DescribeGroups shows it; a consumer-protocol group (KIP-848), which
    DescribeGroups does not describe, from ConsumerGroupDescribe in the same shape (each
    member's ``member_assignment`` already [topic, partition] pairs)."""
    try:
        return coordinator.describe_group(group_id)
    except errors.KafkaError:
        pass
    try:
        found = coordinator.consumer_group_describe(group_id)
    except errors.KafkaError:
        return None
    return {
        "group_state": found["group_state"],
        "protocol_type": "consumer",
        "protocol_data": found["assignor_name"],
        "members": [
            {
                "member_id": m["member_id"],
                "group_instance_id": m["instance_id"],
                "client_id": m["client_id"],
                "client_host": m["client_host"],
                "member_assignment": sorted(
                    [t["topic_name"], p] for t in m["assignment"]["topic_partitions"] for p in t["partitions"]
                ),
            }
            for m in found["members"]
        ],
    }


def _assignment(protocol_type: str, data: bytes | list) -> list[list] | None:
    """A consumer member's partitions as [topic, partition] pairs (None for other protocols)."""
    if isinstance(data, list):  # a consumer-protocol group's, decoded already (_describe)
        return data
    if protocol_type != "consumer" or not data:
        return None if protocol_type != "consumer" else []
    from odradek.client.consumer.consumer_protocol import decode_assignment

    try:
        partitions, _ = decode_assignment(data)
    except Exception:
        return None
    return sorted([t, p] for t, p in partitions)


def _target_offset(partition, to: str, value: int | None) -> int:
    start, end = partition.log_start_offset, partition.high_watermark
    if to == "earliest":
        return start
    if to == "latest":
        return end
    if to == "offset":
        return min(max(value, start), end)
    if to == "timestamp":
        found = partition.log.fetch_offset_by_timestamp(value)
        return end if found is None else min(found[0], end)
    raise ApiError(400, f"to must be earliest, latest, offset or timestamp, got {to!r}")


def _read_records(partition, start: int, limit: int) -> list[dict]:
    """Up to ``limit`` records from ``start`` below the high watermark (control batches left out)."""
    from odradek.protocol.record_batch import iter_batches

    out: list[dict] = []
    position = start
    while len(out) < limit and position < partition.high_watermark:
        read = partition.read(position, _READ_BYTES, isolation_level=0)
        if read.records is None:
            break
        advanced = position
        for batch in iter_batches(read.records.read(), check_crc=False):
            advanced = batch.next_offset
            if batch.is_control:
                continue
            for r in batch.records():
                if r.offset < start:
                    continue
                out.append(
                    shapes.record_json(r.offset, r.timestamp, batch.timestamp_type, r.key, r.value, r.headers)
                )
                if len(out) >= limit:
                    return out
        if advanced <= position:
            break
        position = advanced
    return out
