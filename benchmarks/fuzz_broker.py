"""Network fuzzer: mutated real requests against a live broker, with a good client beside it.

    python benchmarks/fuzz_broker.py --frames 100000
    python benchmarks/fuzz_broker.py --frames 2000 --json     (the short run tests/ makes)

Starts a broker process, a confluent-kafka producer and consumer that keep producing and
consuming on their own topic (the good client), and ``--connections`` fuzzing connections.
Each connection sends frames made by mutating the requests real clients sent (recorded in
tests/fuzz/corpus/requests by tests/fuzz/record_corpus.py): bit flips, interesting values
(0, -1, 0x7f.., a 5-byte varint of 2**32), inserted, deleted and repeated bytes, cut
frames, spliced frames, other versions and API keys. The size prefix is always right, so
every frame reaches the broker's decoders. After each frame it waits for the answer or for
the broker to close the connection, then goes on (reconnecting when closed).

It prints a table: frames tried, frames answered, connections the broker closed, broker
crashes and stalls, hung connections (no answer and no close within ``--wait`` seconds),
those waiting by design (Fetch, JoinGroup and SyncGroup may wait that long; Produce with
acks=0 gets no answer), handler errors (tracebacks in the broker log: a handler that failed on a
well-formed request), the broker's peak RSS, and the good client's counts and errors.
Targets: 0 crashes, 0 hung, 0 handler errors, peak RSS < 300 MB, 0 good-client errors.

Every frame that crashed the broker, hung a connection or made a handler fail is written to
``--out`` (default: a new /tmp directory) with the broker's log, to replay by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from pathlib import Path

from _brokers import proc_status
from rich.console import Console
from rich.table import Table

from odradek.protocol import messages, produce_request
from odradek.protocol.messages import api_name
from odradek.testing.process import BrokerProcess

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fuzz" / "corpus" / "requests"
PRODUCE = 0
PARKING_APIS = {1, 11, 14}  # Fetch, JoinGroup, SyncGroup: may wait for data or for the group
_SIZE = struct.Struct(">i")
INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\x00\x00",
    b"\xff\xff",
    b"\x7f\xff",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff\x0f",  # a compact length of 2**32 - 1
    b"\xfe\xff\xff\xff\x07",
]


# -- mutations ---------------------------------------------------------------------------------


class Mutator:
    def __init__(self, seeds: list[bytes], rng: random.Random):
        self.seeds = seeds
        self.rng = rng

    def frame(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice(self.seeds))
        for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
            rng.choice(self.MUTATIONS)(self, data)
        return bytes(data)

    def _body_pos(self, data: bytearray) -> int:
        """Mostly after the request header, so that mutations reach the body decoders."""
        start = min(len(data), 10) if self.rng.random() < 0.9 else 0
        return self.rng.randrange(start, len(data) + 1)

    def flip_bit(self, data):
        if data:
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)

    def set_byte(self, data):
        if data:
            data[self._body_pos(data) % len(data)] = self.rng.randrange(256)

    def interesting(self, data):
        pos = self._body_pos(data)
        value = self.rng.choice(INTERESTING)
        data[pos : pos + len(value)] = value

    def insert(self, data):
        pos = self._body_pos(data)
        data[pos:pos] = self.rng.randbytes(self.rng.randint(1, 16))

    def delete(self, data):
        pos = self._body_pos(data)
        del data[pos : pos + self.rng.randint(1, 16)]

    def repeat(self, data):
        pos = self._body_pos(data)
        data[pos:pos] = data[pos : pos + self.rng.randint(1, 32)] * self.rng.randint(2, 8)

    def cut(self, data):
        del data[self.rng.randrange(len(data) + 1) :]

    def splice(self, data):
        other = self.rng.choice(self.seeds)
        pos = self._body_pos(data)
        data[pos:] = other[self.rng.randrange(len(other) + 1) :]

    def version(self, data):
        if len(data) >= 4:
            data[2:4] = struct.pack(">h", self.rng.randint(-1, 14))

    def api_key(self, data):
        if len(data) >= 2:
            data[0:2] = struct.pack(">h", self.rng.choice((self.rng.randint(0, 70), self.rng.randint(-5, 32767))))

    MUTATIONS = (
        flip_bit, set_byte, interesting, interesting, interesting, insert, delete, repeat, cut, splice,
        version, api_key,
    )  # fmt: skip


def load_seeds() -> list[bytes]:
    seeds = [p.read_bytes() for p in sorted(CORPUS.iterdir())]
    if not seeds:
        raise SystemExit(f"no recorded requests in {CORPUS}: run tests/fuzz/record_corpus.py")
    return seeds


# -- the good client ---------------------------------------------------------------------------


class GoodClient:
    """A confluent-kafka producer and consumer working on their own topic throughout."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
        for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            f.result(30)
        self.topic = topic
        self.acked: list[bytes] = []
        self.consumed: list[bytes] = []
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._produced_all = threading.Event()
        self._grace = 30.0
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-good",
                "enable.partition.eof": False,
                "enable.auto.commit": False,
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, 0)])
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(f"delivery: {err}")
        else:
            self.acked.append(msg.value())

    def _produce(self) -> None:
        i = 0
        while not self._stopping.is_set():
            self._producer.produce(self.topic, f"good-{i}".encode(), partition=0, on_delivery=self._delivered)
            i += 1
            self._producer.poll(0.005)
        if self._producer.flush(self._grace):
            self.errors.append(f"records still unacknowledged {self._grace:.0f} s after the end")
        self._produced_all.set()

    def _consume(self) -> None:
        while not (self._produced_all.is_set() and len(self.consumed) >= len(self.acked)):
            msg = self._consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(f"consume: {msg.error()}")
            else:
                self.consumed.append(msg.value())

    def stop(self, grace: float, broker_alive: bool) -> None:
        """Stop producing; wait up to ``grace`` for acknowledgements and as long for the
        consumer to read every acknowledged record, in order. (Closing a consumer whose
        broker is gone can block for minutes: then it is left to the process exit.)"""
        self._grace = grace
        self._stopping.set()
        self._threads[0].join()
        self._threads[1].join(grace)
        if self._threads[1].is_alive():
            self.errors.append(f"consumed {len(self.consumed)} of {len(self.acked)} acknowledged records")
        elif self.consumed != self.acked:
            self.errors.append("the consumer read other records than were acknowledged, or in another order")
        if broker_alive and not self._threads[1].is_alive():
            self._consumer.close()


# -- the fuzzing connections ---------------------------------------------------------------------


class Fuzzer:
    def __init__(
        self, broker: BrokerProcess, frames: int, connections: int, wait: float, seed: int, skip: set, stall: float
    ):
        self.broker = broker
        self.stall = stall
        self.todo = frames
        self.connections = connections
        self.wait = wait
        self.skip = skip
        self.mutator = Mutator(load_seeds(), random.Random(seed))
        self.last_progress = time.monotonic()  # when the broker last answered or closed
        self.counts: Counter = Counter()
        self.by_port: dict[int, deque] = {}  # local port -> the last frames sent on that connection
        self.hung: list[bytes] = []
        self.recent: deque = deque(maxlen=20000)  # (time sent, frame)
        self.crashed = False

    async def run(self) -> None:
        watchdog = asyncio.create_task(self._watch())
        await asyncio.gather(*(self._connection() for _ in range(self.connections)))
        watchdog.cancel()

    async def _watch(self) -> None:
        """A broker that neither answers nor closes anything for ``stall`` seconds is stuck
        (a request blocking its event loop): kill it, as a crash."""
        while not self.crashed:
            await asyncio.sleep(1)
            if time.monotonic() - self.last_progress > self.stall:
                self.counts["broker stalls"] += 1
                self.crashed = True
                self.broker.kill()

    def _next(self) -> bytes | None:
        while self.todo > 0 and not self.crashed:
            frame = self.mutator.frame()
            if len(frame) >= 2 and struct.unpack_from(">h", frame)[0] in self.skip:
                continue
            self.todo -= 1
            return frame
        return None

    async def _connection(self) -> None:
        writer = None
        while True:
            frame = self._next()
            if frame is None:
                break
            if writer is None:
                try:
                    reader, writer = await asyncio.open_connection(self.broker.host, self.broker.port)
                except OSError:
                    self._check_broker()
                    self.counts["connect failures"] += 1
                    writer = None
                    await asyncio.sleep(0.1)
                    continue
                port = writer.get_extra_info("sockname")[1]
                self.by_port[port] = deque(maxlen=4)
            self.counts["frames"] += 1
            self.recent.append((time.monotonic(), frame))
            self.by_port[port].append(frame)
            outcome = await self._exchange(reader, writer, frame)
            self.counts[outcome] += 1
            if outcome in ("answered", "closed") and self.broker.proc.poll() is None:
                self.last_progress = time.monotonic()  # (not the resets of a broker just killed)
            if outcome != "answered":
                writer.close()
                writer = None
                if outcome == "hung":
                    self.hung.append(frame)
                self._check_broker()
        if writer is not None:
            writer.close()

    async def _exchange(self, reader, writer, frame: bytes) -> str:
        try:
            writer.write(_SIZE.pack(len(frame)) + frame)
            await writer.drain()
            head = await asyncio.wait_for(reader.readexactly(4), self.wait)
            (size,) = _SIZE.unpack(head)
            payload = await asyncio.wait_for(reader.readexactly(size), self.wait)
        except TimeoutError:
            return "parked" if may_go_unanswered(frame) else "hung"
        except (asyncio.IncompleteReadError, ConnectionError):
            return "closed"
        if len(frame) >= 8 and payload[:4] != frame[4:8]:
            return "wrong correlation id"
        return "answered"

    def _check_broker(self) -> None:
        if self.broker.proc.poll() is not None and not self.crashed:
            self.crashed = True
            self.counts["broker crashes"] += 1


def may_go_unanswered(frame: bytes) -> bool:
    """Whether the broker may rightly keep this request waiting, or not answer it at all:
    a long poll (Fetch, JoinGroup, SyncGroup) or a Produce with acks=0."""
    api = struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else -1
    if api in PARKING_APIS:
        return True
    if api != PRODUCE:
        return False
    try:
        header, pos = messages.parse_request_header(frame)
        return produce_request.decode_produce_request(frame, pos, header.api_version).acks == 0
    except ValueError:
        return False


class RssSampler(threading.Thread):
    """Follows the broker's peak RSS; past ``limit_mb`` it kills the broker (a crash by
    exhaustion) before it takes the machine with it, and notes when."""

    def __init__(self, broker: BrokerProcess, limit_mb: int):
        super().__init__(daemon=True)
        self.broker = broker
        self.limit_kib = limit_mb * 1024
        self.peak_kib = 0
        self.killed_at: float | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.05):
            try:
                self.peak_kib = max(self.peak_kib, proc_status(self.broker.proc.pid)["VmHWM"])
            except (FileNotFoundError, ProcessLookupError, KeyError):
                return
            if self.peak_kib > self.limit_kib:
                self.killed_at = time.monotonic()
                self.broker.kill()
                return

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_kib / 1024


# -- what the broker log says --------------------------------------------------------------------

_HANDLER_ERROR = re.compile(r"ERROR .* (\S+) (?:v\d+ )?from 127\.0\.0\.1:(\d+) failed; closing the connection")


def handler_errors(log: str, by_port: dict[int, deque]) -> list[tuple[str, str, list[bytes]]]:
    """(API, exception line, last frames on that connection) for each traceback in the log:
    a handler that failed, or an exception that escaped the network layer (asyncio's
    "Fatal error on transport", which names no connection)."""
    out = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _HANDLER_ERROR.search(line)
        if m:
            api, frames = m.group(1), list(by_port.get(int(m.group(2)), ()))
        elif "Fatal error on transport" in line:
            api, frames = "(unknown request)", []
        else:
            continue
        exc = next((x for x in lines[i + 1 : i + 60] if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", x)), "?")
        out.append((api, exc, frames))
    return out


def save(out: Path, name: str, frames: list[bytes]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for n, frame in enumerate(frames):
        api = api_name(struct.unpack_from(">h", frame)[0]) if len(frame) >= 2 else "short"
        (out / f"{name}-{n:05d}-{api}").write_bytes(frame)


def run(
    frames: int, connections: int, wait: float, seed: int, out: Path, rss_limit_mb: int, skip=(), stall: float = 30.0
) -> dict:
    work = Path(tempfile.mkdtemp(prefix="odradek-fuzz-broker-"))
    broker = BrokerProcess(work / "data", overrides={"group.initial.rebalance.delay.ms": 0})
    broker.start()
    try:
        sampler = RssSampler(broker, rss_limit_mb)
        sampler.start()
        good = GoodClient(broker.bootstrap_servers, f"good-{os.getpid()}")
        fuzzer = Fuzzer(broker, frames, connections, wait, seed, set(skip), stall)
        started = time.monotonic()
        asyncio.run(fuzzer.run())
        elapsed = time.monotonic() - started
        fuzzer._check_broker()
        good.stop(grace=5.0 if fuzzer.crashed else 30.0, broker_alive=not fuzzer.crashed)
        rss_mb = sampler.stop()
        fuzzer._check_broker()
        log = broker.log_text()
    finally:
        broker.stop()
    failures = handler_errors(log, fuzzer.by_port)
    if fuzzer.crashed:
        # what was sent from 30 s before the broker last showed progress (a request may take
        # a while to wreck it): bisect with --replay
        save(out / "crash", "recent", [f for t, f in fuzzer.recent if t > fuzzer.last_progress - 30][-5000:])
    save(out / "hung", "hung", fuzzer.hung[:50])
    for n, (api, _, last) in enumerate(failures[:50]):
        if last:
            save(out / "handler-errors", f"{n:03d}-{api}", last[-1:])
    if fuzzer.crashed or fuzzer.hung or failures:
        (out / "broker.log").write_text(log)
    shutil.rmtree(work, ignore_errors=True)
    c = fuzzer.counts
    return {
        "frames": c["frames"],
        "frames_per_s": c["frames"] / elapsed if elapsed else 0.0,
        "answered": c["answered"],
        "closed": c["closed"],
        "broker_crashes": c["broker crashes"],
        "broker_stalls": c["broker stalls"],
        "hung": c["hung"],
        "parked": c["parked"],
        "wrong_correlation": c["wrong correlation id"],
        "handler_errors": len(failures),
        "handler_error_kinds": sorted(Counter(f"{api}: {exc}" for api, exc, _ in failures).items()),
        "rss_peak_mb": rss_mb,
        "rss_limit_hit": sampler.killed_at is not None,
        "good_acked": len(good.acked),
        "good_consumed": len(good.consumed),
        "good_errors": len(good.errors) + (1 if fuzzer.crashed else 0),
        "good_error_samples": good.errors[:5],
        "skipped_apis": sorted(api_name(k) for k in skip),
        "stall_s": stall,
        "out": str(out),
    }


def replay(directory: Path, wait: float, rss_limit_mb: int) -> None:
    """Send each saved frame, in name order, on a connection of its own to one broker; report
    each outcome, and stop at the first frame that kills the broker, stalls it or takes its
    RSS past the limit."""
    broker = BrokerProcess(overrides={"group.initial.rebalance.delay.ms": 0})
    broker.start()
    try:
        for path in sorted(p for p in directory.iterdir() if p.is_file()):
            frame = path.read_bytes()
            with socket.create_connection((broker.host, broker.port), timeout=wait) as sock:
                sock.sendall(_SIZE.pack(len(frame)) + frame)
                try:
                    outcome = "answered" if sock.recv(4) else "closed"
                except TimeoutError:
                    outcome = "no answer"
                except ConnectionError:
                    outcome = "closed"
            alive = broker.proc.poll() is None
            rss = proc_status(broker.proc.pid)["VmHWM"] / 1024 if alive else 0.0
            print(f"{path.name}: {outcome}, broker {'alive' if alive else 'DEAD'}, peak RSS {rss:.0f} MB")
            if not alive or rss > rss_limit_mb or (outcome == "no answer" and not may_go_unanswered(frame)):
                print(f"the culprit: {path}")
                return
        print("no frame here hurts the broker on its own")
    finally:
        broker.kill()


def print_table(r: dict) -> None:
    skipped = f", without {', '.join(r['skipped_apis'])}" if r["skipped_apis"] else ""
    table = Table(title=f"Network fuzzer: {r['frames']:,} mutated frames ({r['frames_per_s']:,.0f}/s){skipped}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    rows = [
        ("frames tried", f"{r['frames']:,}", ""),
        ("answered", f"{r['answered']:,}", ""),
        ("connections closed by the broker", f"{r['closed']:,}", ""),
        ("broker crashes" + (" (killed at the RSS limit)" if r["rss_limit_hit"] else ""), str(r["broker_crashes"]), "0"),
        (f"broker stalls (nothing answered for {r['stall_s']:.0f} s)", str(r["broker_stalls"]), "0"),
        ("hung connections", str(r["hung"]), "0"),
        ("waiting by design (long polls, acks=0)", str(r["parked"]), ""),
        ("answers with a wrong correlation id", str(r["wrong_correlation"]), "0"),
        ("handler errors (tracebacks in the log)", str(r["handler_errors"]), "0"),
        ("broker RSS peak", f"{r['rss_peak_mb']:.0f} MB", "< 300 MB"),
        ("good client: acknowledged / consumed", f"{r['good_acked']:,} / {r['good_consumed']:,}", ""),
        ("good client errors", str(r["good_errors"]), "0"),
    ]
    for row in rows:
        table.add_row(*row)
    console = Console(width=120)
    console.print(table)
    for kind, n in r["handler_error_kinds"]:
        console.print(f"  handler error x{n}: {kind}")
    for sample in r["good_error_samples"]:
        console.print(f"  good client: {sample}")
    console.print(f"frames worth keeping (if any) and the broker log: {r['out']}")


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid> prints where a stuck run is
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100_000, help="mutated frames to send (default 100000)")
    parser.add_argument("--connections", type=int, default=16, help="fuzzing connections at once (default 16)")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait for an answer or a close")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the mutations (default 1)")
    parser.add_argument("--out", type=Path, default=None, help="where to keep interesting frames")
    parser.add_argument(
        "--rss-limit-mb", type=int, default=2000, help="kill the broker past this RSS (a crash; default 2000)"
    )
    parser.add_argument(
        "--stall", type=float, default=30.0, help="seconds without any answer that count as a stuck broker"
    )
    parser.add_argument(
        "--skip-api",
        action="append",
        default=[],
        metavar="KEY",
        help="leave out frames of this API key (repeatable), e.g. 37 while CreatePartitions has no limit",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--replay", type=Path, metavar="DIR", help="replay saved frames one by one instead")
    args = parser.parse_args()
    if args.replay:
        replay(args.replay, args.wait, args.rss_limit_mb)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="odradek-fuzz-findings-"))
    skip = {int(k) for k in args.skip_api}
    result = run(args.frames, args.connections, args.wait, args.seed, out, args.rss_limit_mb, skip, args.stall)
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    bad = (
        result["broker_crashes"]
        or result["broker_stalls"]
        or result["hung"]
        or result["good_errors"]
        or result["wrong_correlation"]
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
