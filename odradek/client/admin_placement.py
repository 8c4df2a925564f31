"""The admin calls about leaders and replica placement (cluster mode): ElectLeaders (KIP-460),
AlterPartitionReassignments and ListPartitionReassignments (KIP-455). A part of ``Admin``
(its mixin), sent to the controller as the metadata names it.
"""

from __future__ import annotations

from odradek.protocol import api_keys
from odradek.protocol.errors import KafkaError, error_for

from .structs import TopicPartition


def _error(code: int, message: str | None, item) -> KafkaError:
    cls = error_for(code)
    return cls(f"{item}: {message or cls.code.name}", item=item)


def _by_topic(partitions) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp[0], []).append(tp[1])
    return by_topic


class LeadersAndPlacement:
    async def elect_leaders(self, partitions=None, election_type: int = 0, timeout: float | None = None) -> dict:
        """ElectLeaders (KIP-460): 0 moves leadership to each partition's preferred replica, 1
        elects a leader from any live replica where none is left (unclean: data may be lost).
        ``partitions``: TopicPartitions, or None for all. Returns ``{TopicPartition: None or the
        KafkaError}`` (ElectionNotNeededError when the preferred replica already leads)."""
        timeout = self._t(timeout)
        wanted = None
        if partitions is not None:
            wanted = [{"topic": t, "partitions": ps} for t, ps in _by_topic(partitions).items()]
        resp = await self._controller_call(
            api_keys.ELECT_LEADERS,
            {"election_type": election_type, "topic_partitions": wanted, "timeout": int(timeout * 1000)},
            timeout,
        )
        if resp.error_code:
            raise _error(int(resp.error_code), None, "ElectLeaders")
        return {
            TopicPartition(r.topic, p.partition_id): (
                _error(int(p.error_code), p.error_message, f"{r.topic}-{p.partition_id}") if p.error_code else None
            )
            for r in resp.replica_election_results
            for p in r.partition_result
        }

    async def alter_partition_reassignments(self, reassignments: dict, timeout: float | None = None) -> dict:
        """Move partitions to new replica lists (KIP-455): ``{TopicPartition: [broker ids] or None}``
        (None cancels a move in progress). Returns ``{TopicPartition: None or the KafkaError}``."""
        timeout = self._t(timeout)
        by_topic: dict[str, list] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "replicas": None if replicas is None else list(replicas)}
            )
        resp = await self._controller_call(
            api_keys.ALTER_PARTITION_REASSIGNMENTS,
            {"timeout": int(timeout * 1000), "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
            timeout,
        )
        if resp.error_code:
            raise _error(int(resp.error_code), resp.error_message, "AlterPartitionReassignments")
        return {
            TopicPartition(t.name, p.partition_index): (
                _error(int(p.error_code), p.error_message, f"{t.name}-{p.partition_index}") if p.error_code else None
            )
            for t in resp.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(self, partitions=None, timeout: float | None = None) -> dict:
        """The moves in progress: ``{TopicPartition: (replicas, adding, removing)}``."""
        timeout = self._t(timeout)
        wanted = None
        if partitions is not None:
            wanted = [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(partitions).items()]
        resp = await self._controller_call(
            api_keys.LIST_PARTITION_REASSIGNMENTS, {"timeout": int(timeout * 1000), "topics": wanted}, timeout
        )
        if resp.error_code:
            raise _error(int(resp.error_code), resp.error_message, "ListPartitionReassignments")
        return {
            TopicPartition(t.name, p.partition_index): (
                tuple(p.replicas),
                tuple(p.adding_replicas),
                tuple(p.removing_replicas),
            )
            for t in resp.topics
            for p in t.partitions
        }
