"""Requests to a share coordinator, one share partition each (``share_persister.py`` sends
them; ``handlers/share_group_state.py`` answers them)."""

from __future__ import annotations

from odradek.protocol import messages

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87


def state_request(api_key: int, key, fields: dict):
    """The v0 request of ``api_key`` for share partition ``key`` (group, topic id, partition)
    with the partition's ``fields``."""
    group_id, topic_id, partition = key
    return messages.build_request(
        api_key,
        0,
        {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [{"partition": partition, **fields}]}]},
    )


def partition_result(response):
    """The one partition's result of a response to ``state_request``."""
    return response.results[0].partitions[0]
