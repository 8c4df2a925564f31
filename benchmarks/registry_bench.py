"""Schema registry: registrations per second, cached lookups by id at a paced rate, and the
cost of Avro framing in a produce/consume run beside raw bytes.

Runs a broker (``odradek server``) with its registry beside it (schema.registry.listeners on a
free port) and prints one table. Targets (issue 29): a cached id lookup p99 < 5 ms at 1,000
requests/s; 10,000 distinct schemas registered in under 60 s.

Registrations come from ``--clients`` concurrent HTTP clients (16 by default), each sending
one request at a time on its own keep-alive connection, as a fleet of producers registering
their schemas would: the registry groups what arrives together into one write to
``_schemas``, so one client at a time would measure only the round trips of a single caller.
They start once the registry has elected itself leader (its startup is not timed). The
lookups are one client on one connection, paced at ``--rate``, after one unmeasured pass over
the ids (the registry's encoded-body cache is warm, which is what "cached" means: every
deserializer asks for an id it has met once). Their latency is measured by the client, so it
includes both processes' waits for a CPU; the registry's own histogram
(odradek_schema_registry_request_seconds: from its first middleware to the handler's answer,
not HTTP parsing or the socket write) says how many it answered within 1 and 5 ms.

    python benchmarks/registry_bench.py                    # 2,000 schemas, 5 s of lookups
    python benchmarks/registry_bench.py --schemas 10000 --seconds 5 --records 20000
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import wait_until  # noqa: E402

from odradek.testing.process import BrokerProcess, free_port  # noqa: E402

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]})


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def ready(conn: http.client.HTTPConnection) -> bool:
    try:
        conn.request("GET", "/subjects")
        resp = conn.getresponse()
        resp.read()
        return resp.status == 200
    except OSError:
        conn.close()
        return False


def leading(conn: http.client.HTTPConnection) -> bool:
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    return b"kafka_schema_registry_master_slave_role 1.0" in resp.read()


def id_lookup_buckets(conn: http.client.HTTPConnection) -> dict[str, float]:
    """The registry's own latency histogram of GET /schemas/ids/{id}: {bucket bound: count}."""
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    buckets = {}
    for line in resp.read().decode().splitlines():
        if line.startswith("odradek_schema_registry_request_seconds_bucket") and 'endpoint="/schemas/ids/{id}"' in line:
            bound = line.split('le="')[1].split('"')[0]
            buckets[bound] = float(line.rsplit(" ", 1)[1])
    return buckets


def server_share_within(before: dict[str, float], after: dict[str, float], bound: str) -> float:
    """Of the lookups between two readings of the histogram, the share the server answered within ``bound`` s."""
    total = after["+Inf"] - before.get("+Inf", 0)
    return (after[bound] - before.get(bound, 0)) / total if total else float("nan")


def register_many(url: str, count: int, clients: int) -> list[float]:
    """Register ``count`` distinct schemas from ``clients`` concurrent HTTP clients (each a
    keep-alive connection sending one request at a time), as a fleet of producers would."""
    import asyncio

    import aiohttp

    async def run() -> list[float]:
        latencies: list[float] = []
        todo = iter(range(count))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:

            async def client() -> None:
                for i in todo:
                    started = time.perf_counter()
                    async with session.post(
                        f"{url}/subjects/bench-{i}/versions", data=json.dumps({"schema": schema(i)}), headers=CT
                    ) as resp:
                        body = await resp.read()
                        assert resp.status == 200, body
                    latencies.append(time.perf_counter() - started)

            await asyncio.gather(*(client() for _ in range(clients)))
        return latencies

    return asyncio.run(run())


def paced_lookups(conn, ids: int, rate: int, seconds: float) -> tuple[list[float], float]:
    latencies = []
    interval = 1 / rate
    started = time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - started < seconds:
        due = started + n * interval
        if now < due:
            time.sleep(due - now)
        t0 = time.perf_counter()
        conn.request("GET", f"/schemas/ids/{n % ids + 1}")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        latencies.append(time.perf_counter() - t0)
        n += 1
    return latencies, n / (time.perf_counter() - started)


def framing_run(bootstrap: str, url: str, records: int) -> list[tuple[str, float, float]]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": url})
    value = {"id": 1, "v": "x" * 100}
    rows = []
    for kind in ("raw bytes", "avro framed"):
        topic = f"framing-{kind.replace(' ', '-')}"
        ctx = SerializationContext(topic, MessageField.VALUE)
        serializer = AvroSerializer(client, schema(0))
        raw = json.dumps(value).encode()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        t0 = time.perf_counter()
        for _ in range(records):
            payload = raw if kind == "raw bytes" else serializer(value, ctx)
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(60)
        produce_s = time.perf_counter() - t0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        deserializer = AvroDeserializer(client)
        t0 = None  # timed from the first record: the group's join (3 s of initial delay) is not decoding
        got = 0
        while got < records:
            for msg in consumer.consume(1000, 5):
                t0 = t0 or time.perf_counter()
                if msg.error() is None:
                    if kind == "avro framed":
                        deserializer(msg.value(), ctx)
                    else:
                        json.loads(msg.value())
                    got += 1
        consume_s = time.perf_counter() - (t0 or 0)
        consumer.close()
        rows.append((kind, records / produce_s, records / consume_s))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", type=int, default=2000, help="distinct schemas to register")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients registering")
    parser.add_argument("--rate", type=int, default=1000, help="lookups per second to pace")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to run the lookups")
    parser.add_argument("--records", type=int, default=20000, help="records per framing run")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="registry-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", overrides={"schema.registry.listeners": f"http://127.0.0.1:{port}"})
        broker.start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            wait_until(lambda: ready(conn), 60, "the registry")
            wait_until(lambda: leading(conn), 60, "the registry to lead")
            t0 = time.perf_counter()
            reg = register_many(f"http://127.0.0.1:{port}", args.schemas, args.clients)
            reg_s = time.perf_counter() - t0
            paced_lookups(conn, args.schemas, args.rate * 10, args.schemas / (args.rate * 10))  # warm: each id once
            before = id_lookup_buckets(conn)
            look, achieved = paced_lookups(conn, args.schemas, args.rate, args.seconds)
            after = id_lookup_buckets(conn)
            framing = framing_run(broker.bootstrap_servers, f"http://127.0.0.1:{port}", args.records)
        finally:
            broker.stop()
    print(f"{'measure':44} {'value':>12}")
    print(f"{f'register {args.schemas} distinct schemas, {args.clients} clients (s)':44} {reg_s:12.1f}")
    print(f"{'registrations/s':44} {args.schemas / reg_s:12.0f}")
    print(f"{'register p50 / p99 (ms)':44} {pct(reg, .5):5.2f} / {pct(reg, .99):5.2f}")
    print(f"{f'id lookups/s achieved (paced at {args.rate})':44} {achieved:12.0f}")
    print(f"{'id lookup p50 / p99 (ms)':44} {pct(look, .5):5.2f} / {pct(look, .99):5.2f}")
    print(f"{'id lookup mean (ms)':44} {statistics.mean(look) * 1000:12.2f}")
    for bound in ("0.001", "0.005"):
        share = server_share_within(before, after, bound)
        print(f"{f'id lookups answered in the server within {float(bound) * 1000:.0f} ms':44} {share:12.2%}")
    for kind, produced, consumed in framing:
        print(f"{f'{kind}: produce records/s':44} {produced:12.0f}")
        print(f"{f'{kind}: consume+decode records/s':44} {consumed:12.0f}")


if __name__ == "__main__":
    main()
