"""What the schema check in front of kio costs per request (odradek/protocol/wellformed.py).

    python benchmarks/wellformed_bench.py [--loops 20000]

For requests shaped like those real clients send (a consumer's Fetch, a group member's
Heartbeat, an admin's Metadata, ...), times ``wellformed.check`` against kio's decode of
the same body, and the whole ``decode_request_body`` (check + kio) that the broker runs.
Produce is not in the table: it has its own parser (protocol/produce_request.py) and never
goes through the check.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from odradek.protocol import messages, wellformed


def partitions(n: int, **fields) -> list[dict]:
    return [{"partition_index": i, "partition": i, **fields} for i in range(n)]


def fetch(topics: int, per_topic: int) -> dict:
    return {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": f"orders-{t}",
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": 0,
                        "fetch_offset": 123456,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1048576,
                    }
                    for p in range(per_topic)
                ],
            }
            for t in range(topics)
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def metadata(topics: int) -> dict:
    return {
        "topics": [{"name": f"orders-{t}", "topic_id": None} for t in range(topics)],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }


SUBSCRIPTION = b"\x00\x01" + b"\x00\x00\x00\x01\x00\x06orders" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"

REQUESTS = [
    ("ApiVersions v3", 18, 3, {"client_software_name": "confluent-kafka-python", "client_software_version": "2.6.0"}),
    ("Metadata v12, 1 topic", 3, 12, metadata(1)),
    ("Metadata v12, 100 topics", 3, 12, metadata(100)),
    ("Fetch v12, 1 partition", 1, 12, fetch(1, 1)),
    ("Fetch v12, 10 x 10 partitions", 1, 12, fetch(10, 10)),
    (
        "ListOffsets v7, 1 partition",
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "orders", "partitions": partitions(1, timestamp=-1, current_leader_epoch=-1)}],
        },
    ),
    ("FindCoordinator v4", 10, 4, {"key_type": 0, "coordinator_keys": ["orders-consumers"]}),
    (
        "JoinGroup v9",
        11,
        9,
        {
            "group_id": "orders-consumers",
            "session_timeout": 45000,
            "rebalance_timeout": 300000,
            "member_id": "rdkafka-3f1c0d6e-8d55-4c2b-a1e1-6d6b5b1f7d0a",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}, {"name": "roundrobin", "metadata": SUBSCRIPTION}],
            "reason": None,
        },
    ),
    (
        "SyncGroup v5, leader of 3",
        14,
        5,
        {
            "group_id": "orders-consumers",
            "generation_id": 7,
            "member_id": "rdkafka-3f1c0d6e-8d55-4c2b-a1e1-6d6b5b1f7d0a",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": f"rdkafka-member-{i}", "assignment": SUBSCRIPTION} for i in range(3)],
        },
    ),
    (
        "Heartbeat v4",
        12,
        4,
        {
            "group_id": "orders-consumers",
            "generation_id": 7,
            "member_id": "rdkafka-3f1c0d6e-8d55-4c2b-a1e1-6d6b5b1f7d0a",
            "group_instance_id": None,
        },
    ),
    (
        "OffsetCommit v8, 10 partitions",
        8,
        8,
        {
            "group_id": "orders-consumers",
            "generation_id_or_member_epoch": 7,
            "member_id": "rdkafka-3f1c0d6e-8d55-4c2b-a1e1-6d6b5b1f7d0a",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "orders",
                    "partitions": partitions(
                        10, committed_offset=123456, committed_leader_epoch=-1, committed_metadata=""
                    ),
                }
            ],
        },
    ),
    (
        "OffsetFetch v8, 10 partitions",
        9,
        8,
        {
            "require_stable": True,
            "groups": [
                {"group_id": "orders-consumers", "topics": [{"name": "orders", "partition_indexes": list(range(10))}]}
            ],
        },
    ),
]


def per_call_us(fn, loops: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / loops / 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=20000, help="calls per timing (best of 5 timings)")
    args = parser.parse_args()

    table = Table(title="Schema check before kio, per request (best of 5)")
    for column in ("request", "bytes", "check µs", "kio decode µs", "check / kio", "decode_request_body µs"):
        table.add_column(column, justify="left" if column == "request" else "right")
    for name, api_key, version, values in REQUESTS:
        frame = messages.encode_request(api_key, version, 1, "rdkafka", messages.build_request(api_key, version, values))
        payload = memoryview(frame)[4:]
        header, pos = messages.parse_request_header(payload)
        cls = messages.request_class(api_key, version)
        view = payload.toreadonly()
        reader = messages._reader(cls)
        assert wellformed.check(cls, view, pos) == len(payload)
        check = per_call_us(lambda cls=cls, view=view, pos=pos: wellformed.check(cls, view, pos), args.loops)
        kio = per_call_us(lambda reader=reader, view=view, pos=pos: reader(view, pos), args.loops)
        whole = per_call_us(
            lambda header=header, payload=payload, pos=pos: messages.decode_request_body(header, payload, pos),
            args.loops,
        )
        table.add_row(name, str(len(payload)), f"{check:.2f}", f"{kio:.2f}", f"{check / kio:.2f}", f"{whole:.2f}")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
