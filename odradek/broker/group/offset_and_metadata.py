"""A committed offset as the group coordinator keeps it (Kafka's OffsetAndMetadata)."""

from __future__ import annotations

from typing import NamedTuple

from odradek.broker.group import consumer_offsets_schema as schema


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # set only by commits that carried a retention time (v2-v4)

    def to_record(self) -> schema.OffsetCommitValue:
        return schema.OffsetCommitValue(
            self.offset, self.metadata, self.commit_timestamp, self.leader_epoch, self.expire_timestamp
        )

    @classmethod
    def from_record(cls, value: schema.OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp
        )
