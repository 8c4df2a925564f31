"""The admin calls about consumer and share groups and their offsets: ListGroups,
DescribeGroups (ConsumerGroupDescribe and ShareGroupDescribe for the new protocols),
DeleteGroups and the group offset APIs. A part of ``Admin`` (its mixin), sent to each group's
coordinator.
"""

from __future__ import annotations

import asyncio

from odradek.client.consumer.consumer_protocol import decode_assignment
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, KafkaError, error_for

from .admin_errors import item_error, raise_items
from .structs import GroupDescription, GroupListing, MemberDescription, OffsetAndMetadata, TopicPartition


class GroupAdmin:

    async def _coordinator(self, group_id: str, timeout: float) -> int:
        code, node, host, port = await self._retrying(
            lambda: self._client.find_coordinator(0, group_id), timeout, "FindCoordinator"
        )
        if code:
            raise error_for(code)(f"FindCoordinator for group {group_id!r}")
        conn_id = 0x7FFFFFFF - node
        self._client.register_node(conn_id, host, port)
        return conn_id

    async def _group_call(self, group_id, api_key, values, timeout):
        async def attempt():
            node = await self._coordinator(group_id, timeout)
            return await self._client.call(node, api_key, values)

        from odradek.protocol.messages import api_name

        return await self._retrying(attempt, timeout, f"{api_name(api_key)} for group {group_id!r}")

    async def list_groups(self, timeout: float | None = None) -> list[GroupListing]:
        timeout = self._t(timeout)
        await self._ready()
        await self._client.refresh(timeout)
        out = {}
        for node in list(self._client.cluster.brokers):
            async with asyncio.timeout(timeout):
                resp = await self._client.call(
                    node, api_keys.LIST_GROUPS, {"states_filter": [], "types_filter": []}
                )
            if resp.error_code:
                raise error_for(int(resp.error_code))(f"ListGroups on broker {node}")
            for g in resp.groups:
                out[g.group_id] = GroupListing(
                    g.group_id, g.protocol_type, getattr(g, "group_state", None), getattr(g, "group_type", "") or "classic"
                )
        return sorted(out.values())

    async def describe_groups(self, group_ids, timeout: float | None = None) -> dict[str, GroupDescription]:
        timeout = self._t(timeout)
        group_ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        out = {}
        errors = {}
        for gid in group_ids:
            resp = await self._group_call(
                gid, api_keys.DESCRIBE_GROUPS, {"groups": [gid], "include_authorized_operations": False}, timeout
            )
            for g in resp.groups:
                if g.error_code == ErrorCode.group_id_not_found:  # maybe a consumer-protocol group (KIP-848)
                    found = await self._describe_consumer_group(gid, timeout)
                    if found is not None:
                        out[gid] = found
                        continue
                if g.error_code:
                    errors[g.group_id] = item_error(int(g.error_code), None, f"group {g.group_id!r}")
                    continue
                members = []
                for m in g.members:
                    assignment = set()
                    if g.protocol_type == "consumer" and m.member_assignment:
                        try:
                            assignment, _ = decode_assignment(m.member_assignment)
                        except Exception:  # noqa: S110 - a non-standard assignment stays opaque
                            pass
                    members.append(
                        MemberDescription(
                            m.member_id,
                            getattr(m, "group_instance_id", None),
                            m.client_id,
                            m.client_host,
                            assignment,
                        )
                    )
                out[g.group_id] = GroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
                )
        raise_items(errors, "groups")
        return out

    async def describe_share_group(self, group_id: str, timeout: float | None = None) -> GroupDescription | None:
        """ShareGroupDescribe (KIP-932) of one group; None when there is no such share group."""
        timeout = self._t(timeout)
        body = {"group_ids": [group_id], "include_authorized_operations": False}
        resp = await self._group_call(group_id, api_keys.SHARE_GROUP_DESCRIBE, body, timeout)
        g = resp.groups[0]
        if g.error_code == ErrorCode.group_id_not_found:
            return None
        if g.error_code:
            raise error_for(int(g.error_code))(g.error_message or f"share group {group_id!r}")
        members = [
            MemberDescription(
                m.member_id,
                None,
                m.client_id,
                m.client_host,
                {TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions},
            )
            for m in g.members
        ]
        return GroupDescription(g.group_id, g.group_state, "share", g.assignor_name, members, 0, "share")

    async def _describe_consumer_group(self, group_id: str, timeout: float) -> GroupDescription | None:
        """ConsumerGroupDescribe of one group; None when it is no consumer group either."""
        body = {"group_ids": [group_id], "include_authorized_operations": False}
        try:
            resp = await self._group_call(group_id, api_keys.CONSUMER_GROUP_DESCRIBE, body, timeout)
        except KafkaError:
            return None
        g = resp.groups[0]
        if g.error_code:
            return None
        members = [
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                {TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions},
            )
            for m in g.members
        ]
        return GroupDescription(g.group_id, g.group_state, "consumer", g.assignor_name, members, 0, "consumer")

    async def delete_groups(self, group_ids, timeout: float | None = None) -> None:
        timeout = self._t(timeout)
        group_ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        errors = {}
        for gid in group_ids:
            resp = await self._group_call(gid, api_keys.DELETE_GROUPS, {"groups_names": [gid]}, timeout)
            for r in resp.results:
                if r.error_code:
                    errors[r.group_id] = item_error(int(r.error_code), None, f"group {r.group_id!r}")
        raise_items(errors, "groups")

    async def list_group_offsets(self, group_id: str, partitions=None, timeout: float | None = None):
        """``{TopicPartition: OffsetAndMetadata}`` committed by ``group_id`` (all partitions if None)."""
        timeout = self._t(timeout)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        values = {
            "group_id": group_id,
            "topics": topics,
            "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": False,
        }
        resp = await self._group_call(group_id, api_keys.OFFSET_FETCH, values, timeout)
        if hasattr(resp, "groups") and resp.groups:
            g = resp.groups[0]
            code, rtopics = int(g.error_code), g.topics
        else:
            code, rtopics = int(getattr(resp, "error_code", 0)), resp.topics
        if code:
            raise error_for(code)(f"OffsetFetch for group {group_id!r}")
        out = {}
        for t in rtopics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(int(p.error_code))(f"OffsetFetch for {t.name}-{p.partition_index}")
                if int(p.committed_offset) >= 0:
                    out[TopicPartition(t.name, int(p.partition_index))] = OffsetAndMetadata(
                        int(p.committed_offset),
                        p.metadata or "",
                        int(getattr(p, "committed_leader_epoch", -1)),
                    )
        return out

    async def alter_group_offsets(self, group_id: str, offsets: dict, timeout: float | None = None) -> None:
        """Set committed offsets of an (empty) group: ``{TopicPartition: offset}``."""
        timeout = self._t(timeout)
        by_topic: dict[str, list] = {}
        for tp, om in offsets.items():
            off = om if isinstance(om, int) else om[0]
            meta = "" if isinstance(om, int) else (om[1] if len(om) > 1 else "")
            by_topic.setdefault(tp[0], []).append(
                {
                    "partition_index": tp[1],
                    "committed_offset": off,
                    "committed_leader_epoch": -1,
                    "committed_metadata": meta,
                    "commit_timestamp": -1,
                }
            )
        values = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self._group_call(group_id, api_keys.OFFSET_COMMIT, values, timeout)
        errors = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    errors[tp] = item_error(int(p.error_code), None, f"{t.name}-{p.partition_index}")
        raise_items(errors, "partitions")

    async def alter_share_group_offsets(self, group_id: str, offsets: dict, timeout: float | None = None) -> None:
        """AlterShareGroupOffsets (KIP-932): where an empty share group starts reading each
        partition, ``{TopicPartition: offset}``."""
        timeout = self._t(timeout)
        by_topic: dict[str, list] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1], "start_offset": off})
        values = {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = await self._group_call(group_id, api_keys.ALTER_SHARE_GROUP_OFFSETS, values, timeout)
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or f"share group {group_id!r}")
        errors = {}
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    tp = TopicPartition(t.topic_name, int(p.partition_index))
                    errors[tp] = item_error(int(p.error_code), p.error_message, f"{t.topic_name}-{p.partition_index}")
        raise_items(errors, "partitions")

    async def describe_share_group_offsets(self, group_id: str, timeout: float | None = None) -> dict:
        """DescribeShareGroupOffsets (KIP-932) of every partition the share group has state
        for: ``{TopicPartition: (start offset, lag)}``, the lag -1 when the broker cannot tell."""
        timeout = self._t(timeout)
        values = {"groups": [{"group_id": group_id, "topics": None}]}
        resp = await self._group_call(group_id, api_keys.DESCRIBE_SHARE_GROUP_OFFSETS, values, timeout)
        g = resp.groups[0]
        if g.error_code:
            raise error_for(int(g.error_code))(g.error_message or f"share group {group_id!r}")
        out, errors = {}, {}
        for t in g.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, int(p.partition_index))
                if p.error_code:
                    errors[tp] = item_error(int(p.error_code), p.error_message, f"{t.topic_name}-{p.partition_index}")
                else:
                    out[tp] = (int(p.start_offset), int(getattr(p, "lag", -1)))
        raise_items(errors, "partitions")
        return out

    async def delete_share_group_offsets(self, group_id: str, topics, timeout: float | None = None) -> None:
        """DeleteShareGroupOffsets (KIP-932): an empty share group forgets where it is in
        ``topics`` (its next member starts them where share.auto.offset.reset says)."""
        timeout = self._t(timeout)
        values = {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]}
        resp = await self._group_call(group_id, api_keys.DELETE_SHARE_GROUP_OFFSETS, values, timeout)
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or f"share group {group_id!r}")
        errors = {t.topic_name: item_error(int(t.error_code), t.error_message, t.topic_name)
                  for t in resp.responses if t.error_code}
        raise_items(errors, "topics")

    async def delete_group_offsets(self, group_id: str, partitions, timeout: float | None = None) -> None:
        timeout = self._t(timeout)
        by_topic: dict[str, list] = {}
        for tp in partitions:
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1]})
        values = {
            "group_id": group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self._group_call(group_id, api_keys.OFFSET_DELETE, values, timeout)
        if resp.error_code:
            raise error_for(int(resp.error_code))(f"OffsetDelete for group {group_id!r}")
        errors = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    errors[tp] = item_error(int(p.error_code), None, f"{t.name}-{p.partition_index}")
        raise_items(errors, "partitions")
