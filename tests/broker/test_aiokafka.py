"""aiokafka against the broker: every codec with the idempotent producer, keys and headers,
LogAppendTime, offsets by time and watermarks, consumed with manual assignment."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from broker_e2e import CODEC_IDS, create_topic, java_partition, stored_batch_codecs


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def read_all(broker, topic: str, partitions, expected: int, timeout: float = 30.0) -> dict[int, list]:
    cons = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await cons.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        cons.assign(tps)
        await cons.seek_to_beginning(*tps)
        out: dict[int, list] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while sum(len(v) for v in out.values()) < expected and time.monotonic() < deadline:
            for tp, records in (await cons.getmany(timeout_ms=200)).items():
                out[tp.partition].extend(records)
        assert sum(len(v) for v in out.values()) == expected
        return out
    finally:
        await cons.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_with_each_codec(broker, topic_name, codec):
    partitions = 3
    create_topic(broker, topic_name, partitions)
    values = [(f"aio-{i}-" * (1 + i % 9)).encode() for i in range(300)]

    async def scenario():
        prod = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            enable_idempotence=True,
            compression_type=codec,
            linger_ms=20,
        )
        await prod.start()
        try:
            futures = [
                await prod.send(
                    topic_name, value=v, key=f"k{i % 31}".encode(), headers=[("n", str(i).encode())]
                )
                for i, v in enumerate(values)
            ]
            metas = await asyncio.gather(*futures)
        finally:
            await prod.stop()
        return metas, await read_all(broker, topic_name, range(partitions), len(values))

    metas, got = run(scenario())
    for i, meta in enumerate(metas):
        assert meta.partition == java_partition(f"k{i % 31}".encode(), partitions)
    by_value = {r.value: r for rs in got.values() for r in rs}
    assert sorted(by_value) == sorted(values)
    assert sum(len(rs) for rs in got.values()) == len(values)  # no duplicates
    for records in got.values():
        assert [r.offset for r in records] == list(range(len(records)))
        ns = [int(dict(r.headers)["n"]) for r in records]
        assert ns == sorted(ns)
        assert all(values[n] == r.value for n, r in zip(ns, records, strict=True))
    for p in range(partitions):
        expected = {CODEC_IDS[codec or "none"]}
        assert stored_batch_codecs(broker, topic_name, p) == expected


def test_log_append_time_and_offsets_for_times(broker, topic_name):
    create_topic(broker, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})

    async def scenario():
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await prod.start()
        before = int(time.time() * 1000)
        try:
            metas = [
                await prod.send_and_wait(topic_name, str(i).encode(), partition=0, timestamp_ms=5)
                for i in range(5)
            ]
        finally:
            await prod.stop()
        after = int(time.time() * 1000)
        (records,) = (await read_all(broker, topic_name, [0], 5)).values()

        cons = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        await cons.start()
        try:
            tp = TopicPartition(topic_name, 0)
            ends = (await cons.beginning_offsets([tp]), await cons.end_offsets([tp]))
            found = await cons.offsets_for_times({tp: before - 1})
            none_after = await cons.offsets_for_times({tp: after + 60_000})
        finally:
            await cons.stop()
        return before, after, metas, records, ends, found[tp], none_after[tp]

    before, after, metas, records, ends, found, none_after = run(scenario())
    for meta in metas:
        assert meta.timestamp_type == 1 and before - 1000 <= meta.timestamp <= after + 1000
    for r in records:
        assert r.timestamp_type == 1 and before - 1000 <= r.timestamp <= after + 1000
    assert ends == ({TopicPartition(topic_name, 0): 0}, {TopicPartition(topic_name, 0): 5})
    assert found is not None and found.offset == 0
    assert none_after is None
