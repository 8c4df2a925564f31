"""``Producer.send_many``: many records in one call, each with its own outcome.

Records sent through it come back byte for byte at the offsets their futures give; a record the
producer refuses (too large, a partition out of range, a topic that never gets metadata) fails
its own future and leaves the others alone; a batch the broker rejects fails every record in it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek import aio
from odradek.client.client_errors import KafkaTimeoutError, RecordTooLargeError

BAD_TOPIC = "no such topic!"  # an invalid name: the broker never has it, so its metadata never comes


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    async def main():
        async with aio.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([aio.TopicPartition(topic, p) for p in range(partitions)])
            got: list = []
            deadline = time.monotonic() + 20
            while len(got) < expected and time.monotonic() < deadline:
                got.extend(await c.poll(0.5))
            return got

    return asyncio.run(main())


async def outcomes_of(futures: list) -> list:
    """Each future's RecordMetadata, or the exception it failed with."""
    outcomes = []
    for fut in futures:
        try:
            outcomes.append(await fut)
        except Exception as exc:  # noqa: BLE001 - each record's outcome is the test's subject
            outcomes.append(exc)
    return outcomes


def test_send_many_round_trip_with_refused_records(bootstrap, make_topic, topic):
    make_topic(topic, 2)
    records = [(topic, b"value-%d" % i * (i % 5 + 1), b"key-%d" % i,
                [("n", b"%d" % i)] if i % 3 == 0 else None, i % 2 if i % 7 == 0 else None, 1_700_000_000_000 + i)
               for i in range(1200)]
    refused = {
        100: ((topic, b"x" * 300_000), RecordTooLargeError),
        500: ((topic, b"v", None, None, 9), ValueError),
        900: ((BAD_TOPIC, b"v"), KafkaTimeoutError),
    }
    for i, (record, _) in refused.items():
        records[i] = record

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=4096,
                                max_request_size=200_000, max_block_ms=1500) as p:
            futures = await p.send_many(records)
            assert len(futures) == len(records)
            return await outcomes_of(futures)

    outcomes = asyncio.run(main())
    for i, (_, error) in refused.items():
        assert isinstance(outcomes[i], error), (i, outcomes[i])
    sent = {i: md for i, md in enumerate(outcomes) if i not in refused}
    assert all(md.topic == topic for md in sent.values())
    for i in range(0, 1200, 7):
        if i not in refused:
            assert sent[i].partition == i % 2
    for partition in (0, 1):  # offsets in a partition: 0, 1, 2, … in the order sent
        offsets = [md.offset for i, md in sorted(sent.items()) if md.partition == partition]
        assert offsets == list(range(len(offsets)))

    got = consume_all(bootstrap, topic, 2, len(sent))
    by_place = {(r.partition, r.offset): r for r in got}
    assert len(by_place) == len(sent) == len(got)
    for i, md in sent.items():
        r = by_place[md.partition, md.offset]
        _, value, key, headers, _, timestamp = records[i]
        assert (r.key, r.value, r.timestamp) == (key, value, timestamp)
        assert r.headers == tuple(headers or ())


def test_send_many_one_future_per_batch(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    records = [(topic, b"%05d" % i + b"." * 95) for i in range(2000)]

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=16384) as p:
            futures = await p.send_many(records, per_record=False)
            return [await f for f in futures]

    metadata = asyncio.run(main())
    assert 1 < len(metadata) < len(records) / 50  # ~130 records of 100 bytes fill a 16 KiB batch
    assert [md.offset for md in metadata] == sorted(md.offset for md in metadata)
    got = consume_all(bootstrap, topic, 1, len(records))
    assert [r.value for r in got] == [value for _, value in records]
    assert [r.offset for r in got] == list(range(len(records)))


def test_a_batch_the_broker_rejects_fails_each_record(kafka, bootstrap, make_topic, topic):
    if kafka.name != "odradek":
        pytest.skip(f"{kafka.name} does not enforce a topic's max.message.bytes; covered against Odradek")
    make_topic(topic, 1, max_message_bytes=1000)

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap, linger_ms=5, retries=0) as p:
            futures = await p.send_many([(topic, b"x" * 2000, b"%d" % i) for i in range(5)])
            outcomes = await outcomes_of(futures)
            ok = await p.send_many([(topic, b"small")])  # the producer goes on after the failed batch
            return outcomes, await ok[0]

    outcomes, small = asyncio.run(main())
    assert all(isinstance(o, RecordTooLargeError) for o in outcomes), outcomes
    assert small.offset == 0
    assert [r.value for r in consume_all(bootstrap, topic, 1, 1)] == [b"small"]
