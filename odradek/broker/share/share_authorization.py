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
