"""Incremental fetch sessions (KIP-227) on a real broker: the raw protocol, kafka-python's
consumer (which opens sessions), librdkafka's (which never does: it always sends session id
0 and epoch -1), and the cache's eviction rules."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
import pytest
from kafka import KafkaConsumer, TopicPartition

from odradek.broker.fetch_session import FetchSessionCache
from odradek.net.connection import Connection
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode
from odradek.testing import EmbeddedBroker

TOPIC = "sessions"


@pytest.fixture
def single():
    with EmbeddedBroker(overrides={"max.incremental.fetch.session.cache.slots": 2}) as broker:
        broker.create_topic(TOPIC, 3)
        yield broker


def _produce(broker, partition: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, b"r%d" % i, partition=partition)
    assert producer.flush(10) == 0


class RawFetcher:
    """Fetch v12 requests over one real connection, naming session id and epoch."""

    def __init__(self, broker):
        self.broker = broker
        self.loop = asyncio.new_event_loop()

        async def connect():
            conn = Connection("127.0.0.1", broker.port, -1, "session-test", 10000)
            await conn.connect(5)
            return conn

        self.conn = self.loop.run_until_complete(connect())

    def close(self):
        self.conn.close()
        self.loop.close()

    def fetch(self, session_id: int, epoch: int, offsets: dict[int, int], forgotten=()):
        code, session, partitions, _ = self.fetch_throttled(session_id, epoch, offsets, forgotten)
        return code, session, partitions

    def fetch_throttled(self, session_id: int, epoch: int, offsets: dict[int, int], forgotten=()):
        """Like ``fetch``; also the answer's throttle time in ms."""
        request = messages.build_request(
            1,
            12,
            {
                "max_wait": 0,
                "min_bytes": 1,
                "session_id": session_id,
                "session_epoch": epoch,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20} for p, o in offsets.items()
                        ],
                    }
                ]
                if offsets
                else [],
                "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forgotten)}] if forgotten else [],
            },
        )
        response = self.loop.run_until_complete(self.conn.send(1, request, version=12))
        partitions = {
            p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses
            for p in t.partitions
        }
        throttle_ms = int(response.throttle_time.total_seconds() * 1000)
        return response.error_code, response.session_id, partitions, throttle_ms


@pytest.fixture
def raw(single):
    fetcher = RawFetcher(single)
    yield fetcher
    fetcher.close()


def test_an_incremental_fetch_lists_and_gets_only_what_changed(single, raw):
    _produce(single, 0, 5)
    code, session, parts = raw.fetch(0, 0, {0: 0, 1: 0, 2: 0})  # full: opens a session
    assert code == 0 and session != 0
    assert set(parts) == {0, 1, 2} and parts[0][1:] == (5, parts[0][2]) and parts[0][2] > 0
    # nothing new: nothing in the answer (the partitions stay in the session)
    assert raw.fetch(session, 1, {0: 5}) == (0, session, {})
    # new records on partition 1 come without asking for it again
    _produce(single, 1, 3)
    code, same, parts = raw.fetch(session, 2, {})
    assert (code, same, list(parts)) == (0, session, [1]) and parts[1][1] == 3 and parts[1][2] > 0
    # partition 1 moves on; partition 2 is forgotten, and its records no longer come
    assert raw.fetch(session, 3, {1: 3}, forgotten=[2]) == (0, session, {})
    _produce(single, 2, 2)
    _produce(single, 0, 1)
    code, _, parts = raw.fetch(session, 4, {})
    assert list(parts) == [0] and parts[0][1] == 6
    assert single.call(lambda b: sorted(b.fetch_sessions.sessions[session].partitions)) == [(TOPIC, 0), (TOPIC, 1)]
    import urllib.request

    text = urllib.request.urlopen(f"{single.http_url}/metrics", timeout=10).read().decode()
    assert "kafka_server_fetchsessioncache_numincrementalfetchsessions 1.0" in text
    assert "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached 2.0" in text


def test_wrong_session_ids_and_epochs_get_kafkas_errors(single, raw):
    _, session, _ = raw.fetch(0, 0, {0: 0})
    assert raw.fetch(session, 7, {})[:2] == (ErrorCode.invalid_fetch_session_epoch, 0)
    assert raw.fetch(session + 1, 1, {})[:2] == (ErrorCode.fetch_session_id_not_found, 0)
    assert raw.fetch(session, 1, {})[:2] == (0, session)  # the bad ones changed nothing
    # epoch -1 closes the session (a full, sessionless fetch)
    code, none, parts = raw.fetch(session, -1, {0: 0})
    assert (code, none, list(parts)) == (0, 0, [0])
    assert raw.fetch(session, 2, {})[:2] == (ErrorCode.fetch_session_id_not_found, 0)
    # session id 0, epoch -1: no session, every partition answered
    assert raw.fetch(0, -1, {0: 0, 1: 0})[1:] == (0, {0: (0, 0, 0), 1: (0, 0, 0)})


def test_a_final_fetch_of_no_partitions_frees_the_sessions_slot(single, raw):
    """What a retiring replica fetcher sends (session id, epoch -1, nothing listed): the
    session goes at once and its slot takes a new session without an eviction."""
    first = raw.fetch(0, 0, {0: 0})[1]
    second = raw.fetch(0, 0, {0: 0})[1]
    assert raw.fetch(first, -1, {}) == (0, 0, {})
    assert single.call(lambda b: sorted(b.fetch_sessions.sessions)) == [second]
    third = raw.fetch(0, 0, {1: 0})[1]  # the cache (2 slots) has room again
    assert third not in (0, second)
    assert single.call(lambda b: b.fetch_sessions.evictions) == 0


def test_a_full_cache_answers_without_a_session(single, raw):
    """Two slots: a third consumer session of the same size evicts nobody (none is stale,
    none smaller) and is answered sessionless; a larger one evicts the smallest."""
    first = raw.fetch(0, 0, {0: 0})[1]
    second = raw.fetch(0, 0, {0: 0})[1]
    assert first and second and first != second
    code, third, parts = raw.fetch(0, 0, {1: 0})
    assert (code, third, list(parts)) == (0, 0, [1])
    bigger = raw.fetch(0, 0, {0: 0, 1: 0})[1]
    assert bigger != 0
    assert single.call(lambda b: sorted(b.fetch_sessions.sessions)) == sorted([second, bigger])
    assert raw.fetch(first, 1, {})[0] == ErrorCode.fetch_session_id_not_found
    assert single.call(lambda b: b.fetch_sessions.evictions) == 1


def test_kafka_python_consumes_through_an_incremental_session(single):
    """kafka-python opens a session (enable_incremental_fetch_sessions defaults to True) and
    then sends incremental fetches; every record arrives exactly once."""
    for p in range(3):
        _produce(single, p, 20)
    consumer = KafkaConsumer(bootstrap_servers=single.bootstrap_servers, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {p: [] for p in range(3)}

        def poll_until(total):
            deadline = time.monotonic() + 30
            while sum(map(len, got.values())) < total and time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=200).items():
                    got[tp.partition].extend(r.value for r in records)

        poll_until(60)
        _produce(single, 1, 10)  # only partition 1 changes from here
        poll_until(70)
        assert got == {0: [b"r%d" % i for i in range(20)], 1: [b"r%d" % i for i in range(20)] + [b"r%d" % i for i in range(10)], 2: [b"r%d" % i for i in range(20)]}
        sessions = single.call(lambda b: [(len(s.partitions), s.epoch) for s in b.fetch_sessions.sessions.values()])
        # one session of the 3 partitions, and incremental fetches (epoch 1, 2, ...) accepted in it
        assert len(sessions) == 1 and sessions[0][0] == 3 and sessions[0][1] >= 2, sessions
    finally:
        consumer.close()


def test_librdkafka_never_opens_a_session_and_still_reads_everything(single):
    """librdkafka sends session id 0 and epoch -1 in every Fetch (rdkafka_fetcher.c): the
    broker keeps no session for it and answers every partition each time."""
    for p in range(3):
        _produce(single, p, 10)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": single.bootstrap_servers, "group.id": "rd", "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            got += [m for m in consumer.consume(100, 0.2) if m.error() is None]
        assert sorted((m.partition(), m.offset()) for m in got) == [(p, o) for p in range(3) for o in range(10)]
    finally:
        consumer.close()
    assert single.call(lambda b: len(b.fetch_sessions.sessions)) == 0


def test_the_cache_evicts_stale_sessions_first_and_a_follower_beats_a_consumer():
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)

    def open_session(size, privileged, now_ms):
        plan = [("t", i, 0, 100, -1) for i in range(size)]
        return cache.context(0, 0, plan, None, None, [], None, privileged, now_ms).session_id

    follower = open_session(1, True, 0)
    consumer = open_session(5, False, 10)
    second_follower = open_session(9, True, 20)
    # the new follower's session took the consumer's slot (followers are privileged)
    assert consumer not in cache.sessions
    assert set(cache.sessions) == {follower, second_follower} and cache.evictions == 1
    # a consumer cannot evict followers' sessions until they go stale
    assert open_session(50, False, 30) == 0
    assert open_session(50, False, 1030) != 0 and follower not in cache.sessions


def test_a_throttled_fetch_is_answered_empty_and_keeps_only_an_incremental_session():
    """consumer_byte_rate exceeded (KIP-219 with KIP-227, as Kafka answers): no records, the
    throttle time, the bytes not sent not counted; a full fetch gets no session, an incremental
    one keeps its session and gets what it missed once the quota allows."""
    overrides = {"quota.window.num": 2, "quota.window.size.seconds": 1}  # throttles of at most 2 s
    with EmbeddedBroker(overrides=overrides) as broker:
        broker.create_topic(TOPIC, 3)

        def quota(rate: float) -> None:
            broker.call(lambda b: b.client_quotas.alter({"user": None, "client-id": "session-test"}, {"consumer_byte_rate": rate}))

        def fetch(*args):  # a connection each: a throttled one reads nothing more for a while
            fetcher = RawFetcher(broker)
            try:
                return fetcher.fetch_throttled(*args)
            finally:
                fetcher.close()

        quota(10_000.0)
        code, session, parts, throttle = fetch(0, 0, {0: 0, 1: 0})  # nothing to read yet: a session
        assert (code, parts, throttle) == (0, {0: (0, 0, 0), 1: (0, 0, 0)}, 0) and session != 0
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        producer.produce(TOPIC, b"v" * 50_000, partition=0)  # one batch: it goes whole, past any max_bytes
        assert producer.flush(10) == 0
        # 50 KB against 10 KB/s: an empty answer in the same session
        code, same, parts, throttle = fetch(session, 1, {})
        assert (code, same, parts) == (0, session, {}) and throttle > 0
        # the 50 KB were not counted: a small read within the quota is not throttled
        _produce(broker, 1, 1)
        assert fetch(0, -1, {1: 0})[3] == 0
        # a throttled full fetch opens no session
        code, none, parts, throttle = fetch(0, 0, {0: 0})
        assert (code, none, parts) == (0, 0, {}) and throttle > 0
        assert broker.call(lambda b: sorted(b.fetch_sessions.sessions)) == [session]
        # with room in the quota the session goes on at the next epoch and answers what was missed
        quota(10_000_000.0)
        code, same, parts, throttle = fetch(session, 2, {})
        assert (code, same, throttle) == (0, session, 0) and parts[0][1] == 1 and parts[0][2] > 50_000


def test_a_consumers_max_bytes_is_capped_at_what_its_quota_allows_in_a_window():
    """Kafka's cap: a fetch larger than the quota allows in a window would be throttled, and
    answered empty, every time; capped, it gets what the quota allows and is not throttled."""
    overrides = {"quota.window.num": 2, "quota.window.size.seconds": 1}
    with EmbeddedBroker(overrides=overrides) as broker:
        broker.create_topic(TOPIC, 1)
        broker.call(lambda b: b.client_quotas.alter({"user": None, "client-id": "session-test"}, {"consumer_byte_rate": 10_000.0}))
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for _ in range(40):
            producer.produce(TOPIC, b"v" * 1000, partition=0)
            producer.flush(10)  # a batch each
        fetcher = RawFetcher(broker)
        try:
            code, _, parts, throttle = fetcher.fetch_throttled(0, -1, {0: 0})
        finally:
            fetcher.close()
        assert (code, throttle) == (0, 0)
        assert 5_000 < parts[0][2] <= 10_000  # some batches, within one window's quota


def test_a_throttled_consumer_still_reads_every_record():
    """librdkafka and kafka-python under a consumer_byte_rate quota: throttled answers are empty,
    capped fetches fit the quota, and every record arrives exactly once, in order."""
    overrides = {"quota.window.num": 2, "quota.window.size.seconds": 1}
    with EmbeddedBroker(overrides=overrides) as broker:
        broker.create_topic(TOPIC, 1)
        broker.call(lambda b: b.client_quotas.alter({"user": "<default>", "client-id": None}, {"consumer_byte_rate": 40_000.0}))
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        values = [b"%05d" % i + b"x" * 995 for i in range(60)]
        for v in values:  # a batch each: one larger than the quota allows in a window never goes
            producer.produce(TOPIC, v, partition=0)
            assert producer.flush(10) == 0
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "q", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        consumer.close()
        assert got == values
        kconsumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=60_000)
        kconsumer.assign([TopicPartition(TOPIC, 0)])
        kconsumer.seek(TopicPartition(TOPIC, 0), 0)
        read = []
        for message in kconsumer:
            read.append(message.value)
            if len(read) == len(values):
                break
        kconsumer.close()
        assert read == values
