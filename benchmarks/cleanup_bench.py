"""Log cleanup benchmarks: compaction throughput, and produce throughput while the cleaner runs.

Rows:

* **compaction throughput** - ``LogCleaner.clean_once`` over a log of ``--dirty-mb`` MB of
  dirty, keyed records (``--keys`` distinct keys, ``--value-bytes`` hex values), in this
  process: MB of dirty log cleaned per second (dirty bytes / wall time of the whole pass:
  offset map, rewrite, fsync, swap), records per second, and the size after. Uncompressed
  and zstd-compressed batches.
* **produce while cleaning** - a real broker (``python -m odradek server``) starts with
  ``--busy-mb`` MB of dirty data in a compacted topic (written through the storage API, so
  the first pass starts at once); as soon as that pass is writing its cleaned segment,
  confluent-kafka produces ``--value-bytes`` records to another topic (acks=1) for
  ``--seconds``. Three broker set-ups: cleaner off, cleaner passes in the worker process (what
  the broker does), and - for contrast - passes in a thread of the broker process. "pass
  overlap" is the share of the produce window the cleaning pass covered (from the broker's
  log line), so a row only counts when the cleaner really ran alongside. Median of
  ``--runs`` runs each (the machine may be shared: the load average is printed).

Run::

    python benchmarks/cleanup_bench.py [--dirty-mb 32] [--busy-mb 96] [--seconds 3] [--runs 3]
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

from odradek.protocol.batch_builder import build_batch  # noqa: E402
from odradek.protocol.records import NewRecord  # noqa: E402
from odradek.storage import LogConfig, LogManager  # noqa: E402
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

COMPACT = {"cleanup.policy": "compact", "segment.bytes": str(16 << 20), "min.cleanable.dirty.ratio": "0.01"}


def fill_log(log, target_bytes: int, keys: int, value_bytes: int, codec: int, seed: int = 1) -> int:
    """Append keyed 100-record batches until the log holds ``target_bytes``; returns records."""
    rng = random.Random(seed)
    # Hex text: compresses about 2:1, like typical payloads (random bytes would not compress,
    # one repeated value would compress absurdly well).
    pool = [os.urandom(value_bytes // 2).hex().encode() for _ in range(4096)]
    n = 0
    while log.size < target_bytes:
        batch = build_batch(
            [NewRecord(b"key-%08d" % rng.randrange(keys), rng.choice(pool)) for _ in range(100)],
            compression=codec,
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


class Broker(BrokerProcess):
    """A broker whose cleaner runs its passes in threads of the broker process instead of its
    worker processes (``mode="thread"``): the design the worker process replaced, for contrast."""

    def __init__(self, *args, mode: str = "process", **kw):
        super().__init__(*args, **kw)
        self.mode = mode

    def command(self) -> list[str]:
        cmd = super().command()
        if self.mode != "thread":
            return cmd
        boot = (
            "import sys; import odradek.storage.cleaner_manager as m; init = m.LogCleaner.__init__; "
            "m.LogCleaner.__init__ = lambda self, *a, **k: init(self, *a, **{**k, 'use_processes': False}); "
            "from odradek.cli.main import cli; sys.argv[0] = 'odradek'; cli(prog_name='odradek')"
        )
        return [cmd[0], "-c", boot] + cmd[3:]


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


def produce_for(bootstrap: str, topic: str, seconds: float, value_bytes: int) -> tuple[float, float, int]:
    """Produce for ``seconds`` (acks=1); returns (start, end after the flush, delivered)."""
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
    p.produce(topic, value, on_delivery=on_delivery)  # connection and metadata
    p.flush(30)
    delivered[0] = 0
    t0 = time.time()
    i = 0
    while time.time() - t0 < seconds:
        for _ in range(1000):
            try:
                p.produce(topic, value, key=b"%d" % (i % 1000), on_delivery=on_delivery)
            except BufferError:
                p.poll(0.005)
            i += 1
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


def produce_row(base_dir: str, mode: str, seconds: float, value_bytes: int) -> dict:
    d = tempfile.mkdtemp(prefix="odradek-clean-bench-run-")
    try:
        data = os.path.join(d, "data")
        shutil.copytree(base_dir, data)
        os.sync()  # no writeback of the copy during the produce window
        overrides = {"log.cleaner.enable": str(mode != "disabled").lower(), "log.cleaner.backoff.ms": 100}
        broker = Broker(data, overrides=overrides, mode=mode)
        broker.start()
        busy_dir = os.path.join(data, "busy-0")
        try:
            time.sleep(1.0)  # the same settling time for every set-up
            if mode != "disabled":  # start producing once a pass is writing its cleaned segment
                deadline = time.time() + 60
                while (
                    not any(n.endswith(".cleaned") for n in os.listdir(busy_dir)) and time.time() < deadline
                ):
                    time.sleep(0.01)
            t0, t1, delivered = produce_for(broker.bootstrap_servers, "target", seconds, value_bytes)
            if mode != "disabled":
                deadline = time.time() + 120
                while cleaner_window(broker.log_text()) is None and time.time() < deadline:
                    time.sleep(0.2)
        finally:
            broker.stop()
        window = cleaner_window(broker.log_text()) if mode != "disabled" else None
        overlap = None
        if window is not None:
            overlap = max(0.0, min(t1, window[1]) - max(t0, window[0])) / (t1 - t0)
        return {
            "mode": mode,
            "msgs_s": delivered / (t1 - t0),
            "mb_s": delivered * value_bytes / 1e6 / (t1 - t0),
            "overlap": overlap,
            "pass_s": (window[1] - window[0]) if window else None,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _median_row(rows: list[dict]) -> dict:
    rows = sorted(rows, key=lambda r: r["msgs_s"])
    return rows[len(rows) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirty-mb", type=int, default=32)
    ap.add_argument("--busy-mb", type=int, default=96)
    ap.add_argument("--keys", type=int, default=50000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0, help="Produce window per run.")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    print(
        f"compaction throughput: {args.dirty_mb} MB dirty, {args.keys} keys, {args.value_bytes}-byte values"
    )
    print(
        f"{'codec':<6} {'dirty MB':>9} {'records':>9} {'seconds':>8} {'MB/s':>7} {'records/s':>10} {'MB after':>9}"
    )
    for codec in (0, 4):
        r = compaction_row(args.dirty_mb, args.keys, args.value_bytes, codec)
        print(
            f"{r['codec']:<6} {r['dirty_mb']:>9.1f} {r['records']:>9} {r['seconds']:>8.2f} {r['mb_s']:>7.1f} "
            f"{r['rec_s']:>10.0f} {r['after_mb']:>9.1f}"
        )
    print()
    print(
        f"produce throughput ({args.value_bytes} B records, acks=1, {args.seconds:.0f} s windows, median of "
        f"{args.runs}) while the broker compacts {args.busy_mb} MB of dirty data"
    )
    base = tempfile.mkdtemp(prefix="odradek-clean-bench-base-")
    try:
        prefill_broker_dir(os.path.join(base, "data"), args.busy_mb, args.keys, args.value_bytes)
        results: dict[str, list[dict]] = {"disabled": [], "process": [], "thread": []}
        for _ in range(args.runs):
            for mode in results:
                results[mode].append(
                    produce_row(os.path.join(base, "data"), mode, args.seconds, args.value_bytes)
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    names = {
        "disabled": "cleaner off",
        "process": "cleaning (worker process)",
        "thread": "cleaning (in-broker thread)",
    }
    print(f"{'cleaner':<28} {'msgs/s':>9} {'MB/s':>7} {'vs off':>7} {'pass overlap':>13} {'pass s':>7}")
    off = _median_row(results["disabled"])["msgs_s"]
    for mode, rows in results.items():
        r = _median_row(rows)
        busy = f"{r['overlap'] * 100:.0f}%" if r["overlap"] is not None else "-"
        pass_s = f"{r['pass_s']:.1f}" if r["pass_s"] is not None else "-"
        print(
            f"{names[mode]:<28} {r['msgs_s']:>9.0f} {r['mb_s']:>7.1f} {r['msgs_s'] / off:>7.2f} {busy:>13} {pass_s:>7}"
        )
    print(f"(machine load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
