"""What every pipeline takes: where the broker is, where checkpoints go, how it triggers."""

from __future__ import annotations

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
