"""Helpers for the end-to-end broker tests: real clients and hand-made requests on 127.0.0.1.

Nothing here decides what the broker should do; it only drives clients and sockets and
collects what came back, so a test states its expectation in one place. Records for
hand-made Produce requests are built with kafka-python's RecordBatch builder, not with
Odradek's codec, so the broker's decoder is checked against an independent encoder.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.partitioner.default import murmur2
from kafka.record.default_records import DefaultRecordBatchBuilder
from support import wait_until

from odradek.protocol.messages import build_request, decode_response, encode_request

_SIZE = struct.Struct(">i")



CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_batch_codecs(broker, topic: str, partition: int = 0) -> set[int]:
    """The compression codec of every batch in the partition's first segment, read off disk."""
    data = (broker.data_dir / f"{topic}-{partition}" / ("0" * 20 + ".log")).read_bytes()
    codecs, pos = set(), 0
    while pos + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        codecs.add(attributes & 0x07)
        pos += 12 + length
    return codecs


def java_partition(key: bytes, num_partitions: int) -> int:
    """Java's (and librdkafka's murmur2_random) partition for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# -- confluent-kafka ------------------------------------------------------------------------


_ADMINS: dict[int, tuple[object, AdminClient]] = {}


def admin(broker) -> AdminClient:
    """One AdminClient per live broker, reused: a fresh librdkafka handle sometimes loses its
    first request to the hand-over from the bootstrap connection and retries 3 s later."""
    for key, (other, _) in list(_ADMINS.items()):
        if other.proc is None or other.proc.poll() is not None:
            del _ADMINS[key]  # that broker is gone for good (or for now); drop its client
    entry = _ADMINS.get(id(broker))
    if entry is None:
        entry = _ADMINS[id(broker)] = (broker, AdminClient({"bootstrap.servers": broker.bootstrap_servers}))
    return entry[1]


def create_topic(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    client = admin(broker)  # keep the handle alive until the future resolves
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
    )
    futures[name].result(timeout=15)


def producer(broker, **conf) -> Producer:
    settings = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "acks": "all"}
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(settings)


@dataclass
class Received:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list | None
    timestamp_type: int
    timestamp: int


class Deliveries:
    """A delivery callback that remembers every report, in the order they arrived."""

    def __init__(self):
        self.acked: list[Received] = []
        self.errors: list = []
        self._lock = threading.Lock()

    def __call__(self, err, msg):
        with self._lock:
            if err is not None:
                self.errors.append(err)
            else:
                ts_type, ts = msg.timestamp()
                self.acked.append(
                    Received(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        msg.headers(),
                        ts_type,
                        ts,
                    )
                )


def produce_and_flush(prod: Producer, topic: str, items, timeout: float = 30.0) -> Deliveries:
    """Produce ``items`` (dicts of Producer.produce keyword arguments) and wait for every report."""
    deliveries = Deliveries()
    for item in items:
        while True:
            try:
                prod.produce(topic, on_delivery=deliveries, **item)
                break
            except BufferError:
                prod.poll(0.05)
    remaining = prod.flush(timeout)
    assert remaining == 0, f"{remaining} messages still undelivered after {timeout}s"
    assert not deliveries.errors, deliveries.errors[:5]
    return deliveries


def consumer(broker, **conf) -> Consumer:
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "e2e-assign-only",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
    }
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(settings)


def consume(
    broker,
    topic: str,
    partitions,
    *,
    start: int = 0,
    timeout: float = 30.0,
    **conf,
) -> dict[int, list[Received]]:
    """Read each partition from ``start`` to its end (the broker's high watermark at EOF)."""
    cons = consumer(broker, **conf)
    try:
        return consume_with(cons, topic, partitions, start=start, timeout=timeout)
    finally:
        cons.close()


def consume_with(cons: Consumer, topic: str, partitions, *, start: int = 0, timeout: float = 30.0):
    partitions = list(partitions)
    cons.assign([TopicPartition(topic, p, start) for p in partitions])
    out: dict[int, list[Received]] = {p: [] for p in partitions}
    at_eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(at_eof) < len(partitions):
        if time.monotonic() > deadline:
            raise AssertionError(f"consume timed out; EOF on {sorted(at_eof)} of {partitions}")
        for msg in cons.consume(1000, 0.2):
            err = msg.error()
            if err is not None:
                if err.code() == -191:  # _PARTITION_EOF
                    at_eof.add(msg.partition())
                    continue
                raise KafkaException(err)
            at_eof.discard(msg.partition())
            ts_type, ts = msg.timestamp()
            out[msg.partition()].append(
                Received(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.headers(),
                    ts_type,
                    ts,
                )
            )
    return out


def log_start(broker, topic: str, partition: int = 0) -> int:
    """The partition's log start offset, as librdkafka's low watermark."""
    cons = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "e2e-watermarks"})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0]
    finally:
        cons.close()


def assert_serving(broker, topic: str, timeout: float = 15.0) -> None:
    """A fresh client can still produce to and consume from ``broker``."""
    value = f"still-serving-{time.monotonic_ns()}".encode()
    prod = producer(broker, linger_ms=0)
    deliveries = produce_and_flush(prod, topic, [{"value": value, "partition": 0}], timeout=timeout)
    offset = deliveries.acked[0].offset
    got = consume(broker, topic, [0], start=offset, timeout=timeout)
    assert [r.value for r in got[0]][:1] == [value]


# -- hand-made requests ---------------------------------------------------------------------


def record_batch(
    values,
    *,
    keys=None,
    compression: int = 0,
    timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """A v2 RecordBatch built by kafka-python (independent of the broker's own codec)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return builder.build()


def produce_body(topic: str, partition: int, records, acks: int = -1, timeout_ms: int = 10000) -> dict:
    return {
        "acks": acks,
        "timeout": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": bytes(records)}]}],
    }


def fetch_body(
    topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, max_bytes: int = 1 << 20
) -> dict:
    return {
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


class RawClient:
    """One blocking socket speaking Kafka frames; for requests no real client would send."""

    def __init__(self, broker, timeout: float = 10.0, source: str | None = None):
        """``source``: the local address to connect from (e.g. 127.0.0.2, another loopback IP)."""
        self.broker = broker
        self.sock = socket.create_connection(
            (broker.host, broker.port), timeout=timeout, source_address=(source, 0) if source else None
        )
        self._address = self.local_address
        self._correlation = 0

    @property
    def local_address(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def broker_log_about_me(self) -> str:
        """The broker log lines about this connection (and any traceback just before them)."""
        lines = self.broker.log_text().splitlines()
        hits = [i for i, line in enumerate(lines) if self._address in line]
        if not hits:
            return "(nothing about this connection)"
        start = max(0, hits[0] - 1)
        return "\n".join(lines[start : hits[-1] + 1][-40:])

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: dict, client_id: str | None = "e2e-raw") -> int:
        self._correlation += 1
        entity = build_request(api_key, version, body)
        self.sock.sendall(encode_request(api_key, version, self._correlation, client_id, entity))
        return self._correlation

    def read_frame(self) -> bytes | None:
        """The next response frame without its size prefix, or None if the broker closed."""
        head = self._read_exactly(4)
        if head is None:
            return None
        (size,) = _SIZE.unpack(head)
        payload = self._read_exactly(size)
        if payload is None:
            raise AssertionError("connection closed in the middle of a response frame")
        return payload

    def receive(self, api_key: int, version: int):
        payload = self.read_frame()
        assert payload is not None, (
            "the broker closed the connection instead of answering; its log says:\n"
            + self.broker_log_about_me()
        )
        return decode_response(api_key, version, payload)

    def request(self, api_key: int, version: int, body: dict):
        correlation = self.send(api_key, version, body)
        got, entity = self.receive(api_key, version)
        assert got == correlation
        return entity

    def closed_by_broker(self, timeout: float = 10.0) -> bool:
        """True if the broker closes the connection within ``timeout`` without sending anything."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        assert data == b"", f"expected the connection to be closed, got data {data!r}"
        return True

    def _read_exactly(self, n: int) -> bytes | None:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(n)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def rss_kib(broker) -> int:
    """The broker process's resident memory in KiB, from /proc."""
    with open(f"/proc/{broker.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/PID/status")


def log_mentions(broker, needle: str, timeout: float = 5.0) -> str:
    """Wait until the broker's log has a line containing ``needle``; return that line."""

    def find():
        for line in broker.log_text().splitlines():
            if needle in line:
                return line
        return None

    return wait_until(find, timeout, message=f"a broker log line containing {needle!r}")


def decode_batches(data) -> list:
    """kafka-python's reading of a run of record batches (a .log file or a fetch response)."""
    from kafka.record import MemoryRecords

    records = MemoryRecords(bytes(data or b""))
    batches = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return batches
        batches.append(batch)


def fetch_records(raw: RawClient, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
    """One Fetch v12 at ``offset``: (error code, [(offset, key, value, timestamp), ...]) with every
    record of the returned batches, as a client sees them before dropping those below ``offset``."""
    response = raw.request(1, 12, fetch_body(topic, partition, offset, max_bytes=max_bytes))
    (part,) = response.responses[0].partitions
    records = []
    for batch in decode_batches(part.records):
        assert batch.validate_crc(), f"fetched batch at {batch.base_offset} fails its CRC"
        records.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
    return part.error_code, records
