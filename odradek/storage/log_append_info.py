"""LogAppendInfo: what an append did (Kafka's LogAppendInfo), for the produce path's answer.

Made by ``log.Log`` (owner thread) and read by the broker's produce handler and the group and
transaction coordinators; plain data, no behaviour.
"""

from __future__ import annotations


class UnexpectedAppendOffsetError(Exception):
    """A follower append starts below the log end offset."""


class LogAppendInfo:
    """What an append did: offsets assigned (or, for a duplicate, the original ones)."""

    __slots__ = (
        "first_offset",
        "last_offset",
        "log_append_time",
        "log_start_offset",
        "record_count",
        "duplicate",
        "max_timestamp",
        "offset_of_max_timestamp",
        "valid_bytes",
        "num_batches",
    )

    def __init__(
        self,
        first_offset: int,
        last_offset: int,
        log_append_time: int = -1,
        log_start_offset: int = 0,
        record_count: int = 0,
        duplicate: bool = False,
        max_timestamp: int = -1,
        offset_of_max_timestamp: int = -1,
        valid_bytes: int = 0,
        num_batches: int = 0,
    ):
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.record_count = record_count
        self.duplicate = duplicate
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.valid_bytes = valid_bytes
        self.num_batches = num_batches

    def __repr__(self) -> str:
        return (
            f"LogAppendInfo(first={self.first_offset}, last={self.last_offset}, records={self.record_count}, "
            f"log_append_time={self.log_append_time}, duplicate={self.duplicate})"
        )
