"""Fuzz targets: every decoder that reads bytes someone else wrote.

A target takes one input and returns quietly, or raises: that is a crash. Each decoder
may fail only in its documented way (``MalformedRequest`` for a request, Kafka's errors
for record batches, ``CorruptIndexError`` for an index, ...); any other exception, an
abort, or more decoded items than the input has bytes, is a defect. ``run_fuzz.py`` drives
these with atheris; ``test_fuzz.py`` runs each briefly and replays saved crashes.

Inputs, per target:

- ``frames``: a byte stream cut into receives by its first byte, into ``FrameReader``;
- ``request``: a request frame without its size prefix (header, then body), decoded as
  the broker does for the versions it advertises; Produce also through its fast lane;
- ``response``: api key and version (two int16) then a response frame, decoded as the
  client does;
- ``batch``: record batch bytes (v2 or a legacy message set) through the produce-path
  checks and the consumers' decoders;
- ``compressed``: codec, magic, then a payload for ``compression.decompress``;
- ``index``: the bytes of an ``.index`` / ``.timeindex`` / ``.txnindex`` / producer
  snapshot file, opened as the log does;
- ``checkpoint``: the bytes of an offset or leader-epoch checkpoint and of a
  ``meta.properties`` file.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import tempfile
from contextlib import suppress

from odradek.broker.handlers import load_all
from odradek.protocol import compression, errors, messages, produce_request
from odradek.protocol.frames import FrameReader, FrameTooLarge, InvalidFrameSize
from odradek.protocol.legacy_records import convert_legacy_to_v2, validate_legacy
from odradek.protocol.record_batch import RecordBatch, decode_batch, iter_batches, records_have_null_keys
from odradek.storage import LogConfig, checkpoint, producer_state, txn_index
from odradek.storage._index import CorruptIndexError
from odradek.storage.leader_epoch_cache import LeaderEpochFileCache
from odradek.storage.log_validator import LogValidator
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex

ADVERTISED = {key: range(spec.min_version, spec.max_version + 1) for key, spec in load_all().items()}
_HEAD = struct.Struct(">hh")
_WORKDIR = tempfile.mkdtemp(prefix="odradek-fuzz-")


def items_in(value) -> int:
    """Every tuple item and struct in a decoded message, nested ones included."""
    if isinstance(value, tuple):
        return len(value) + sum(items_in(v) for v in value if isinstance(v, tuple) or dataclasses.is_dataclass(v))
    if dataclasses.is_dataclass(value):
        return 1 + sum(items_in(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


def check_items(decoded, data: bytes) -> None:
    made = items_in(decoded)
    if made > len(data):
        raise AssertionError(f"{made} decoded items from {len(data)} bytes")


def frames(data: bytes) -> None:
    if not data:
        return
    chunk = data[0] % 97 + 1
    reader = FrameReader(max_frame_size=4096, min_buffer=64, busy_buffer=256)
    pos = 1
    try:
        while pos < len(data):
            buf = reader.get_buffer()
            if not len(buf):
                raise AssertionError("FrameReader offered an empty buffer: the transport would spin")
            n = min(len(buf), chunk, len(data) - pos)
            buf[:n] = data[pos : pos + n]
            pos += n
            for frame in reader.buffer_updated(n):
                if len(frame) > reader.max_frame_size:
                    raise AssertionError(f"frame of {len(frame)} bytes over the limit")
            held = max(len(reader._spare), len(reader._large))
            if held > max(2 * pos, 64 * 1024) or held > reader.max_frame_size:
                raise AssertionError(f"{held} bytes reserved for one frame after {pos} bytes received")
    except (FrameTooLarge, InvalidFrameSize):
        pass


def request(data: bytes) -> None:
    try:
        header, pos = messages.parse_request_header(data)
    except messages.MalformedRequest:
        return
    if header.api_key == messages.PRODUCE_KEY:
        lane = produce_request.parse_single_partition(data)  # None or the parts; never an exception
        if lane is not None and len(lane) != 6:
            raise AssertionError(f"fast lane returned {lane!r}")
    if header.api_version not in ADVERTISED.get(header.api_key, ()):
        return
    try:
        body = messages.decode_request_body(header, data, pos)
    except messages.MalformedRequest:
        return
    if header.api_key != messages.PRODUCE_KEY:  # Produce's own tuples hold views, not copies
        check_items(body, data)


def response(data: bytes) -> None:
    if len(data) < 4:
        return
    api_key, version = _HEAD.unpack_from(data)
    if version not in messages.known_versions(api_key) or (api_key == messages.PRODUCE_KEY and version < 3):
        return
    try:
        _, body = messages.decode_response(api_key, version, data[4:])
    except messages.MalformedResponse:
        return
    check_items(body, data)


def batch(data: bytes) -> None:
    for check in _BATCH_CHECKS:
        with suppress(errors.KafkaError):
            check(data)


def _every_batch(data: bytes) -> None:
    for b in iter_batches(data, check_crc=False):
        list(b)
        if isinstance(b, RecordBatch) and b.is_control:
            b.end_txn_marker()


_BATCH_CHECKS = [
    lambda data: LogValidator(LogConfig.from_dict({"max.message.bytes": str(1 << 20)}), "fuzz-0").check_batch(data),
    lambda data: list(decode_batch(data, 0, check_crc=False)),
    _every_batch,
    lambda data: validate_legacy(data, max_message_bytes=1 << 20),
    lambda data: convert_legacy_to_v2(data),
    lambda data: records_have_null_keys(data),
]


def compressed(data: bytes) -> None:
    if len(data) < 2:
        return
    with suppress(errors.KafkaError):
        compression.decompress(data[0] % 6, data[2:], magic=data[1] % 3)


def _file(name: str, data: bytes) -> str:
    path = os.path.join(_WORKDIR, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def index(data: bytes) -> None:
    path = _file("00000000000000000100.index", data)
    for cls, probes in ((OffsetIndex, (0, 100, 150, 1 << 40)), (TimeIndex, (-1, 0, 1 << 40))):
        idx = cls(path, 100, writable=False)
        try:
            idx.sanity_check()
            for probe in probes:
                idx.lookup(probe)
            for n in range(idx.entries):
                idx.entry(n)
        except CorruptIndexError:
            pass
        finally:
            idx.close()
    txn_index.read_entries(path)
    with suppress(producer_state.CorruptSnapshotError):
        producer_state.read_snapshot(path)


def checkpoint_files(data: bytes) -> None:
    path = _file("leader-epoch-checkpoint", data)
    with suppress(checkpoint.CheckpointError):
        checkpoint.read_offset_checkpoint(path)
    LeaderEpochFileCache(_WORKDIR).entries()  # a cache: anything unreadable is dropped, never raised
    _file(checkpoint.META_PROPERTIES, data)
    with suppress(checkpoint.CheckpointError):
        checkpoint.read_meta_properties(_WORKDIR)


TARGETS = {
    "frames": frames,
    "request": request,
    "response": response,
    "batch": batch,
    "compressed": compressed,
    "index": index,
    "checkpoint": checkpoint_files,
}
