"""Produce requests packed by hand, as buffers for ``writelines``: no copy of the batches.

The produce path sends megabytes per request; building it through the generic kio
writer would copy every batch several times (into a BytesIO, out of it, into the frame).
Here the header and the small fields are packed with ``struct`` and each batch's bytes
(header + records, kept as separate buffers by the accumulator) go to the transport as
they are. Layout (KIP-482 for the flexible versions 9+)::

    size int32 | api_key int16 | api_version int16 | correlation_id int32 |
    client_id string16 [| tagged fields (v9+)] |
    transactional_id nullable string | acks int16 | timeout_ms int32 |
    [topic: name string, [partition: index int32, records nullable bytes [| tags]] [| tags]]
    [| tags]

where v3-v8 use int16/int32 length prefixes and v9+ compact (uvarint length + 1) ones.
``tests/protocol/test_hot_requests.py`` checks the bytes against kio's encoding.
"""

from __future__ import annotations

import struct

from odradek.protocol.api_keys import PRODUCE
from odradek.protocol.varint import encode_unsigned_varint

_HEAD = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


def _uvarint(n: int) -> bytes:
    return encode_unsigned_varint(n)


def produce_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    acks: int,
    timeout_ms: int,
    topic_data: list[tuple[str, list[tuple[int, list]]]],
    transactional_id: str | None = None,
) -> list:
    """The whole frame as a list of buffers. ``topic_data``: ``[(topic, [(partition, [buffers])])]``."""
    flexible = version >= 9
    cid = b"" if client_id is None else client_id.encode()
    body: list = [b""]  # placeholder for the header
    out = []
    if flexible:
        if transactional_id is None:
            out.append(b"\x00")
        else:
            t = transactional_id.encode()
            out.append(_uvarint(len(t) + 1) + t)
        out.append(_ACKS_TIMEOUT.pack(acks, timeout_ms))
        out.append(_uvarint(len(topic_data) + 1))
        for name, partitions in topic_data:
            n = name.encode()
            out.append(_uvarint(len(n) + 1) + n + _uvarint(len(partitions) + 1))
            for index, buffers in partitions:
                size = sum(len(b) for b in buffers)
                out.append(_INT32.pack(index) + _uvarint(size + 1))
                out.extend(buffers)
                out.append(b"\x00")  # partition tags
            out.append(b"\x00")  # topic tags
        out.append(b"\x00")  # request tags
    else:
        if transactional_id is None:
            out.append(b"\xff\xff")
        else:
            t = transactional_id.encode()
            out.append(_INT16.pack(len(t)) + t)
        out.append(_ACKS_TIMEOUT.pack(acks, timeout_ms))
        out.append(_INT32.pack(len(topic_data)))
        for name, partitions in topic_data:
            n = name.encode()
            out.append(_INT16.pack(len(n)) + n + _INT32.pack(len(partitions)))
            for index, buffers in partitions:
                size = sum(len(b) for b in buffers)
                out.append(_INT32.pack(index) + _INT32.pack(size))
                out.extend(buffers)
    header_tail = cid + (b"\x00" if flexible else b"")
    total = _HEAD.size - 4 + len(header_tail) + sum(len(b) for b in out)
    body[0] = (
        _HEAD.pack(total, PRODUCE, version, correlation_id, len(cid) if client_id is not None else -1)
        + header_tail
    )
    body.extend(out)
    return body
