"""DescribeLogDirs (key 35), v1-v4: this broker's log dirs and the partitions in each.

For each log dir of ``log.dirs`` (absolute path): the partitions it holds (the ones asked for,
or all when ``topics`` is null), each with its size in bytes, its offset lag (for a current
log, how far its end is behind the high watermark: 0 on the leader; for a future log being
filled by AlterReplicaLogDirs, ``is_future_key`` true, how far it is behind the current log)
and, v4+, the volume's total and usable bytes. An offline dir (it failed) answers
KAFKA_STORAGE_ERROR and lists nothing. v5's ``is_cordoned`` (KIP-1066) is not offered:
Odradek does not cordon log dirs.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


def _offset_lag(broker, tp, log, is_future: bool) -> int:
    if is_future:
        current = broker.log_manager.get_log(*tp)
        return max(current.log_end_offset - log.log_end_offset, 0) if current is not None else 0
    return max(log.high_watermark - log.log_end_offset, 0)


@api(35, 1, 4)
def handle_describe_log_dirs(broker, request):
    topics_asked = request.body.topics
    wanted = None
    if topics_asked is not None:
        wanted = {(t.topic, p) for t in topics_asked for p in t.partitions}
    results = []
    for info in broker.log_manager.describe_dirs():
        result = {
            "error_code": ErrorCode.kafka_storage_error if info.offline else 0,
            "log_dir": info.path,
            "topics": [],
            "total_bytes": info.total_bytes,
            "usable_bytes": info.usable_bytes,
        }
        by_topic: dict[str, list] = {}
        for tp, log, is_future in sorted(info.logs, key=lambda e: (e[0], e[2])):
            if wanted is not None and tp not in wanted:
                continue
            by_topic.setdefault(tp[0], []).append(
                {
                    "partition_index": tp[1],
                    "partition_size": log.size,
                    "offset_lag": _offset_lag(broker, tp, log, is_future),
                    "is_future_key": is_future,
                }
            )
        result["topics"] = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
        results.append(result)
    return messages.build_response(
        35, request.api_version, {"throttle_time": 0, "error_code": 0, "results": results}
    )
