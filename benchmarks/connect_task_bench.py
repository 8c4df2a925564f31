"""The Connect worker's own CPU per record, without a broker: what a FileStreamSource →
FileStreamSink copy costs in the worker beside the producer and consumer it shares with the raw
client (benchmarks/connect_bench.py runs the whole path on a broker).

Source side: ``poll()`` (FileStreamSourceTask reading lines into SourceRecords), the converters
(``TaskPlumbing.source_convert_all``) and the offset bookkeeping of ``WorkerSourceTask``. Sink
side: the converters into SinkRecords (``sink_convert_all``), the offset bookkeeping of
``WorkerSinkTask`` and ``put()`` (FileStreamSinkTask writing the lines). Beside them, the raw
client's equivalent work: reading the lines, and decoding and writing the values. Each figure
is this process's CPU time (not wall time: the machine may be shared), the best of
``--repeat`` runs. With ``--transform`` the records also go through a transform
(the per-record path under the error handler).

    python benchmarks/connect_task_bench.py
    python benchmarks/connect_task_bench.py --converter json --records 100000
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "connect"))
from connect_support import task_plumbing  # noqa: E402

from odradek.client.structs import ConsumerRecord  # noqa: E402
from odradek.connect.file_stream import FileStreamSinkTask, FileStreamSourceTask  # noqa: E402
from odradek.connect.standalone import GC_THRESHOLDS  # noqa: E402
from odradek.connect.task_plumbing import TaskPlumbing  # noqa: E402
from odradek.connect.worker_tasks import WorkerSinkTask, WorkerSourceTask  # noqa: E402

CONVERTERS = {
    "string": "org.apache.kafka.connect.storage.StringConverter",
    "json": "org.apache.kafka.connect.json.JsonConverter",
}
TRANSFORM = {"transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
             "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1"}


class _NoOffsets:
    def offset(self, partition):
        return None


class _Context:
    offset_storage_reader = _NoOffsets()

    def configs(self):
        return {}


def plumbing(directory: Path, converter: str, connector_config: dict[str, str]) -> TaskPlumbing:
    return task_plumbing(directory, connector_config, CONVERTERS[converter])


def best(repeat: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeat))


def source_side(directory: Path, source: Path, converter: str, connector: dict[str, str]) -> float:
    """Seconds for poll + convert + offsets over the whole file (each batch dropped once done,
    as the worker drops it once handed to the producer)."""
    task = FileStreamSourceTask()
    task.initialize(_Context())
    task.start({"file": str(source), "topic": "bench", **connector})
    runner = WorkerSourceTask("bench", 0, task, {}, plumbing(directory, converter, connector), lambda r: None)
    runner.offsets = {}
    task.stopped.set()  # at the end of the file poll() returns at once instead of waiting for lines
    started = time.process_time()
    while polled := task.poll():
        runner._convert(polled)
        runner._track_offsets(polled)
    elapsed = time.process_time() - started
    task.stop()
    return elapsed


def sink_side(directory: Path, consumed: list, converter: str, connector: dict[str, str], batch: int) -> float:
    task = FileStreamSinkTask()
    task.initialize(_Context())
    task.start({"file": str(directory / "sink.txt")})
    runner = WorkerSinkTask("bench", 0, task, {}, plumbing(directory, converter, connector), lambda r: None)
    runner.context()
    started = time.process_time()
    for first in range(0, len(consumed), batch):
        records = consumed[first:first + batch]
        task.put(runner.plumbing.sink_convert_all(records))
        runner._track_offsets(records)
    task.flush({})
    elapsed = time.process_time() - started
    task.stop()
    return elapsed


def raw_source(source: Path) -> float:
    started = time.process_time()
    with open(source, "rb") as f:
        values = [line.rstrip(b"\n") for line in f]
    del values
    return time.process_time() - started


def raw_sink(directory: Path, consumed: list, batch: int) -> float:
    started = time.process_time()
    with open(directory / "raw.txt", "w", encoding="utf-8") as out:
        for first in range(0, len(consumed), batch):
            out.write("".join(r.value.decode() + "\n" for r in consumed[first:first + batch]))
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line (newline included)")
    parser.add_argument("--converter", choices=sorted(CONVERTERS), default="string")
    parser.add_argument("--batch", type=int, default=2000, help="records per put (a fetched batch)")
    parser.add_argument("--transform", action="store_true", help="also run a RegexRouter on every record")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    connector = dict(TRANSFORM) if args.transform else {}

    with tempfile.TemporaryDirectory(prefix="connect-task-bench-") as tmp:
        directory = Path(tmp)
        source = directory / "source.txt"
        body = "x" * (args.size - 12)
        with open(source, "w") as out:
            out.writelines(f"{i:010d} {body}\n" for i in range(args.records))
        task = FileStreamSourceTask()
        task.initialize(_Context())
        task.start({"file": str(source), "topic": "bench"})
        task.stopped.set()
        polled = [r for batch in iter(task.poll, None) for r in batch]
        converted = plumbing(directory, args.converter, {}).source_convert_all(polled)
        consumed = [ConsumerRecord("bench", 0, i, 1_700_000_000_000, 0, key, value)
                    for i, (_, _, key, value, _) in enumerate(converted)]
        del polled, converted
        gc.collect()
        gc.freeze()  # the consumed records stand for a fetch's: not the cyclic collector's to scan
        gc.set_threshold(*GC_THRESHOLDS)  # as the worker runs
        rows = [
            ("source: poll + convert + offsets",
             best(args.repeat, lambda: source_side(directory, source, args.converter, connector))),
            ("sink: convert + put + offsets",
             best(args.repeat, lambda: sink_side(directory, consumed, args.converter, connector, args.batch))),
            ("raw client: read lines", best(args.repeat, lambda: raw_source(source))),
            ("raw client: decode + write", best(args.repeat, lambda: raw_sink(directory, consumed, args.batch))),
        ]
    shown = f"converter {args.converter}" + (", one transform" if args.transform else ", no transform")
    print(f"{args.records:,} records of {args.size} bytes, {shown}")
    print(f"{'stage':<36}{'CPU s':>9}{'µs/record':>11}")
    for label, seconds in rows:
        print(f"{label:<36}{seconds:>9.3f}{seconds / args.records * 1e6:>11.2f}")
    worker = rows[0][1] + rows[1][1]
    raw = rows[2][1] + rows[3][1]
    print(f"worker's own work {worker / args.records * 1e6:.2f} µs/record, the raw client's {raw / args.records * 1e6:.2f}"
          " (the producer and consumer, the same on both paths, are not included)")


if __name__ == "__main__":
    main()
