"""Producer ids, unique for the life of the cluster.

Ids are taken from blocks reserved in the metadata store (Kafka reserves blocks of 1000
in ZooKeeper the same way), so a restart never hands out an id twice: the rest of a
reserved block is simply skipped.
"""

from __future__ import annotations

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store):
        self.store = store
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next = self.store.reserve_producer_id_block(BLOCK_SIZE)
            self._end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
