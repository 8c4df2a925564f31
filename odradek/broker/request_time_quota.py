"""Request-time quotas (KIP-124) in the transport: which requests are charged, and how a
charged request's throttle time gets into a response the handler already built.

Kafka charges the request handler thread's time when the response is made (throttling on
it) and the network thread's time once the response is sent (counted, never throttling).
Odradek's one event loop does both jobs, so the connection charges the time from the first
byte of parsing to the handler's answer, throttling on it, then the time spent encoding the
answer, without throttling. Like Kafka, inter-broker requests (ClusterAction) are exempt.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct

from odradek.broker.handlers import RawResponse

# LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers
_INTER_BROKER_APIS = frozenset({4, 5, 6, 7, 27})
_FETCH = 1
_I32 = struct.Struct(">i")


def exempt(request) -> bool:
    """Inter-broker requests: the controller's and a follower's fetch."""
    if request.api_key in _INTER_BROKER_APIS:
        return True
    if request.api_key == _FETCH:
        body = request.body
        replica_id = body.replica_state.replica_id if request.api_version >= 15 else body.replica_id
        return replica_id >= 0
    return False


def with_throttle(result, throttle_ms: int):
    """``result`` (a response entity or a RawResponse) answering ``throttle_ms``; results
    without a throttle field (and already encoded bytes) are returned as they are."""
    if isinstance(result, RawResponse):
        at = result.throttle_at
        if at is None:
            return result
        head = result.parts[0]
        at = at if at >= 0 else len(head) + at
        parts = list(result.parts)
        parts[0] = b"".join((head[:at], _I32.pack(throttle_ms), head[at + 4 :]))
        return dataclasses.replace(result, parts=parts)
    if dataclasses.is_dataclass(result) and hasattr(result, "throttle_time"):
        return dataclasses.replace(result, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return result
