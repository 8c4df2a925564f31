"""Log cleanup benchmarks: compaction throughput, and produce throughput while the cleaner runs.

Rows:

* **compaction throughput** - ``LogCleaner.clean_once`` over a log of ``--dirty-mb`` MB of
  dirty, keyed records (``--keys`` distinct keys, ``--value-bytes`` values), in this process:
  MB of dirty log cleaned per second (dirty bytes / wall time of the pass), records per
  second, and the size after. Uncompressed and zstd-compressed batches.
* **produce while cleaning** - a real broker (``python -m odradek server``) whose compacted
  topic holds ``--busy-mb`` MB of dirty data when it starts, so its cleaner thread is busy
  from the first second; confluent-kafka produces ``--messages`` records of
  ``--value-bytes`` to another topic (acks=1). The same with ``log.cleaner.enable=false``.
  The "cleaner busy" column is the share of the produce window the cleaning pass covered
  (from the broker's log), so a row only counts if the cleaner really ran alongside.

Run::

    python benchmarks/cleanup_bench.py [--dirty-mb 32] [--busy-mb 48] [--messages 200000]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.protocol import records as R  # noqa: E402
from odradek.storage import LogConfig, LogManager  # noqa: E402
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

COMPACT = {"cleanup.policy": "compact", "segment.bytes": str(16 << 20), "min.cleanable.dirty.ratio": "0.01"}


def fill_log(log, target_bytes: int, keys: int, value_bytes: int, codec: int, seed: int = 1) -> int:
    """Append keyed 100-record batches until the log holds ``target_bytes``; returns records."""
    rng = random.Random(seed)
    value = os.urandom(value_bytes)
    n = 0
    while log.size < target_bytes:
        batch = R.build_batch(
            [R.NewRecord(b"key-%08d" % rng.randrange(keys), value) for _ in range(100)], compression=codec
        )
        log.append_as_leader(batch, 0)
        n += 100
    log.roll()
    log.high_watermark = log.log_end_offset
    return n


def compaction_row(dirty_mb: int, keys: int, value_bytes: int, codec: int) -> dict:
    d = tempfile.mkdtemp(prefix="odradek-clean-bench-")
    try:
        lm = LogManager(d, LogConfig.from_dict(COMPACT))
        log = lm.get_or_create_log("bench", 0)
        records = fill_log(log, dirty_mb << 20, keys, value_bytes, codec)
        before = log.size
        cleaner = LogCleaner(lm, CleanerConfig())
        t0 = time.perf_counter()
        result = cleaner.clean_once()
        elapsed = time.perf_counter() - t0
        lm.shutdown()
        return {
            "codec": {0: "none", 4: "zstd"}[codec],
            "dirty_mb": result.dirty_bytes / 1e6,
            "records": records,
            "seconds": elapsed,
            "mb_s": result.dirty_bytes / 1e6 / elapsed,
            "rec_s": records / elapsed,
            "after_mb": log.size / 1e6,
            "before_mb": before / 1e6,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- produce while the cleaner runs ---------------------------------------------------------


def prefill_broker_dir(data_dir, busy_mb: int, keys: int, value_bytes: int) -> None:
    """Create the topics with a broker, then fill the compacted one through the storage API
    while no broker runs (fast, and it is dirty from offset 0 when the broker starts)."""
    broker = BrokerProcess(data_dir, overrides={"log.cleaner.enable": "false"})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic("busy", 1, 1, config=COMPACT), NewTopic("target", 1, 1)], operation_timeout=10
        )
        for f in futures.values():
            f.result(15)
    finally:
        broker.stop()
    lm = LogManager(str(data_dir), LogConfig.from_dict(COMPACT))
    log = lm.get_or_create_log("busy", 0)
    fill_log(log, busy_mb << 20, keys, value_bytes, 0)
    lm.shutdown()


def produce(bootstrap: str, topic: str, messages: int, value_bytes: int) -> tuple[float, float, float]:
    """(start, end, delivered) of producing ``messages`` records with acks=1."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1000000,
            "log_level": 3,
        }
    )
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1

    value = os.urandom(value_bytes)
    # Warm up the connection and metadata.
    p.produce(topic, value, on_delivery=on_delivery)
    p.flush(30)
    delivered[0] = 0
    t0 = time.time()
    for i in range(messages):
        while True:
            try:
                p.produce(topic, value, key=b"%d" % (i % 1000), on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return t0, time.time(), delivered[0]


def cleaner_window(log_text: str) -> tuple[float, float] | None:
    """(start, end) epoch seconds of the first cleaning pass of 'busy' (from its log line)."""
    for line in log_text.splitlines():
        m = re.match(r"(\d+-\d+-\d+ \d+:\d+:\d+),(\d+) INFO .*Cleaned busy-0: .* in ([\d.]+) s", line)
        if m:
            end = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            return end - float(m.group(3)), end
    return None


def produce_row(enabled: bool, busy_mb: int, messages: int, value_bytes: int, keys: int) -> dict:
    d = tempfile.mkdtemp(prefix="odradek-clean-bench-")
    try:
        data = os.path.join(d, "data")
        prefill_broker_dir(data, busy_mb, keys, value_bytes)
        broker = BrokerProcess(
            data, overrides={"log.cleaner.enable": str(enabled).lower(), "log.cleaner.backoff.ms": 100}
        )
        broker.start()
        try:
            t0, t1, delivered = produce(broker.bootstrap_servers, "target", messages, value_bytes)
            if enabled:
                deadline = time.time() + 120
                while cleaner_window(broker.log_text()) is None and time.time() < deadline:
                    time.sleep(0.2)
        finally:
            broker.stop()
        window = cleaner_window(broker.log_text()) if enabled else None
        overlap = None
        if window is not None:
            overlap = max(0.0, min(t1, window[1]) - max(t0, window[0])) / (t1 - t0)
        return {
            "cleaner": "running" if enabled else "disabled",
            "msgs_s": delivered / (t1 - t0),
            "mb_s": delivered * value_bytes / 1e6 / (t1 - t0),
            "seconds": t1 - t0,
            "delivered": delivered,
            "overlap": overlap,
            "pass_s": (window[1] - window[0]) if window else None,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirty-mb", type=int, default=32)
    ap.add_argument("--busy-mb", type=int, default=48)
    ap.add_argument("--keys", type=int, default=50000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--messages", type=int, default=200000)
    args = ap.parse_args()

    print(f"compaction throughput: {args.dirty_mb} MB dirty, {args.keys} keys, {args.value_bytes}-byte values")
    print(f"{'codec':<6} {'dirty MB':>9} {'records':>9} {'seconds':>8} {'MB/s':>7} {'records/s':>10} {'MB after':>9}")
    for codec in (0, 4):
        r = compaction_row(args.dirty_mb, args.keys, args.value_bytes, codec)
        print(
            f"{r['codec']:<6} {r['dirty_mb']:>9.1f} {r['records']:>9} {r['seconds']:>8.2f} {r['mb_s']:>7.1f} "
            f"{r['rec_s']:>10.0f} {r['after_mb']:>9.1f}"
        )
    print()
    print(
        f"produce throughput ({args.messages} x {args.value_bytes} B, acks=1) with {args.busy_mb} MB "
        "of dirty compacted data on the broker"
    )
    print(f"{'cleaner':<9} {'msgs/s':>9} {'MB/s':>7} {'seconds':>8} {'cleaner busy':>13} {'pass s':>7}")
    rows = [produce_row(e, args.busy_mb, args.messages, args.value_bytes, args.keys) for e in (False, True)]
    for r in rows:
        busy = f"{r['overlap'] * 100:.0f}%" if r["overlap"] is not None else "-"
        pass_s = f"{r['pass_s']:.1f}" if r["pass_s"] is not None else "-"
        print(
            f"{r['cleaner']:<9} {r['msgs_s']:>9.0f} {r['mb_s']:>7.1f} {r['seconds']:>8.2f} {busy:>13} {pass_s:>7}"
        )
    print(f"ratio running/disabled: {rows[1]['msgs_s'] / rows[0]['msgs_s']:.2f}")


if __name__ == "__main__":
    main()
