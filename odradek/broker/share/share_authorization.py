"""Read on each topic of a ShareFetch or ShareAcknowledge (Kafka's per-topic check; Read on
the group is the request gate's). The topics the principal may not Read are taken out of the
request and answered TOPIC_AUTHORIZATION_FAILED per partition; unknown topic ids go through
to the share-fetch manager, which answers UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import dataclasses

from odradek.protocol.errors import ErrorCode


def without_unreadable_topics(broker, request, row) -> tuple[object, list[dict]]:
    """The request body with only the topics it may Read, and the answers of the others
    (``row(partition_index)`` makes one partition's answer)."""
    body = request.body
    if broker.authorizer is None:
        return body, []
    image = broker.image
    kept, denied = [], []
    for t in body.topics:
        info = image.topic_by_id(t.topic_id)
        if info is None or broker.allowed(request, "Read", "Topic", info.name):
            kept.append(t)
            continue
        parts = [{**row(p.partition_index), "error_code": ErrorCode.topic_authorization_failed} for p in t.partitions]
        denied.append({"topic_id": t.topic_id, "partitions": parts})
    if not denied:
        return body, []
    return dataclasses.replace(body, topics=tuple(kept)), denied


def readable_topic_ids(broker, request):
    """``readable(topic id)`` for the share-fetch manager: whether the principal may Read the
    topic now (None without an authorizer). Kafka checks every partition of the share session
    at each ShareFetch, so an ACL removed mid-session stops its partitions at the next one."""
    if broker.authorizer is None:
        return None
    image = broker.image

    def readable(topic_id) -> bool:
        info = image.topic_by_id(topic_id)
        return info is None or broker.allowed(request, "Read", "Topic", info.name)

    return readable
