"""The share groups of one shard (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe.

A share group's members all read the same partitions: every member is assigned every
partition of the topics the group subscribes to, and the partition leaders hand each record
to one member at a time (``broker/share/``). A member joins with epoch 0, heartbeats with
its epoch every ``group.share.heartbeat.interval.ms`` and leaves with -1; one silent for
``group.share.session.timeout.ms`` is removed and its acquired records are released.

Membership is kept in memory: after a coordinator restart members rejoin (UNKNOWN_MEMBER_ID,
then epoch 0); the records' delivery state lives with the partition leaders.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from odradek.protocol import errors

log = logging.getLogger(__name__)

SHARE_GROUP_TYPE = "share"


@dataclass
class ShareMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    topics: tuple[str, ...] = ()
    epoch: int = 0
    assigned: dict = field(default_factory=dict)  # topic id -> frozenset of partitions
    timer: object = None


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


class ShareGroupManager:
    def __init__(self, shard):
        self.shard = shard
        self.groups: dict[str, ShareGroup] = {}
        self.on_member_gone = None  # (group id, member id) -> None: releases its records

    @property
    def config(self):
        return self.shard.context.config

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        broker = getattr(self.shard.context.topic, "broker", None)
        image = getattr(broker, "image", None)
        if image is None:
            return {}
        return {n: (t.topic_id, len(t.partitions)) for n, t in image.topics.items() if not t.internal}

    def heartbeat(self, group_id: str, member_id: str, epoch: int, rack_id, topics, client_id: str, client_host: str):
        """(member id, epoch, interval ms, assignment or None); raises KafkaError."""
        if not group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if not member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if self.shard.groups.get(group_id) is not None or group_id in self.shard.consumer.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a share group")
        group = self.groups.get(group_id)
        if epoch == -1:
            if group is None or member_id not in group.members:
                raise errors.UnknownMemberIdError(f"member {member_id} is not in share group {group_id}")
            self._remove(group, member_id, "left the group")
            return member_id, -1, self.config.share_heartbeat_interval_ms, None
        if epoch == 0:
            if topics is None:
                raise errors.InvalidRequestError("SubscribedTopicNames must be set when joining.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(member_id) or ShareMember(member_id)
            group.members[member_id] = member
            group.epoch += 1
            member.epoch = group.epoch
        else:
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                raise errors.UnknownMemberIdError(f"member {member_id} is not in share group {group_id}")
            if epoch != member.epoch:
                raise errors.FencedMemberEpochError(f"member {member_id} sent epoch {epoch}; its epoch is {member.epoch}")
        if topics is not None:
            member.topics = tuple(sorted(set(topics)))
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        names = self._topics()
        assignment = {
            names[t][0]: frozenset(range(names[t][1])) for t in member.topics if t in names
        }
        changed = assignment != member.assigned or epoch == 0
        member.assigned = assignment
        self._schedule_session(group, member)
        return member.member_id, member.epoch, self.config.share_heartbeat_interval_ms, assignment if changed else None

    def _schedule_session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        member.timer = asyncio.get_running_loop().call_later(
            self.config.share_session_timeout_ms / 1000, self._expire, group, member.member_id
        )

    def _expire(self, group: ShareGroup, member_id: str) -> None:
        if self.groups.get(group.group_id) is group and member_id in group.members:
            self._remove(group, member_id, "session timeout")

    def _remove(self, group: ShareGroup, member_id: str, reason: str) -> None:
        member = group.members.pop(member_id)
        if member.timer is not None:
            member.timer.cancel()
        group.epoch += 1
        log.info("share group %s: member %s removed (%s)", group.group_id, member_id, reason)
        if self.on_member_gone is not None:
            self.on_member_gone(group.group_id, member_id)

    def unload(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.timer is not None:
                    member.timer.cancel()
        self.groups.clear()

    def listed(self, wanted_states: set[str]) -> list[dict]:
        return [
            {"group_id": g.group_id, "protocol_type": "share", "group_state": g.state, "group_type": SHARE_GROUP_TYPE}
            for g in self.groups.values()
            if not wanted_states or g.state.lower() in wanted_states
        ]

    def describe(self, group_id: str) -> dict | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        names = {tid: n for n, (tid, _) in self._topics().items()}
        return {
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.epoch,
            "assignment_epoch": group.epoch,
            "assignor_name": "simple",
            "members": [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.topics),
                    "assignment": {
                        "topic_partitions": [
                            {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                            for t, ps in sorted(m.assigned.items())
                        ]
                    },
                }
                for m in group.members.values()
            ],
        }
