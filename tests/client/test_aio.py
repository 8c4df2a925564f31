"""The asyncio API: the same engine, awaited."""

from __future__ import annotations

import asyncio
import time

import pytest
from client_support import GROUP_OPTIONS

import odradek
from odradek import aio
from odradek.client.client_errors import ClientClosedError, IllegalStateError, KafkaTimeoutError


def run(coro):
    return asyncio.run(coro)


def test_produce_and_consume_round_trip(bootstrap, make_topic, topic):
    make_topic(topic, 3)

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=5) as p:
            futs = [
                await p.send(topic, value=b"v%d" % i, key=b"k%d" % i, headers=[("h", b"x")])
                for i in range(300)
            ]
            md = await p.send_and_wait(topic, b"last", key=b"k-last", timestamp_ms=1234)
            assert md.timestamp == 1234
            await p.flush()
            metas = [await f for f in futs]
        assert len({(m.partition, m.offset) for m in metas}) == 300
        async with aio.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([aio.TopicPartition(topic, p) for p in range(3)])
            assert c.assignment() == {aio.TopicPartition(topic, p) for p in range(3)}
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 301 and time.monotonic() < deadline:
                got.extend(await c.poll(0.5))
            assert len(got) == 301
            assert {r.key for r in got} >= {b"k%d" % i for i in range(300)}
            assert all(r.headers == (("h", b"x"),) for r in got if r.value != b"last")
            assert sum(c.highwater(aio.TopicPartition(topic, p)) for p in range(3)) == 301

    run(main())


def test_group_member_with_async_listener_and_commit(bootstrap, make_topic, topic, group):
    make_topic(topic, 2)
    events = []

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap) as p:
            for i in range(20):
                await p.send(topic, b"%d" % i, partition=i % 2)

        class Listener:
            async def on_partitions_assigned(self, assigned):
                events.append(("assigned", assigned))

            async def on_partitions_revoked(self, revoked):
                events.append(("revoked", revoked))
                await c.commit()

        c = aio.Consumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, **GROUP_OPTIONS
        )
        async with c:
            c.subscribe([topic], listener=Listener())
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                got.extend(await c.poll(0.5))
            assert len(got) == 20
            await c.commit()
            committed = await c.committed({aio.TopicPartition(topic, 0), aio.TopicPartition(topic, 1)})
            assert {om.offset for om in committed.values()} == {10}
            task = c.commit_async()
            await task
        assert events[0] == ("assigned", {aio.TopicPartition(topic, 0), aio.TopicPartition(topic, 1)})
        assert events[-1][0] == "revoked"  # close revokes (and the listener committed)

    run(main())


def test_closed_clients_raise_and_unreachable_bootstrap_times_out(unused_port):
    async def main():
        p = aio.Producer(bootstrap_servers=f"127.0.0.1:{unused_port}", max_block_ms=800)
        await p.start()
        t = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="bootstrap"):
            await p.send("t", b"x")
        assert time.monotonic() - t < 4
        await p.close()
        with pytest.raises(ClientClosedError):
            await p.send("t", b"x")
        c = aio.Consumer(bootstrap_servers=f"127.0.0.1:{unused_port}")
        await c.close()
        with pytest.raises(ClientClosedError):
            await c.poll()
        a = aio.Admin(bootstrap_servers=f"127.0.0.1:{unused_port}", default_api_timeout_ms=500)
        with pytest.raises(KafkaTimeoutError):
            await a.list_topics()
        await a.close()
        with pytest.raises(ClientClosedError):
            await a.list_topics()

    run(main())


def test_async_iteration_and_group(bootstrap, make_topic, topic, group):
    make_topic(topic, 1)

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap) as p:
            for i in range(5):
                await p.send(topic, b"%d" % i)
        async with aio.Consumer(bootstrap_servers=bootstrap, group_id=group, **GROUP_OPTIONS) as c:
            c.subscribe([topic])
            got = []
            async for r in c:
                got.append(r.value)
                if len(got) == 5:
                    break
            assert got == [b"%d" % i for i in range(5)]

    run(main())


def test_blocking_result_on_an_asyncio_send_future_fails_at_once(bootstrap, make_topic, topic):
    """``(await p.send(...)).result(timeout=5)``, a port of the blocking example, would stall
    the loop that delivers the record and time out: it raises a clear error instead."""
    make_topic(topic, 1)

    async def main():
        async with aio.Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
            fut = await p.send(topic, b"x")
            assert not fut.done()
            with pytest.raises(IllegalStateError, match=r"await \(await producer.send"):
                fut.result(timeout=5)  # a TimeoutError after 5 s without the check
            with pytest.raises(IllegalStateError):
                fut.exception(timeout=5)
            with pytest.raises(TimeoutError, match="within 0s"):
                fut.exception(0)  # a zero timeout never blocks: the usual answer
            md = await fut
            assert (md.topic, md.offset) == (topic, 0)
            assert fut.result(timeout=5) == md  # a finished future answers anywhere

    run(main())


def test_blocking_producer_future_waits_inside_a_coroutine(bootstrap, make_topic, topic):
    """The blocking producer delivers on its own loop thread, so its futures may still be
    waited for from a coroutine running on another loop."""
    make_topic(topic, 1)

    async def main():
        with odradek.Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
            return p.send(topic, b"x").result(timeout=10)

    assert run(main()).offset == 0
