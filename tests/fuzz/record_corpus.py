"""Record real clients' requests and the broker's responses as fuzz seeds.

    python tests/fuzz/record_corpus.py [--out tests/fuzz/corpus]

Starts a broker whose advertised listener is a recording proxy, runs confluent-kafka
(librdkafka), kafka-python and aiokafka through it (admin calls, producers with every
compression codec, a transactional producer, consumer groups that commit), and writes:

- ``requests/<client>-<api>-v<version>-<n>``: request frames without their size prefix,
  the input of the ``request`` target and of benchmarks/fuzz_broker.py;
- ``responses/<api>-v<version>-<n>``: a 4-byte prefix (api key, version as int16) and
  the response frame without its size prefix, the input of the ``response`` target;
- ``batches/<client>-<n>``: the record batches inside the Produce requests.

At most a few frames per (client, API, version), so the corpus stays small; run it again
after a client upgrade and commit what changes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import struct
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

from odradek.protocol import messages, produce_request
from odradek.protocol.batch import read_header
from odradek.testing.process import BrokerProcess, free_port

PER_KIND = 3  # frames kept per (client, API, version, and for Produce the codec)


class RecordingProxy:
    """Forwards bytes both ways between clients and the broker, keeping whole frames."""

    def __init__(self, broker_port: int):
        self.broker_port = broker_port
        self.client = "unknown"  # which client library is talking now
        self.requests: dict[tuple, list[bytes]] = defaultdict(list)
        self.responses: dict[tuple, list[bytes]] = defaultdict(list)
        self.loop = asyncio.new_event_loop()
        self.port = free_port()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        self.loop.run_forever()
        server.close()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", self.broker_port)
        except OSError:
            client_w.close()
            return
        in_flight: dict[int, tuple[int, int]] = {}
        await asyncio.gather(
            self._pump(client_r, broker_w, lambda f: self._on_request(f, in_flight)),
            self._pump(broker_r, client_w, lambda f: self._on_response(f, in_flight)),
            return_exceptions=True,
        )

    @staticmethod
    async def _pump(reader, writer, on_frame) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                frame = await reader.readexactly(struct.unpack(">i", head)[0])
                on_frame(frame)
                writer.write(head + frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _on_request(self, frame: bytes, in_flight: dict) -> None:
        api_key, version, correlation = struct.unpack_from(">hhi", frame)
        in_flight[correlation] = (api_key, version)
        codec = codec_of(frame) if api_key == messages.PRODUCE_KEY else None
        kept = self.requests[(self.client, api_key, version, codec)]
        if len(kept) < PER_KIND and frame not in kept:
            kept.append(frame)

    def _on_response(self, frame: bytes, in_flight: dict) -> None:
        (correlation,) = struct.unpack_from(">i", frame)
        api_key, version = in_flight.pop(correlation, (None, None))
        if api_key is None:
            return
        kept = self.responses[(api_key, version)]
        if len(kept) < PER_KIND:
            kept.append(struct.pack(">hh", api_key, version) + frame)


def run_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(15)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])[
        ConfigResource(ConfigResource.Type.TOPIC, topic)
    ].result(15)
    for f in admin.create_partitions([NewPartitions(topic, 3)]).values():
        f.result(15)
    admin.list_consumer_groups().result(15)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
        for i in range(20):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{codec}-{i}".encode() * 3, headers={"h": b"v"})
        producer.flush(15)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"rec-{topic}"})
    txn.init_transactions(15)
    txn.begin_transaction()
    txn.produce(topic, b"in-a-transaction", partition=0)
    txn.commit_transaction(15)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rec-confluent-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 20
    while got < 50 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(topic, 0)], 10)
    consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    consumer.offsets_for_times([TopicPartition(topic, 0, int(time.time() * 1000) - 60_000)], 10)
    consumer.close()
    for f in admin.delete_topics([f"{topic}-absent"]).values():
        try:
            f.result(15)
        except Exception:
            pass


def run_kafka_python(bootstrap: str, topic: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.list_topics()
    admin.describe_cluster()
    for codec in (None, "gzip"):  # its lz4, snappy and zstd need packages the tests do not install
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
        for i in range(10):
            producer.send(topic, key=b"kp", value=f"kafka-python-{codec}-{i}".encode())
        producer.flush(15)
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"rec-kp-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    for _ in zip(range(30), consumer, strict=False):
        pass
    consumer.commit()
    consumer.close()
    group = f"rec-kp-{topic}"
    for call, call_args in [
        (admin.describe_groups, ([group],)),
        (admin.list_group_offsets, (group,)),
        (admin.list_groups, ()),
        (admin.describe_configs, ()),
        (admin.list_transactions, ()),
        (admin.describe_topics, ([topic],)),
    ]:
        try:  # only the requests matter here, not whether kafka-python likes the answers
            call(*call_args)
        except Exception:
            pass
    admin.close()


async def run_aiokafka(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    for codec in (None, "gzip"):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, enable_idempotence=True)
        await producer.start()
        for i in range(10):
            await producer.send(topic, key=b"aio", value=f"aiokafka-{codec}-{i}".encode())
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"rec-aio-{topic}", auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        await asyncio.wait_for(consumer.getmany(timeout_ms=3000), 20)
        await consumer.commit()
    finally:
        await consumer.stop()


def codec_of(frame: bytes) -> int | None:
    """The compression codec of a Produce request's first batch."""
    batches = batches_of(frame)
    return read_header(batches[0], 0).compression if batches else None


def batches_of(frame: bytes) -> list[bytes]:
    header, pos = messages.parse_request_header(frame)
    body = produce_request.decode_produce_request(frame, pos, header.api_version)
    return [bytes(p.records) for t in body.topic_data for p in t.partition_data if p.records]


def write(out: Path, proxy: RecordingProxy) -> None:
    for sub in ("requests", "responses", "batches"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for (client, api_key, version, codec), frames in sorted(proxy.requests.items(), key=str):
        kind = f"{client}-{messages.api_name(api_key)}-v{version}" + ("" if codec is None else f"-codec{codec}")
        for n, frame in enumerate(frames):
            (out / "requests" / f"{kind}-{n}").write_bytes(frame)
            if api_key == messages.PRODUCE_KEY:
                for batch in batches_of(frame):
                    digest = hashlib.sha1(batch).hexdigest()[:10]
                    (out / "batches" / f"{client}-{digest}").write_bytes(batch)
    for (api_key, version), frames in sorted(proxy.responses.items()):
        for n, frame in enumerate(frames):
            (out / "responses" / f"{messages.api_name(api_key)}-v{version}-{n}").write_bytes(frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "corpus")
    args = parser.parse_args()
    broker_port = free_port()
    proxy = RecordingProxy(broker_port)
    proxy.start()
    broker = BrokerProcess(
        port=broker_port,
        overrides={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    with broker:
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = f"corpus-{uuid.uuid4().hex[:6]}"
        proxy.client = "confluent"
        run_confluent(bootstrap, topic)
        proxy.client = "kafka-python"
        run_kafka_python(bootstrap, topic)
        proxy.client = "aiokafka"
        asyncio.run(run_aiokafka(bootstrap, topic))
    proxy.stop()
    write(args.out, proxy)
    kinds = {(a, v) for _, a, v, _ in proxy.requests}
    print(f"{sum(map(len, proxy.requests.values()))} requests of {len(kinds)} API versions, "
          f"{sum(map(len, proxy.responses.values()))} responses, written to {args.out}")


if __name__ == "__main__":
    main()
