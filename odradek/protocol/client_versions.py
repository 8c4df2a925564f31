"""The API versions our requesting side speaks, and the choice per API after ApiVersions.

``CLIENT_MAX`` caps versions where a newer version changes what the caller must do
(topic ids instead of names), ``CLIENT_MIN`` skips versions it no longer writes, so
negotiation never picks a version the client, the pipeline or a broker-to-broker
connection cannot use.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.protocol import api_keys
from odradek.protocol.messages import known_versions

# Highest version the client code handles per API (newer ones switch to topic ids or
# change semantics the client does not implement).
CLIENT_MAX = {
    api_keys.PRODUCE: 12,
    api_keys.FETCH: 12,
    api_keys.LIST_OFFSETS: 9,
    api_keys.METADATA: 12,
    api_keys.OFFSET_COMMIT: 9,
    api_keys.OFFSET_FETCH: 9,
    api_keys.FIND_COORDINATOR: 6,
    api_keys.JOIN_GROUP: 9,
    api_keys.HEARTBEAT: 4,
    api_keys.LEAVE_GROUP: 5,
    api_keys.SYNC_GROUP: 5,
    api_keys.DESCRIBE_GROUPS: 5,
    api_keys.LIST_GROUPS: 5,
    api_keys.API_VERSIONS: 3,
    api_keys.CREATE_TOPICS: 7,
    api_keys.DELETE_TOPICS: 5,
    api_keys.DELETE_RECORDS: 2,
    api_keys.INIT_PRODUCER_ID: 5,
    api_keys.ADD_PARTITIONS_TO_TXN: 3,  # v4+ are broker-to-broker (batched, verify-only)
    api_keys.ADD_OFFSETS_TO_TXN: 4,
    api_keys.END_TXN: 4,  # v5+: transactions v2 (an epoch bump per transaction)
    api_keys.TXN_OFFSET_COMMIT: 4,  # v5+: transactions v2
    api_keys.DESCRIBE_CONFIGS: 4,
    api_keys.ALTER_CONFIGS: 2,
    api_keys.CREATE_PARTITIONS: 3,
    api_keys.DELETE_GROUPS: 2,
    api_keys.INCREMENTAL_ALTER_CONFIGS: 1,
    api_keys.OFFSET_DELETE: 0,
    api_keys.DESCRIBE_CLUSTER: 1,
    api_keys.DESCRIBE_LOG_DIRS: 4,
}


# Lowest version the client uses: Produce v3 is the first with v2 record batches (the only
# kind this producer writes); Fetch v4 the first with isolation levels.
CLIENT_MIN = {api_keys.PRODUCE: 3, api_keys.FETCH: 4}


def client_versions(api_key: int) -> range:
    known = known_versions(api_key)
    if not known:
        return known
    top = min(known.stop - 1, CLIENT_MAX.get(api_key, known.stop - 1))
    return range(max(known.start, CLIENT_MIN.get(api_key, 0)), top + 1)


def negotiate(
    broker_versions: Mapping[int, tuple[int, int]], caps: Mapping[int, int] | None = None
) -> dict[int, int]:
    """The version to use per API: the highest both sides support. With ``caps``, only the
    APIs it names, at most at the version it gives (a caller speaking fewer of them)."""
    chosen = {}
    for api_key, (low, high) in broker_versions.items():
        ours = client_versions(api_key)
        if not ours or (caps is not None and api_key not in caps):
            continue
        top = min(high, ours.stop - 1)
        if caps is not None:
            top = min(top, caps[api_key])
        if top >= max(low, ours.start):
            chosen[api_key] = top
    return chosen
