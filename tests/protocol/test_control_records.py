"""Transaction markers (``control_records``): built, read back, skipped by consumers, checked."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from record_samples import (
    T0,
    check_batch,
)

from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.control_records import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    build_control_batch,
    decode_control_key,
    decode_end_txn_marker,
)
from odradek.protocol.record_batch import (
    decode_batch,
    iter_records,
)

# -- control batches ----------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_control_batches(control_type):
    data = build_control_batch(
        control_type, producer_id=11, producer_epoch=2, coordinator_epoch=7, base_offset=50, timestamp=T0
    )
    batch = decode_batch(data)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (11, 2, -1)
    assert batch.end_txn_marker() == EndTxnMarker(control_type, 7)
    (record,) = batch.records()
    assert record.offset == 50 and record.timestamp == T0
    assert decode_control_key(record.key) == (0, control_type)
    assert decode_end_txn_marker(record.value) == (0, 7)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 7)
    (theirs,) = list(KpBatch(bytearray(data)))  # kafka-python sees a ControlRecord
    assert theirs.type == control_type and (theirs.commit if control_type else theirs.abort)
    check_batch(data, from_client=False)
    with pytest.raises(errors.InvalidRecordError):
        check_batch(data)


def test_iter_records_skips_control_batches():
    stream = (
        build_batch(
            [(b"a", b"1", (), T0)], base_offset=0, producer_id=1, producer_epoch=0, transactional=True
        )
        + build_control_batch(COMMIT, producer_id=1, producer_epoch=0, base_offset=1)
        + build_batch([(b"b", b"2", (), T0)], base_offset=2)
    )
    assert [x.offset for x in iter_records(stream)] == [0, 2]
    assert [x.offset for x in iter_records(stream, include_control=True)] == [0, 1, 2]
    assert decode_batch(stream).end_txn_marker() is None


def test_control_key_errors():
    with pytest.raises(errors.InvalidRecordError):
        decode_control_key(b"\x00")
    with pytest.raises(errors.InvalidRecordError):
        decode_control_key(struct.pack(">hh", -1, 0))
    with pytest.raises(errors.InvalidRecordError):
        decode_end_txn_marker(None)
    assert decode_control_key(struct.pack(">hhxx", 3, 1)) == (3, 1)  # newer versions still readable
