"""A plain producer for the pipelines' tools (the page-view generator, benchmarks).

The sink's batching and routing without Spark: records go to ``partition`` when given,
else by ``murmur2(key)``, else by ``crc32(value)``; ``flush`` sends what is buffered
and waits for the broker's acknowledgements (acks=all by default).
"""

from __future__ import annotations

from odradek.pipeline.options import write_options
from odradek.pipeline.sink import Sender, _Router


class Publisher:
    def __init__(self, bootstrap_servers: str, topic: str, *, batch_bytes: int = 1 << 20, acks: str = "all"):
        self.opts = write_options(
            {
                "kafka.bootstrap.servers": bootstrap_servers,
                "topic": topic,
                "kafka.batch.size": str(batch_bytes),
                "kafka.acks": acks,
            },
            streaming=False,
        )
        self.cluster = self.opts.cluster()
        self.router = _Router(self.cluster, self.opts)
        self.sender = Sender(self.cluster, self.opts, None)

    def send(
        self, value: bytes | None, key: bytes | None = None, headers=(), partition: int | None = None
    ) -> None:
        tp = self.router.route(None, partition, key, value)
        self.sender.add(tp, key, value, tuple(headers))

    def flush(self) -> None:
        self.sender.flush()

    @property
    def sent(self) -> int:
        return self.sender.rows

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.cluster.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
