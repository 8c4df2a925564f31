"""What every pipeline takes: where the broker is, where checkpoints go, how it triggers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    checkpoint: str = "odradek-checkpoints"
    trigger: str | None = "5 seconds"  # processing-time interval; ignored when available_now
    available_now: bool = False  # process what is there now, then stop
    starting_offsets: str = "earliest"
    source_options: dict = field(default_factory=dict)  # extra options for the odradek source

    def checkpoint_dir(self, name: str) -> str:
        return str(Path(self.checkpoint) / name)

    def source(self, spark, topic: str):
        reader = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", self.starting_offsets)
        )
        for key, value in self.source_options.items():
            reader = reader.option(key, value)
        return reader.load()

    def spark_trigger(self) -> dict | None:
        """The trigger as ``DataStreamWriter.trigger`` keyword arguments (None: Spark's default)."""
        if self.available_now:
            return {"availableNow": True}
        return {"processingTime": self.trigger} if self.trigger else None

    def triggered(self, writer):
        if self.available_now:
            return writer.trigger(availableNow=True)
        if self.trigger:
            return writer.trigger(processingTime=self.trigger)
        return writer


_UNITS_MS = {
    "ms": 1,
    "millisecond": 1,
    "s": 1000,
    "sec": 1000,
    "second": 1000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
}


def interval_ms(text: str) -> int:
    """``"1 minute"``, ``"10 seconds"``, ``"500 ms"``, ``"2h"`` in milliseconds (ValueError otherwise)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]+)\s*", text.lower())
    word = match.group(2) if match else ""
    unit = _UNITS_MS.get(word) or (_UNITS_MS.get(word[:-1]) if word.endswith("s") else None)
    if not match or not unit:
        raise ValueError(f"{text!r} is not a duration such as '1 minute', '10 seconds' or '500 ms'")
    return int(match.group(1)) * unit
