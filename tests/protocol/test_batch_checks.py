"""The produce path's checks of a v2 batch (``batch_checks``), each with Kafka's error."""

from __future__ import annotations

import pytest
from record_samples import (
    patched,
    sample,
)

from odradek.protocol import batch as b
from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.batch_checks import validate_batch

# -- validation ---------------------------------------------------------------------------


def test_validate_batch_accepts_good_batches():
    data = build_batch(sample(), compression=codecs.SNAPPY, producer_id=1, producer_epoch=0, base_sequence=0)
    h = validate_batch(data, max_message_bytes=len(data))
    assert h == b.read_header(data)
    padded = b"\x00" * 7 + data
    assert validate_batch(padded, 7, b.read_header(padded, 7), max_message_bytes=len(data)) == h


def test_validate_batch_errors():
    data = build_batch(sample(3), producer_id=1, producer_epoch=0, base_sequence=0)
    mb = 1 << 20
    cases = [
        (patched(data, ">b", 16, 3, fix_crc=False), errors.CorruptMessageError),  # unknown magic
        (patched(data, ">b", 16, 1, fix_crc=False), errors.InvalidRecordError),  # legacy magic
        (data[:-1], errors.CorruptMessageError),  # truncated
        (patched(data, ">i", 8, 40), errors.CorruptMessageError),  # shorter than a header
        (patched(data, ">i", 57, 2), errors.InvalidRecordError),  # count != lastOffsetDelta + 1
        (patched(data, ">i", 57, 0), errors.InvalidRecordError),  # empty from a client
        (patched(data, ">i", 23, -1), errors.InvalidRecordError),  # invalid offset range
        (patched(data, ">h", 21, 5), errors.UnsupportedCompressionTypeError),
        (patched(data, ">h", 21, b.CONTROL_BIT), errors.InvalidRecordError),  # control from a client
        (patched(data, ">i", 53, -1), errors.InvalidRecordError),  # producer id without sequence
        (data[:40], errors.CorruptMessageError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            validate_batch(bad, max_message_bytes=mb)
    with pytest.raises(errors.MessageTooLargeError):
        validate_batch(data, max_message_bytes=len(data) - 1)
    # the broker's own batches (replication, recovery) may have compaction gaps
    gappy = patched(data, ">i", 57, 2)
    assert validate_batch(gappy, max_message_bytes=mb, from_client=False).record_count == 2
    with pytest.raises(errors.InvalidRecordError):
        validate_batch(patched(data, ">i", 57, 4), max_message_bytes=mb, from_client=False)
