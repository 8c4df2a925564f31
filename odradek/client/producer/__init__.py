"""The asyncio producer and its parts, after aiokafka's layout.

``producer.py`` is ``Producer`` (the public asyncio class; ``odradek.aio.Producer``), which
owns the rest: ``accumulator.py`` (records into per-partition batches; data, no tasks),
``sender.py`` (the one task that drains ready batches into Produce requests),
``partitioner.py`` (which partition a record goes to) and ``transactions.py``
(idempotence and transactions: producer ids, epochs, the transaction state machine).

Nothing is imported here, so that ``odradek.client.producer.partitioner`` stays light.
"""
