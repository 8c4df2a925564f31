"""FrameReader: frames reassembled from any split, memory that follows the bytes received."""

from __future__ import annotations

import random
import struct

import pytest

from odradek.protocol.frames import LARGE_CHUNK, FrameReader, FrameTooLarge, InvalidFrameSize

MiB = 1 << 20


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def feed(reader: FrameReader, data: bytes, chunk: int) -> list[bytes]:
    """Deliver ``data`` as a transport would, at most ``chunk`` bytes per receive."""
    frames = []
    pos = 0
    while pos < len(data):
        room = reader.get_buffer()
        assert len(room) > 0
        n = min(len(room), chunk, len(data) - pos)
        room[:n] = data[pos : pos + n]
        pos += n
        frames.extend(bytes(f) for f in reader.buffer_updated(n))
    return frames


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 1000, 8192, 65536, 1 << 30])
def test_frames_survive_any_split(chunk):
    rng = random.Random(chunk)
    sizes = [0, 1, 4, 100, 8188, 8189, 9000, 70_000, 2, 5]
    if chunk > 100:  # byte-by-byte delivery of megabytes would only make the test slow
        sizes += [300_000, 1_000_000, 3]
    payloads = [rng.randbytes(n) for n in sizes]
    reader = FrameReader(4 * MiB)
    assert feed(reader, b"".join(framed(p) for p in payloads), chunk) == payloads
    assert reader.buffered == 0


def test_random_streams_reassemble():
    rng = random.Random(7)
    for _ in range(30):
        payloads = [
            rng.randbytes(rng.choice([0, 10, 5000, 20_000, 200_000])) for _ in range(rng.randint(1, 12))
        ]
        data = b"".join(framed(p) for p in payloads)
        reader = FrameReader(MiB, min_buffer=rng.choice([16, 1024, 8192]))
        frames, pos = [], 0
        while pos < len(data):
            room = reader.get_buffer()
            n = min(len(room), rng.randint(1, 70_000), len(data) - pos)
            room[:n] = data[pos : pos + n]
            pos += n
            frames.extend(bytes(f) for f in reader.buffer_updated(n))
        assert frames == payloads


def test_announced_size_allocates_nothing_until_bytes_arrive():
    reader = FrameReader(200 * MiB)
    assert feed(reader, struct.pack(">i", 100 * MiB) + b"x", 1 << 30) == []
    reader.get_buffer()  # the transport asks where the next bytes go
    assert reader.capacity <= 128 * 1024
    assert reader.outgrowing_frame() == 100 * MiB


def test_large_frame_buffer_grows_with_the_bytes_received():
    reader = FrameReader(200 * MiB)
    data = framed(b"z" * (20 * MiB))
    received = 0
    frames = []
    while received < len(data):
        room = reader.get_buffer()
        n = min(len(room), 256 * 1024, len(data) - received)
        room[:n] = data[received : received + n]
        received += n
        frames.extend(reader.buffer_updated(n))
        if not frames:  # its bytes plus at most one chunk's unfilled room
            assert reader.capacity <= received + LARGE_CHUNK + 64 * 1024
    assert len(frames) == 1 and bytes(frames[0]) == b"z" * (20 * MiB)


def test_large_buffer_is_reused_for_the_next_large_frame():
    reader = FrameReader(8 * MiB)
    first = framed(b"a" * MiB)
    assert feed(reader, first, 1 << 30) == [b"a" * MiB]
    held = reader.capacity
    for fill in b"bcd":
        assert feed(reader, framed(bytes([fill]) * MiB), 1 << 30) == [bytes([fill]) * MiB]
        assert reader.capacity == held


def test_very_large_frame_buffer_is_released_after_use():
    reader = FrameReader(64 * MiB, keep_large=4 * MiB)
    assert feed(reader, framed(b"q" * (16 * MiB)), 1 << 30) == [b"q" * (16 * MiB)]
    assert reader.capacity <= 256 * 1024


def test_busy_connection_buffer_grows_then_release_gives_it_back():
    reader = FrameReader(MiB, min_buffer=8192, busy_buffer=65536)
    stream = b"".join(framed(b"m" * 100) for _ in range(5000))
    assert len(feed(reader, stream, 1 << 30)) == 5000
    assert reader.capacity == 65536
    assert reader.release()
    assert reader.capacity == 0
    # It starts small again and still works.
    assert feed(reader, framed(b"again"), 1 << 30) == [b"again"]
    assert reader.capacity == 8192


def test_release_keeps_a_partial_frame():
    reader = FrameReader(MiB)
    data = framed(b"p" * 50_000)
    assert feed(reader, data[:30_000], 1 << 30) == []
    assert not reader.release()
    assert feed(reader, data[30_000:], 1 << 30) == [b"p" * 50_000]
    assert reader.release()


def test_caller_may_stop_between_frames_and_resume_later():
    reader = FrameReader(MiB)
    data = b"".join(framed(bytes([i]) * 10) for i in range(5))
    room = reader.get_buffer()
    room[: len(data)] = data
    reader.received(len(data))
    assert bytes(reader.next_frame()) == bytes([0]) * 10
    assert bytes(reader.next_frame()) == bytes([1]) * 10
    assert reader.buffered == 3 * 14
    # ... later, before receiving again, the rest is still there.
    assert [bytes(reader.next_frame()) for _ in range(3)] == [bytes([i]) * 10 for i in (2, 3, 4)]
    assert reader.next_frame() is None


def test_bad_sizes_are_refused():
    with pytest.raises(InvalidFrameSize):
        feed(FrameReader(MiB), struct.pack(">i", -5), 1 << 30)
    with pytest.raises(FrameTooLarge) as info:
        feed(FrameReader(MiB), struct.pack(">i", MiB + 1), 1 << 30)
    assert info.value.size == MiB + 1 and info.value.limit == MiB
