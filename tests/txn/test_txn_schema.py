"""``__transaction_state`` records, byte for byte as Kafka writes them, and the state table."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.txn import transaction_state_schema as schema
from odradek.broker.txn.transaction_metadata import TxnMetadata
from odradek.broker.txn.transaction_state import (
    BY_ID,
    COMPLETE_ABORT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    IllegalTxnTransition,
    TxnState,
)
from odradek.protocol import errors
from odradek.protocol.varint import encode_unsigned_varint as uv


def test_key_is_version_0_and_a_string():
    assert schema.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert schema.decode_key(b"\x00\x00\x00\x02tx") == "tx"
    with pytest.raises(errors.CorruptMessageError):
        schema.decode_key(b"\x00\x01\x00\x02tx")


def test_value_v0_layout_and_round_trip():
    value = schema.TxnLogValue(7, 3, 60000, ONGOING.id, (("a", (0, 2)), ("b", (1,))), 1000, 900)
    raw = schema.encode_value(value)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 2)
        + b"\x00\x01b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1000, 900)
    )
    assert raw == expected
    assert schema.decode_value(raw) == value


def test_value_v1_flexible_with_tagged_fields_is_read():
    tags = uv(2) + uv(0) + uv(8) + struct.pack(">q", 5) + uv(2) + uv(2) + struct.pack(">h", 2)
    raw = (
        struct.pack(">hqhib", 1, 7, 3, 60000, 4)
        + uv(2)
        + uv(2)
        + b"a"
        + uv(2)
        + struct.pack(">i", 0)
        + b"\x00"
        + struct.pack(">qq", 1000, 900)
        + tags
    )
    value = schema.decode_value(raw)
    assert value.status == 4 and value.partitions == (("a", (0,)),)
    assert value.previous_producer_id == 5
    meta = TxnMetadata.from_value("tx", value)
    assert meta.state is TxnState.COMPLETE_COMMIT and meta.partitions == frozenset({("a", 0)})


def test_state_ids_and_names_are_kafkas():
    assert [(s.id, str(s)) for s in sorted(TxnState, key=lambda s: s.id)] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert BY_ID[3] is PREPARE_ABORT


def test_transitions_follow_the_table():
    meta = TxnMetadata("tx", 1, 0, 60000)
    ongoing = meta.transit(ONGOING, 5, partitions=frozenset({("t", 0)}), start_ms=5)
    prepared = ongoing.transit(PREPARE_COMMIT, 6)
    with pytest.raises(IllegalTxnTransition):
        prepared.transit(COMPLETE_ABORT, 7)
    with pytest.raises(IllegalTxnTransition):
        meta.transit(PREPARE_COMMIT, 7)  # nothing to commit
    with pytest.raises(IllegalTxnTransition):
        prepared.transit(EMPTY, 7)  # markers first
    assert (
        TxnMetadata.from_value("tx", schema.decode_value(schema.encode_value(prepared.to_value())))
        == prepared
    )
