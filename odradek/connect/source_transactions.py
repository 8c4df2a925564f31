"""Connector-defined transaction boundaries (KIP-618, ``transaction.boundary=connector``).

A source task marks, from inside ``poll()``, where its transactions end: after a given record
(``commit_transaction(record)`` / ``abort_transaction(record)``) or after the batch ``poll()``
returns (no record). The worker asks after each record it sends and after each batch. An abort
drops the transaction's records but its offsets are still committed, so that the task does not
see the same records again (Kafka's rule). Asking for both on one record, or on one batch, is a
connector bug that fails the task: trusting either answer could lose data.
"""

from __future__ import annotations

import threading

from odradek.connect.api import TransactionContext
from odradek.connect.errors import ConnectException
from odradek.connect.records import SourceRecord

COMMIT, ABORT = "commit", "abort"


class WorkerTransactionContext(TransactionContext):
    def __init__(self) -> None:
        self._lock = threading.Lock()  # the task's thread asks, the event loop answers
        self._commit_records: set[int] = set()
        self._abort_records: set[int] = set()
        self._commit_batch = False
        self._abort_batch = False

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._commit_batch = True
            else:
                self._commit_records.add(id(record))

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._abort_batch = True
            else:
                self._abort_records.add(id(record))

    @property
    def has_record_requests(self) -> bool:
        return bool(self._commit_records or self._abort_records)

    def action_on(self, record: SourceRecord) -> str | None:
        """COMMIT or ABORT if the connector ended a transaction at ``record`` (asked once)."""
        key = id(record)
        with self._lock:
            commit, abort = key in self._commit_records, key in self._abort_records
            if commit and abort:
                raise ConnectException(
                    f"Connector requested both commit and abort of same record against topic/partition "
                    f"{record.topic}/{record.kafka_partition}")
            self._commit_records.discard(key)
            self._abort_records.discard(key)
        return COMMIT if commit else ABORT if abort else None

    def batch_action(self) -> str | None:
        """COMMIT or ABORT if the connector ended the transaction with the last batch (asked once)."""
        with self._lock:
            commit, abort = self._commit_batch, self._abort_batch
            if commit and abort:
                raise ConnectException("Connector requested both commit and abort of same transaction")
            self._commit_batch = self._abort_batch = False
        return COMMIT if commit else ABORT if abort else None
