"""Exactly-once consume-transform-produce (KIP-98's read-process-write loop).

::

    consumer = odradek.Consumer(bootstrap_servers=..., group_id="orders-enricher",
                                isolation_level="read_committed", enable_auto_commit=False)
    consumer.subscribe(["orders"])          # or assign(...)
    producer = odradek.Producer(bootstrap_servers=..., transactional_id="orders-enricher-0")
    run_exactly_once(consumer, producer, lambda rec: [("enriched", enrich(rec.value), rec.key)])

Each poll's records are transformed, the results sent, and the consumer's positions after
them committed — all in one transaction. If anything fails before the commit, the
transaction is aborted and the consumer goes back to its last committed positions, so every
input is reflected in the output exactly once, for read_committed readers. This holds
across crashes too: a new instance with the same ``transactional_id`` fences the old one
(whose late writes are refused) and aborts what it left open, and the committed offsets
only ever move together with the outputs of the records before them.

``transform(record)`` returns an iterable of outputs, each a ``(topic, value[, key[,
headers]])`` tuple or a dict of ``Producer.send`` arguments; None means no output.
One transactional id per concurrently running instance (e.g. one per input partition set).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from odradek.client.client_errors import ProducerFencedError
from odradek.client.structs import TopicPartition

log = logging.getLogger("odradek.client.exactly_once")


def _outputs(transform, record) -> Iterable:
    produced = transform(record)
    return () if produced is None else produced


def _next_offsets(records) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for r in records:
        tp = TopicPartition(r.topic, r.partition)
        if r.offset + 1 > out.get(tp, -1):
            out[tp] = r.offset + 1
    return out


def run_exactly_once(
    consumer,
    producer,
    transform: Callable,
    *,
    poll_timeout: float = 1.0,
    max_records: int | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_commit: Callable[[dict], None] | None = None,
) -> None:
    """Run the loop with the blocking clients until ``should_stop()`` (checked after each poll).

    Raises ProducerFencedError when another instance took over the transactional id.
    """
    producer.init_transactions()
    while not should_stop():
        records = consumer.poll(poll_timeout, max_records)
        if not records:
            continue
        offsets = _next_offsets(records)
        producer.begin_transaction()
        try:
            for record in records:
                for out in _outputs(transform, record):
                    if isinstance(out, dict):
                        producer.send(**out)
                    else:
                        producer.send(*out)
            producer.send_offsets_to_transaction(offsets, consumer)
            producer.commit_transaction()
        except ProducerFencedError:
            raise
        except Exception as exc:
            log.warning("transaction failed (%s); aborting and rewinding to the committed offsets", exc)
            producer.abort_transaction()
            _rewind(consumer, list(offsets))
            continue
        if on_commit is not None:
            on_commit(offsets)


async def arun_exactly_once(
    consumer,
    producer,
    transform: Callable,
    *,
    poll_timeout: float = 1.0,
    max_records: int | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_commit: Callable[[dict], None] | None = None,
) -> None:
    """``run_exactly_once`` for the asyncio clients (``odradek.aio``); ``transform`` may be async."""
    import inspect

    await producer.init_transactions()
    while not should_stop():
        records = await consumer.poll(poll_timeout, max_records)
        if not records:
            continue
        offsets = _next_offsets(records)
        producer.begin_transaction()
        try:
            for record in records:
                produced = transform(record)
                if inspect.isawaitable(produced):
                    produced = await produced
                for out in () if produced is None else produced:
                    if isinstance(out, dict):
                        await producer.send(**out)
                    else:
                        await producer.send(*out)
            await producer.send_offsets_to_transaction(offsets, consumer)
            await producer.commit_transaction()
        except ProducerFencedError:
            raise
        except Exception as exc:
            log.warning("transaction failed (%s); aborting and rewinding to the committed offsets", exc)
            await producer.abort_transaction()
            committed = await consumer.committed(list(offsets))
            _seek_committed(consumer, committed)
            continue
        if on_commit is not None:
            on_commit(offsets)


def _rewind(consumer, partitions: list[TopicPartition]) -> None:
    _seek_committed(consumer, consumer.committed(partitions))


def _seek_committed(consumer, committed: dict) -> None:
    for tp, om in committed.items():
        if om is not None:
            consumer.seek(tp, om.offset)
        elif consumer.config.get("auto_offset_reset") == "earliest":
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek_to_end(tp)


__all__ = ["arun_exactly_once", "run_exactly_once"]
