"""Fetch (key 1), v4-v18, for consumers (v18 only adds a follower's high watermark, a KRaft
replication field (KIP-1166) our followers do not send and the leader ignores).

Reads each partition from the fetch offset, bounded by the high watermark (or, for
read_committed, the last stable offset, with the aborted transactions overlapping the
data listed so that clients drop their records), ``partition_max_bytes`` and the response's
``max_bytes``; the first partition with data may exceed the limits by one batch so
that a consumer can always make progress (KIP-74). With fewer than ``min_bytes``
available and ``max_wait_ms`` > 0, the request parks in the fetch purgatory until an
append brings enough bytes or the wait expires; ``max_wait_ms`` = 0 answers at once. The
reading is ``ReplicaManager.read``; the waiting a ``DelayedFetch`` in the fetch purgatory.
Fetch sessions (KIP-227, ``fetch_session.py``): a fetch with session id 0 and epoch -1
(librdkafka's, always) is sessionless; epoch 0 opens a session when the cache has room, and
later fetches list only what changed and get only partitions with something new; an unknown
session answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.
The response is packed by hand around the record data, which stays file slices: the
connection streams them from the segment files as the socket drains (never the whole answer
in memory), with sendfile where configured and the socket is plaintext.
A follower's fetch (replica_id >= 0, cluster mode only; a single node answers
UNKNOWN_SERVER_ERROR) reads up to the log end offset instead of the high watermark, and
tells the leader how far the follower's log reaches (``ReplicaManager.read_for_follower``):
that moves the high watermark and the ISR; it waits like a consumer's fetch, woken by appends.
With ``leader.replication.throttled.rate`` set, the leader's replication throttle
(cluster/replication_quota.py) withholds the records of throttled partitions from followers out
of the ISR while over its quota; those bytes do not count toward ``min_bytes``.
A consumer's ``max_bytes`` is capped at what its ``consumer_byte_rate`` allows in one quota
window, and a consumer over that quota gets an empty answer carrying the throttle
time, and the connection reads nothing more for that long (KIP-219, Kafka's answer): the bytes
not sent are not counted, a full fetch opens no session (session id 0), an incremental one keeps
its session and epoch and gets the partitions it missed next time. Follower fetches are not
subject to client quotas (the replication throttles apply to them), as in Kafka.
With an authorizer, partitions of topics a consumer may not Read (and every partition of a
follower without ClusterAction) answer TOPIC_AUTHORIZATION_FAILED.
From v13 topics are named by topic id (KIP-516), an unknown id answering UNKNOWN_TOPIC_ID;
From v12 a fetcher names the leader epoch of the last batch it has (``last_fetched_epoch``,
KIP-595): where its log diverged from this one the partition answers no records and a
``diverging_epoch`` (the largest epoch at or below it here and where it ends), at once, and
a follower's fetch offset there does not count as its log end.
v15 moves the replica id into ``replica_state``; v16's current-leader hints (for
NOT_LEADER_OR_FOLLOWER, which a single node never answers) and v17's replica directory id
(KRaft) are left out.
"""

import asyncio
import time
import uuid

from odradek.broker.delayed_fetch import DelayedFetch
from odradek.broker.fetch_session import FINAL_EPOCH
from odradek.broker.handlers import RawResponse, api
from odradek.protocol.errors import ErrorCode
from odradek.protocol.hot_responses import FETCH_THROTTLE_AT, FETCH_TOPIC_IDS_FROM, fetch_response


def _plan(broker, body, version: int):
    """The partitions of the request as (topic, index, fetch offset, max bytes, epoch); from
    v13 also the topic ids asked for ({name: id}) and the unknown ones ({id: [index, ...]})."""
    if version < FETCH_TOPIC_IDS_FROM:
        plan = [
            (t.topic, p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
            for t in body.topics
            for p in t.partitions
        ]
        return plan, None, None
    plan, ids, unknown = [], {}, {}
    for t in body.topics:
        name = _topic_name(broker, t.topic_id)
        if name is None:
            unknown[t.topic_id] = [p.partition for p in t.partitions]
            continue
        ids[name] = t.topic_id
        plan.extend(
            (name, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
            for p in t.partitions
        )
    return plan, ids, unknown


def _forgotten(broker, body, version: int) -> list[tuple[str, int]]:
    """The partitions an incremental fetch drops from its session."""
    out = []
    for t in body.forgotten_topics_data:
        name = t.topic if version < FETCH_TOPIC_IDS_FROM else _topic_name(broker, t.topic_id)
        out.extend((name, index) for index in t.partitions)
    return out


def _session(broker, body, version: int, replica_id: int, plan, ids, last_fetched, log_starts):
    """The fetch's context in its session (KIP-227): what to read and which session to name."""
    return broker.fetch_sessions.context(
        body.session_id,
        body.session_epoch,
        plan,
        last_fetched,
        log_starts,
        _forgotten(broker, body, version),
        ids,
        replica_id >= 0,
        int(time.time() * 1000),
    )


def _last_fetched_epochs(broker, body, version: int) -> dict | None:
    """v12+: the leader epoch of the last batch the fetcher has, per partition that names
    one (KIP-595); None when none does (every fetch before v12, most consumers')."""
    if version < 12:
        return None
    out = None
    for t in body.topics:
        name = None
        for p in t.partitions:
            if p.last_fetched_epoch >= 0:
                if name is None:
                    name = t.topic if version < FETCH_TOPIC_IDS_FROM else _topic_name(broker, t.topic_id)
                if out is None:
                    out = {}
                out[(name, p.partition)] = p.last_fetched_epoch
    return out


def _rack(body, version: int) -> str:
    """The consumer's ``client.rack`` (v11+, KIP-392), or ""."""
    return (body.rack_id or "") if version >= 11 else ""


def _follower_log_starts(broker, body, version: int) -> dict:
    """A follower's log start offset per partition (it tells the leader in each fetch)."""
    out = {}
    for t in body.topics:
        name = t.topic if version < FETCH_TOPIC_IDS_FROM else _topic_name(broker, t.topic_id)
        for p in t.partitions:
            out[(name, p.partition)] = p.log_start_offset
    return out


_NAMES_BY_ID: dict = {}
_ZERO_ID = uuid.UUID(int=0)  # kio reads the all-zero id as None


def _topic_name(broker, topic_id):
    """The name of the topic with ``topic_id``, or None; the map is rebuilt when it misses."""
    topics = broker.image.topics
    name = _NAMES_BY_ID.get(topic_id)
    topic = topics.get(name) if name is not None else None
    if topic is None or topic.topic_id != topic_id:
        _NAMES_BY_ID.clear()
        _NAMES_BY_ID.update((t.topic_id, n) for n, t in topics.items())
        name = _NAMES_BY_ID.get(topic_id)
    return name


def _response(version: int, topics, ids, unknown, session_id: int = 0) -> RawResponse:
    """The response body; from v13 each topic is named by the id the request used."""
    if ids is not None:
        topics = [(ids[name], partitions) for name, partitions in topics]
        topics += [
            (topic_id or _ZERO_ID, [(i, ErrorCode.unknown_topic_id, -1, -1, -1, None, b"") for i in indexes])
            for topic_id, indexes in unknown.items()
        ]
    return fetch_response(version, topics, session_id=session_id)


@api(1, 4, 18)
def handle_fetch(broker, request):
    """Answers at once when it can (the usual case under load, and no task to schedule);
    otherwise returns a coroutine that waits in the fetch purgatory."""
    body = request.body
    version = request.api_version
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    if replica_id >= 0 and not broker.replica_manager.replicated:
        return RawResponse(fetch_response(version, [], error_code=ErrorCode.unknown_server_error), throttle_at=FETCH_THROTTLE_AT)
    plan, ids, unknown = _plan(broker, body, version)
    last_fetched = _last_fetched_epochs(broker, body, version)
    log_starts = _follower_log_starts(broker, body, version) if replica_id >= 0 else None
    context = None
    if version >= 7 and (body.session_id or body.session_epoch != FINAL_EPOCH):
        context = _session(broker, body, version, replica_id, plan, ids, last_fetched, log_starts)
        if context.error:
            return RawResponse(fetch_response(version, [], error_code=context.error), throttle_at=FETCH_THROTTLE_AT)
        plan, last_fetched, log_starts = context.plan, context.last_fetched, context.log_starts
        if ids is not None and context.session is not None:
            ids = context.session.topic_ids
    denied = None
    if broker.authorizer is not None:
        plan, denied = _authorized(broker, request, plan, follower=replica_id >= 0)
    isolation = body.isolation_level
    max_bytes = body.max_bytes
    if replica_id < 0 and broker.client_quotas.active:
        max_bytes = _within_quota(broker, request, max_bytes)
    held = None  # partitions whose records the leader's replication throttle withheld
    if replica_id >= 0:
        isolation = 0
        topics, total, had_error = broker.replica_manager.read_for_follower(
            replica_id,
            plan,
            max_bytes,
            file_slices=True,
            log_starts=log_starts,
            last_fetched=last_fetched,
        )
        if broker.replication_quotas.leader.limited:
            topics, withheld, held = broker.replication_quotas.leader.apply(
                broker.replica_manager.partitions, replica_id, topics
            )
            total -= withheld
    else:
        topics, total, had_error = broker.replica_manager.read(
            plan,
            max_bytes,
            isolation,
            file_slices=True,
            client_rack=_rack(body, version),
            follower_reads=version >= 11,
            last_fetched=last_fetched,
        )
    max_wait_ms = int(body.max_wait.total_seconds() * 1000)
    if total < body.min_bytes and max_wait_ms > 0 and not had_error and not unknown and not denied and plan:
        return _wait_and_read(
            broker,
            request,
            plan,
            ids,
            max_bytes,
            isolation,
            body.min_bytes,
            max_wait_ms,
            replica_id,
            held,
            last_fetched,
            context,
        )
    return _answer(broker, request, topics, ids, unknown, context, replica_id, denied)


def _answer(broker, request, topics, ids, unknown, context, replica_id: int, denied=None) -> RawResponse:
    """The response to the partitions read (``topics``), kept in the fetch session. A consumer
    over its ``consumer_byte_rate`` quota gets an empty answer with the throttle time instead,
    and the bytes it did not get do not count (KIP-219, as Kafka answers): a full fetch then
    opens no session, an incremental one keeps its own (``FetchSessionCache.throttled``)."""
    version = request.api_version
    if replica_id < 0 and broker.client_quotas.active:
        size = sum(len(entry[6]) for _, entries in topics for entry in entries)
        throttle_ms = _throttle(broker, request, size)
        if throttle_ms:
            broker.client_quotas.unrecord("consumer_byte_rate", request.principal, request.client_id, size)
            session_id = broker.fetch_sessions.throttled(context) if context is not None else 0
            response = fetch_response(version, [], throttle_ms=throttle_ms, session_id=session_id)
            return RawResponse(response, throttle_at=FETCH_THROTTLE_AT)
    if context is not None:
        topics = context.responses(topics)
    if denied:
        topics = topics + denied
    _count(broker, topics, replica_id >= 0)
    session_id = context.session_id if context is not None else 0
    response = _response(version, topics, ids, unknown, session_id)
    return RawResponse(
        response, has_files=True, sendfile=_zero_copy(broker, replica_id), throttle_at=FETCH_THROTTLE_AT
    )


def _zero_copy(broker, replica_id: int) -> bool:
    """Whether the answer's file slices go with sendfile (else read a chunk at a time)."""
    return broker.follower_zero_copy if replica_id >= 0 else broker.zero_copy


def _authorized(broker, request, plan, follower: bool = False):
    """The plan narrowed to the topics the principal may Read (a follower: ClusterAction on the
    cluster, as Kafka asks of replica fetches), and the answers for the rest."""
    verdicts: dict[str, bool] = {}
    kept, denied = [], {}
    cluster_ok = follower and broker.allowed(request, "ClusterAction", "Cluster", "kafka-cluster")
    for item in plan:
        name = item[0]
        ok = verdicts.get(name)
        if ok is None:
            ok = verdicts[name] = cluster_ok if follower else broker.allowed(request, "Read", "Topic", name)
        if ok:
            kept.append(item)
        else:
            denied.setdefault(name, []).append(
                (item[1], ErrorCode.topic_authorization_failed, -1, -1, -1, None, b"")
            )
    return kept, list(denied.items())


async def _wait_and_read(
    broker,
    request,
    plan,
    ids,
    max_bytes: int,
    isolation: int,
    min_bytes: int,
    max_wait_ms: int,
    replica_id=-1,
    held=None,
    last_fetched=None,
    context=None,
):
    """Park until ``min_bytes`` or ``max_wait_ms``, then read again. The bytes of partitions the
    replication throttle withholds (``held``) do not count: with only those, the wait is whole."""
    replicas = broker.replica_manager
    watched = [item for item in plan if (item[0], item[1]) not in held] if held else plan
    if watched:
        op = DelayedFetch(
            replicas, watched, max_bytes, isolation, min_bytes, max_wait_ms, replica_id, request.api_version >= 11
        )
        if not broker.fetch_purgatory.try_complete_else_watch(op, [(t, i) for t, i, *_ in watched]):
            await op
    else:
        await asyncio.sleep(max_wait_ms / 1000)
    if replica_id >= 0:
        topics, _, _ = replicas.read_for_follower(
            replica_id, plan, max_bytes, file_slices=True, last_fetched=last_fetched
        )
        if broker.replication_quotas.leader.limited:
            topics, _, _ = broker.replication_quotas.leader.apply(replicas.partitions, replica_id, topics)
    else:
        topics, _, _ = replicas.read(
            plan,
            max_bytes,
            isolation,
            file_slices=True,
            client_rack=_rack(request.body, request.api_version),
            follower_reads=request.api_version >= 11,
            last_fetched=last_fetched,
        )
    return _answer(broker, request, topics, ids, {}, context, replica_id)


def _within_quota(broker, request, max_bytes: int) -> int:
    """``max_bytes`` capped at what ``consumer_byte_rate`` lets one fetch carry when nothing else
    was counted in the window (Kafka's cap): a larger answer would be throttled, not sent, every
    time. The first batch still goes whole (KIP-74)."""
    most = broker.client_quotas.most_in_window("consumer_byte_rate", request.principal, request.client_id)
    return max_bytes if most is None else min(max_bytes, int(most))


def _throttle(broker, request, sent: int) -> int:
    """consumer_byte_rate: the throttle time of this response (0 within the quota)."""
    throttle_ms = broker.client_quotas.record("consumer_byte_rate", request.principal, request.client_id, sent)
    if throttle_ms:
        request.extra["throttle_ms"] = throttle_ms  # the connection is muted that long
    return throttle_ms


def _count(broker, topics, follower: bool = False) -> int:
    """Per topic, the request, its failed partitions and the record bytes sent (Kafka's
    TotalFetchRequestsPerSec, FailedFetchRequestsPerSec, and BytesOutPerSec, or for a
    follower ReplicationBytesOutPerSec); returns the bytes."""
    metrics = broker.replica_manager.topic_metrics.topics
    sent = 0
    for name, partitions in topics:
        counters = metrics.get(name)
        if counters is None:
            continue
        counters.fetch_requests += 1
        size = 0
        for entry in partitions:
            if entry[1]:
                counters.failed_fetch_requests += 1
            size += len(entry[6])
        if follower:
            counters.replication_bytes_out += size
        else:
            counters.bytes_out += size
        sent += size
    return sent
