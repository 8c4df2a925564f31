"""Helpers for the transaction tests: topics, hand-made requests, and read_committed reads
with three independent consumers (confluent-kafka, kafka-python, Odradek's own)."""

from __future__ import annotations

import socket
import struct
import time
from typing import NamedTuple

from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import odradek
from odradek.client.structs import TopicPartition
from odradek.protocol.messages import build_request, decode_response, encode_request

_SIZE = struct.Struct(">i")

# Small internal topics: creating 50 partitions each would dominate a fresh broker's start.
SMALL_INTERNAL_TOPICS = {
    "transaction.state.log.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
}



_ADMINS: dict[int, tuple[object, AdminClient]] = {}


def create_topic(broker, name: str, partitions: int = 1) -> None:
    for key, (other, _) in list(_ADMINS.items()):
        if other.proc is None or other.proc.poll() is not None:
            del _ADMINS[key]
    entry = _ADMINS.get(id(broker))
    if entry is None:
        entry = _ADMINS[id(broker)] = (broker, AdminClient({"bootstrap.servers": broker.bootstrap_servers}))
    client = entry[1]
    client.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


def ck_producer(broker, **config) -> CKProducer:
    conf = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return CKProducer(conf)


def plain_produce(broker, topic: str, values, partitions: int = 1) -> None:
    p = ck_producer(broker)
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % partitions)
    assert p.flush(30) == 0


# -- raw requests ---------------------------------------------------------------------------


class Raw:
    """One connection, one request at a time, kio entities in and out."""

    def __init__(self, broker):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=30)
        self.cid = 0

    def request(self, api_key: int, version: int, body: dict):
        self.cid += 1
        frame = encode_request(api_key, version, self.cid, "txn-tests", build_request(api_key, version, body))
        self.sock.sendall(frame)
        (size,) = _SIZE.unpack(self._read(4))
        cid, response = decode_response(api_key, version, self._read(size))
        assert cid == self.cid
        return response

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # the calls the tests make

    def find_txn_coordinator(self, tid: str):
        return self.request(10, 3, {"key": tid, "key_type": 1})

    def init_pid(
        self, tid: str | None, timeout_ms: int = 60000, version: int = 4, pid: int = -1, epoch: int = -1
    ):
        body = {
            "transactional_id": tid,
            "transaction_timeout": timeout_ms,
            "producer_id": pid,
            "producer_epoch": epoch,
        }
        return self.request(22, version, body)

    def add_partitions(self, tid, pid, epoch, topic, partitions, version: int = 3):
        body = {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}],
        }
        r = self.request(24, version, body)
        return {
            (t.name, p.partition_index): int(p.partition_error_code)
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def end_txn(self, tid, pid, epoch, committed: bool, version: int = 3) -> int:
        body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": committed}
        return int(self.request(26, version, body).error_code)

    def describe(self, *tids) -> dict:
        """DescribeTransactions v0, decoded here: kio refuses the -1 start time Kafka sends for
        a transaction that has not started."""
        self.cid += 1
        body = build_request(65, 0, {"transactional_ids": list(tids)})
        self.sock.sendall(encode_request(65, 0, self.cid, "txn-tests", body))
        (size,) = _SIZE.unpack(self._read(4))
        return decode_describe_transactions(self._read(size))

    def list_txns(self, states=(), pids=(), duration=-1, pattern=None):
        body = {
            "state_filters": list(states),
            "producer_id_filters": list(pids),
            "duration_filter": duration,
            "transactional_id_pattern": pattern,
        }
        return self.request(66, 2, body)

    def produce_txn(self, tid, pid, epoch, seq, topic, partition, values) -> int:
        """A transactional batch by hand; returns the partition's error code."""
        from odradek.protocol.batch_builder import build_batch

        batch = build_batch(
            [(None, v, (), None) for v in values],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )
        body = {
            "transactional_id": tid,
            "acks": -1,
            "timeout": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        r = self.request(0, 9, body)
        return int(r.responses[0].partition_responses[0].error_code)

    def add_offsets(self, tid, pid, epoch, group) -> int:
        body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": group}
        return int(self.request(25, 3, body).error_code)

    def txn_offset_commit(self, tid, pid, epoch, group, topic, offsets: dict) -> dict:
        body = {
            "transactional_id": tid,
            "group_id": group,
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
        }
        r = self.request(28, 3, body)
        return {p.partition_index: int(p.error_code) for p in r.topics[0].partitions}

    def list_offset(self, topic: str, partition: int, isolation: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}],
        }
        return int(self.request(2, 7, body).topics[0].partitions[0].offset)

    def offset_fetch(self, group: str, topic: str, partitions, require_stable: bool):
        body = {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": list(partitions)}],
            "require_stable": require_stable,
        }
        r = self.request(9, 7, body)
        if r.error_code or not r.topics:
            return {p: (-1, int(r.error_code)) for p in partitions}
        return {
            p.partition_index: (int(p.committed_offset), int(p.error_code)) for p in r.topics[0].partitions
        }


class Described(NamedTuple):
    error_code: int
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    topics: list


def decode_describe_transactions(frame: bytes) -> dict[str, Described]:
    from odradek.protocol.varint import decode_unsigned_varint

    pos = 4 + 1 + 4  # correlation id, header tags, throttle time

    def uvarint():
        nonlocal pos
        value, pos = decode_unsigned_varint(frame, pos)
        return value

    def fixed(fmt):
        nonlocal pos
        (value,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return value

    def string():
        nonlocal pos
        n = uvarint() - 1
        out = frame[pos : pos + n].decode()
        pos += n
        return out

    def skip_tags():
        for _ in range(uvarint()):
            uvarint()
            nonlocal pos
            pos += uvarint()

    out = {}
    for _ in range(uvarint() - 1):
        error, tid, state = fixed(">h"), string(), string()
        timeout, start, pid, epoch = fixed(">i"), fixed(">q"), fixed(">q"), fixed(">h")
        topics = []
        for _ in range(uvarint() - 1):
            topic = string()
            topics.append((topic, [fixed(">i") for _ in range(uvarint() - 1)]))
            skip_tags()
        skip_tags()
        out[tid] = Described(error, state, timeout, start, pid, epoch, topics)
    return out


# -- reading what a consumer sees -----------------------------------------------------------


def read_ck(broker, topic: str, partitions: int, isolation: str = "read_committed") -> list[bytes]:
    """Every value a confluent-kafka consumer sees, up to the end of each partition."""
    c = CKConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "txn-tests-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    out, eof, deadline = [], set(), time.monotonic() + 20
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise AssertionError(f"consumer error: {m.error()}")
            eof.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    assert len(eof) == partitions, "confluent-kafka did not reach the end of every partition"
    return out


def read_kafka_python(broker, topic: str, partitions: int, isolation: str = "read_committed") -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    tps = [KTP(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    ends = c.end_offsets(tps)  # read_committed: the last stable offsets
    out, deadline = [], time.monotonic() + 20
    try:
        while time.monotonic() < deadline and any(c.position(tp) < ends[tp] for tp in tps):
            for msgs in c.poll(200).values():
                out.extend(m.value for m in msgs)
    finally:
        c.close()
    return out


def read_ours(broker, topic: str, partitions: int, isolation: str = "read_committed") -> list[bytes]:
    c = odradek.Consumer(
        bootstrap_servers=broker.bootstrap_servers,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    ends = c.end_offsets(tps)
    out, deadline = [], time.monotonic() + 20
    try:
        while time.monotonic() < deadline and any(c.position(tp) < ends[tp] for tp in tps):
            out.extend(r.value for r in c.poll(0.2))
    finally:
        c.close()
    return out


READERS = {"confluent-kafka": read_ck, "kafka-python": read_kafka_python, "odradek": read_ours}
