"""The load generator: one confluent-kafka job per process.

Run as ``python _loadgen.py '<json job>'``; prints one JSON object with the result on stdout.
Jobs: ``create`` and ``delete`` (topics), ``produce``, ``consume``, ``fetch_raw``, ``cpu_per_request`` and ``enqueue``
(the generator's own ceiling: how fast this Python loop can hand records to librdkafka with
no broker at all). Each timed job also samples the broker's CPU (``/proc/PID/stat``) and its
own main-thread CPU around the timed section, so the report can say who was busy.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import struct
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _brokers import CLK_TCK, cpu_seconds, sched_ns, user_system_seconds  # noqa: E402


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat, all CPUs, idle and iowait
    excluded): the rest of the box's load shows up as busy minus broker minus generator."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (vals + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Sampler:
    """Broker CPU, generator main-thread CPU, generator process CPU and the machine's
    other load over a section."""

    def __init__(self, broker_pid: int | None, others: list[int] | None = None):
        self.pid = broker_pid
        self.others = others or []  # more brokers (a cluster): each one's CPU over the same section

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        self.machine0 = machine_busy_s()
        self.thread0 = time.thread_time()
        t = os.times()
        self.proc0 = t.user + t.system
        self.broker0 = cpu_seconds(self.pid) if self.pid else 0.0
        self.sched0 = sched_ns(self.pid) if self.pid else 0
        self.others0 = {pid: user_system_seconds(pid) for pid in self.others}

    def stop(self) -> dict:
        wall = time.perf_counter() - self.t0
        t = os.times()
        gen = t.user + t.system - self.proc0
        out = {
            "seconds": wall,
            "wall_start": self.wall0,
            "wall_end": time.time(),
            "gen_main_thread_cpu": (time.thread_time() - self.thread0) / wall,
            "gen_process_cpu": gen / wall,
            "gen_process_cpu_s": gen,
            "machine_busy_s": machine_busy_s() - self.machine0,
        }
        if self.pid:
            out["broker_cpu0"] = self.broker0
            out["broker_cpu1"] = cpu_seconds(self.pid)
            out["broker_cpu_s"] = out["broker_cpu1"] - self.broker0
            out["broker_sched_s"] = (sched_ns(self.pid) - self.sched0) / 1e9
            out["broker_cpu"] = out["broker_cpu_s"] / wall
            out["other_cpu"] = (out["machine_busy_s"] - out["broker_cpu_s"] - gen) / wall
        if self.others:
            now = {pid: user_system_seconds(pid) for pid in self.others}
            out["brokers_user_s"] = {pid: now[pid][0] - self.others0[pid][0] for pid in self.others}
            out["brokers_system_s"] = {pid: now[pid][1] - self.others0[pid][1] for pid in self.others}
        return out


def _silence(conf: dict) -> dict:
    errors: list[str] = []

    def error_cb(err):
        if len(errors) < 20:
            errors.append(str(err))

    conf["error_cb"] = error_cb
    return errors


def _stats(conf: dict) -> list[str]:
    """Keep librdkafka's latest statistics JSON (raw; parsed once at the end)."""
    last: list[str] = [""]

    def stats_cb(raw: str) -> None:
        last[0] = raw

    conf["stats_cb"] = stats_cb
    conf["statistics.interval.ms"] = 200
    return last


def _request_stats(raw: str, api: str, before: dict | None = None) -> dict:
    """Requests of one API, bytes and mean round trip over the broker connections (minus a
    ``before`` snapshot, e.g. the warm-up)."""
    if not raw:
        return {}
    st = json.loads(raw)
    reqs = tx = rx = 0
    rtts = []
    for name, b in st.get("brokers", {}).items():
        if name.endswith("/bootstrap") or b.get("nodeid", -1) < 0:
            continue
        reqs += b.get("req", {}).get(api, 0)
        tx += b.get("txbytes", 0)
        rx += b.get("rxbytes", 0)
        if b.get("rtt", {}).get("cnt"):
            rtts.append(b["rtt"]["avg"])
    out = {"requests": reqs, "txbytes": tx, "rxbytes": rx, "rtt_avg_us": max(rtts) if rtts else None}
    if before:
        for k in ("requests", "txbytes", "rxbytes"):
            out[k] -= before.get(k, 0)
    return out


def create(job: dict) -> dict:
    admin = AdminClient({"bootstrap.servers": job["bootstrap"]})
    new = [NewTopic(t, job["partitions"], 1) for t in job["topics"]]
    for fut in admin.create_topics(new, operation_timeout=30, request_timeout=30).values():
        try:
            fut.result(30)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    # wait until metadata shows every partition with a leader
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10)
        ok = all(
            t in md.topics
            and md.topics[t].error is None
            and len(md.topics[t].partitions) == job["partitions"]
            and all(p.leader >= 0 for p in md.topics[t].partitions.values())
            for t in job["topics"]
        )
        if ok:
            out: dict = {"ok": True}
            if job.get("warm_group"):
                out["group_warmup_s"] = warm_group(job["bootstrap"], job["topics"][0])
            return out
        time.sleep(0.05)
    raise RuntimeError(f"topics {job['topics']} not ready")


def warm_group(bootstrap: str, topic: str) -> float:
    """Make the broker set up its group coordinator (Odradek creates __consumer_offsets on
    the first FindCoordinator) before anything is timed; the consumers below carry a
    group.id (confluent-kafka requires one) even though they only assign(). Returns the
    seconds an OffsetFetch took to be answered."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warmup", "enable.auto.commit": False})
    t0 = time.perf_counter()
    try:
        c.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        elapsed = time.perf_counter() - t0
        c.close()
    return elapsed


def delete(job: dict) -> dict:
    """Delete topics (a run's data, once measured) and wait for the answer."""
    admin = AdminClient({"bootstrap.servers": job["bootstrap"]})
    errors = {}
    for topic, fut in admin.delete_topics(job["topics"], operation_timeout=30, request_timeout=30).items():
        try:
            fut.result(30)
        except KafkaException as exc:
            errors[topic] = str(exc)
    return {"deleted": len(job["topics"]) - len(errors), "errors": errors}


def produce(job: dict) -> dict:
    count, size, topic = job["count"], job["size"], job["topic"]
    failures: list[str] = []
    n_failed = 0

    def on_delivery(err, msg):  # called only for failed records (delivery.report.only.error)
        nonlocal n_failed
        n_failed += 1
        if len(failures) < 5:
            failures.append(str(err))

    conf = {
        "bootstrap.servers": job["bootstrap"],
        "acks": job["acks"],
        "linger.ms": job.get("linger_ms", 5),
        "batch.size": 1_000_000,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": max(count + 10, 100_000),
        "queue.buffering.max.kbytes": 4 * 1024 * 1024,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "compression.type": "none",
        "enable.idempotence": False,
    }
    if job.get("create_partitions"):
        create({"bootstrap": job["bootstrap"], "topics": [topic], "partitions": job["create_partitions"]})
    errors = _silence(conf)
    stats = _stats(conf)
    p = Producer(conf)
    value = (os.urandom(16) * (size // 16 + 1))[:size]
    # warm-up: connection, metadata and one record (the consumer expects count + 1 in all)
    if job.get("warmup", True):
        p.produce(topic, value)
    if p.flush(30) != 0:
        raise RuntimeError(f"warm-up record not delivered: {errors}")
    p.poll(0.25)
    before = _request_stats(stats[0], "Produce")
    start_at = job.get("start_at")
    if start_at:  # several generator processes start together
        while time.time() < start_at:
            time.sleep(0.0005)

    produce_, poll = p.produce, p.poll
    chunk = job.get("poll_every", 20_000)
    s = Sampler(job.get("broker_pid"), job.get("broker_pids"))
    s.start()
    sent = 0
    full = 0
    if job.get("api", "produce") == "batch":
        # produce_batch(): one C call per 10k records, each batch aimed at one partition
        partitions = job.get("partitions", 1)
        batch_n = 10_000
        batch = [{"value": value}] * batch_n
        i = job.get("first_partition", 0)
        while sent < count:
            n = min(batch_n, count - sent)
            k = p.produce_batch(topic, batch if n == batch_n else batch[:n], partition=i % partitions)
            if k < n:  # queue full (the dicts got an _error mark): fresh ones next time
                full += 1
                batch = [{"value": value} for _ in range(batch_n)]
                poll(0.005)
            sent += k
            i += 1
            poll(0)
    else:
        while sent < count:
            n = min(chunk, count - sent)
            k = 0
            try:
                for k in range(n):  # noqa: B007
                    produce_(topic, value)
                k = n
            except BufferError:
                full += 1
                poll(0.005)
            sent += k
            poll(0)
    enqueue_s = time.perf_counter() - s.t0
    left = p.flush(300)
    r = s.stop()
    p.poll(0.25)
    req = _request_stats(stats[0], "Produce", before)
    r.update(
        produce_requests=req.get("requests"),
        records_per_request=count / req["requests"] if req.get("requests") else None,
        rtt_avg_us=req.get("rtt_avg_us"),
        count=count,
        size=size,
        bytes=count * size,
        msgs_per_s=count / r["seconds"],
        mb_per_s=count * size / r["seconds"] / 1e6,
        enqueue_s=enqueue_s,
        queue_full_events=full,
        undelivered=left,
        failed=n_failed,
        failures=failures,
        client_errors=errors,
    )
    return r


def consume(job: dict) -> dict:
    topic, size, expect = job["topic"], job["size"], job["expect"]
    conf = {
        "bootstrap.servers": job["bootstrap"],
        "group.id": f"bench-{topic}-{os.getpid()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,
        "enable.partition.eof": False,
    }
    conf.update(job.get("extra_conf", {}))
    errors = _silence(conf)
    stats = _stats(conf)
    c = Consumer(conf)
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(job["partitions"])])
    consume_ = c.consume
    s = Sampler(job.get("broker_pid"))
    total = first = 0
    nbytes = 0
    msg_errors: list[str] = []
    started = False
    idle_deadline = time.monotonic() + 30
    # Every consume() returns up to 10k Message objects, which the cyclic collector would
    # keep traversing (16% of the generator's CPU in a perf profile); they hold no cycles.
    gc.disable()
    while total < expect:
        # never ask for more than is left: consume() blocks until it has num_messages or times out
        batch = consume_(min(10_000, expect - total), 0.5)
        if not batch:
            if time.monotonic() > idle_deadline:
                break
            continue
        if not started:
            s.start()
            started = True
            first = len(batch)
        got = sum(map(len, batch))
        if got != len(batch) * size:  # an error event or an odd-sized record: look closer
            for m in batch:
                if m.error() is not None:
                    if len(msg_errors) < 5:
                        msg_errors.append(str(m.error()))
                    got -= len(m)
                    total -= 1
        total += len(batch)
        nbytes += got
        idle_deadline = time.monotonic() + 10
    if not started:
        s.start()
    r = s.stop()
    gc.enable()
    c.consume(1, 0.3)  # let a fresh statistics report through
    req = _request_stats(stats[0], "Fetch")
    c.close()
    timed = max(total - first, 1)
    r.update(
        fetch_requests=req.get("requests"),
        kb_per_fetch=req["rxbytes"] / req["requests"] / 1024 if req.get("requests") else None,
        rtt_avg_us=req.get("rtt_avg_us"),
        count=total,
        expected=expect,
        bytes=nbytes,
        size=size,
        msgs_per_s=timed / r["seconds"],
        mb_per_s=timed * size / r["seconds"] / 1e6,
        message_errors=msg_errors,
        client_errors=errors,
    )
    return r


def cpu_per_request(job: dict) -> dict:
    """N one-record Produce requests, each awaited before the next (linger.ms=0,
    max.in.flight=1), so every request carries exactly one record."""
    conf = {
        "bootstrap.servers": job["bootstrap"],
        "acks": "1",
        "linger.ms": 0,
        "max.in.flight.requests.per.connection": 1,
        "enable.idempotence": False,
        "compression.type": "none",
    }
    errors = _silence(conf)
    p = Producer(conf)
    topic, value = job["topic"], b"v" * job.get("size", 100)
    for _ in range(job.get("warmup", 200)):
        p.produce(topic, value)
        p.flush(10)
    n = job["requests"]
    produce_, flush = p.produce, p.flush
    s = Sampler(job["broker_pid"])
    s.start()
    for _ in range(n):
        produce_(topic, value)
        if flush(10) != 0:
            raise RuntimeError("one-record request not acknowledged within 10 s")
    r = s.stop()
    r.update(
        requests=n,
        cpu_us_per_request=r["broker_cpu_s"] / n * 1e6,
        sched_us_per_request=r["broker_sched_s"] / n * 1e6,
        latency_us=r["seconds"] / n * 1e6,
        client_errors=errors,
    )
    return r


def enqueue(job: dict) -> dict:
    """The generator's ceiling: the same produce loop against a port nobody listens on, so
    records only go into librdkafka's queue (no batching to a socket, no broker)."""
    count, size = job["count"], job["size"]
    conf = {
        "bootstrap.servers": "127.0.0.1:9",
        "linger.ms": 5,
        "queue.buffering.max.messages": count + 10,
        "queue.buffering.max.kbytes": 4 * 1024 * 1024,
        "log_level": 0,
        "message.timeout.ms": 600_000,
    }
    _silence(conf)
    p = Producer(conf)
    value = (os.urandom(16) * (size // 16 + 1))[:size]
    produce_, poll = p.produce, p.poll
    chunk = 20_000
    s = Sampler(None)
    s.start()
    sent = 0
    while sent < count:
        n = min(chunk, count - sent)
        for _ in range(n):
            produce_("enqueue-ceiling", value)
        sent += n
        poll(0)
    r = s.stop()
    p.purge()
    p.flush(0)
    r.update(
        count=count, size=size, msgs_per_s=count / r["seconds"], mb_per_s=count * size / r["seconds"] / 1e6
    )
    return r


# -- raw Fetch: the broker's side of consuming, without a client's per-record work ------------

_FETCH_V11_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_FETCH_V11_LIMITS = struct.Struct(
    ">iiiibii"
)  # replica, max wait, min bytes, max bytes, isolation, session, epoch
_FETCH_V11_PARTITION = struct.Struct(
    ">iiiqqi"
)  # 1 partition: index, leader epoch, offset, log start, max bytes


def _fetch_v11(correlation_id: int, topic: bytes, offset: int, partition_max_bytes: int) -> bytes:
    body = b"".join(
        (
            _FETCH_V11_HEAD.pack(1, 11, correlation_id, 3),
            b"raw",
            _FETCH_V11_LIMITS.pack(-1, 500, 1, 50 << 20, 0, 0, -1),
            struct.pack(">ih", 1, len(topic)),
            topic,
            _FETCH_V11_PARTITION.pack(1, 0, -1, offset, -1, partition_max_bytes),
            struct.pack(">ih", 0, 0),  # no forgotten topics, empty rack id
        )
    )
    return struct.pack(">i", len(body)) + body


def _records_of_fetch_v11(frame: memoryview) -> memoryview:
    """The records of the one partition in a FetchResponse v11 frame (after the size)."""
    pos = 4 + 4 + 2 + 4 + 4  # correlation id, throttle, error, session id, topics count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4 + 4  # name, partitions count, partition index
    (error,) = struct.unpack_from(">h", frame, pos)
    if error:
        raise RuntimeError(f"Fetch answered error {error}")
    pos += 2 + 8 + 8 + 8  # error, high watermark, last stable offset, log start offset
    (aborted,) = struct.unpack_from(">i", frame, pos)
    pos += 4 + max(aborted, 0) * 16 + 4  # aborted transactions, preferred read replica
    (size,) = struct.unpack_from(">i", frame, pos)
    return frame[pos + 4 : pos + 4 + max(size, 0)]


def fetch_raw(job: dict) -> dict:
    """Read the topic (partition 0) from the start with back-to-back Fetch v11 requests on a
    raw socket, as a consumer's fetcher would (``max.partition.fetch.bytes`` 1 MB), but
    counting records from the batch headers instead of building a message per record:
    what the broker can serve, with the client's per-record cost taken out."""
    topic, expect = job["topic"].encode(), job["expect"]
    host, port = job["bootstrap"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(64 << 20)
    view = memoryview(buf)

    def read_frame() -> memoryview:
        got = 0
        while got < 4:
            got += sock.recv_into(view[got:4])
        (size,) = struct.unpack_from(">i", buf)
        got = 0
        while got < size:
            n = sock.recv_into(view[got:size])
            if not n:
                raise RuntimeError("connection closed")
            got += n
        return view[:size]

    s = Sampler(job.get("broker_pid"))
    passes = job.get("passes", 1)  # a short topic is read several times over
    records = nbytes = fetches = 0
    s.start()
    for _ in range(passes):
        offset = read = 0
        while read < expect:
            sock.sendall(_fetch_v11(fetches, topic, offset, job.get("partition_max_bytes", 1 << 20)))
            data = _records_of_fetch_v11(read_frame())
            fetches += 1
            pos = 0
            while pos + 61 <= len(data):  # whole v2 batches only; a fetch may end in a partial one
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                (delta,) = struct.unpack_from(">i", data, pos + 23)
                (count,) = struct.unpack_from(">i", data, pos + 57)
                offset = base + delta + 1
                read += count
                nbytes += 12 + length
                pos += 12 + length
            if not pos:
                raise RuntimeError(f"no complete batch at offset {offset}")
        records += read
    r = s.stop()
    sock.close()
    r.update(
        count=records,
        size=job["size"],
        fetches=fetches,
        kb_per_fetch=nbytes / fetches / 1024,
        msgs_per_s=records / r["seconds"],
        mb_per_s=records * job["size"] / r["seconds"] / 1e6,
        batch_mb_per_s=nbytes / r["seconds"] / 1e6,
    )
    return r


JOBS = {
    "create": create,
    "delete": delete,
    "produce": produce,
    "consume": consume,
    "fetch_raw": fetch_raw,
    "cpu_per_request": cpu_per_request,
    "enqueue": enqueue,
}


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    result = JOBS[job["job"]](job)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip librdkafka's teardown waits; results are out
