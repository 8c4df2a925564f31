"""Seed inputs of each fuzz target: the recorded corpus (tests/fuzz/corpus, real clients'
bytes) and inputs generated here, so that every schema and file format starts covered.

``write_seeds(target, directory)`` fills ``directory`` for one target; deterministic.
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from odradek.properties import format_properties
from odradek.protocol import compression, messages
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.records import NewRecord
from odradek.storage import producer_state, txn_index

sys.path.insert(0, str(Path(__file__).parent.parent / "protocol"))
from fuzz_targets import ADVERTISED  # noqa: E402
from kio_samples import sample  # noqa: E402

CORPUS = Path(__file__).parent / "corpus"
_SIZE = struct.Struct(">i")


def recorded(kind: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((CORPUS / kind).iterdir())]


def advertised_kio_versions():
    """(api key, version) of every version the broker advertises that kio has a schema for."""
    for api_key, versions in sorted(ADVERTISED.items()):
        for version in versions:
            if not (api_key == messages.PRODUCE_KEY and version < 3):
                yield api_key, version


def request_seeds() -> list[bytes]:
    rng = random.Random(12)
    out = recorded("requests")
    for api_key, version in advertised_kio_versions():
        entity = sample(messages.request_class(api_key, version), rng)
        out.append(messages.encode_request(api_key, version, 7, "fuzz", entity)[4:])
    return out


def response_seeds() -> list[bytes]:
    rng = random.Random(13)
    out = recorded("responses")
    for api_key, version in advertised_kio_versions():
        entity = sample(messages.response_class(api_key, version), rng)
        out.append(struct.pack(">hh", api_key, version) + messages.encode_response(api_key, version, 7, entity)[4:])
    return out


def frame_seeds() -> list[bytes]:
    frames = [_SIZE.pack(len(f)) + f for f in recorded("requests")[:12]]
    return [bytes([n]) + b"".join(frames[n : n + 3]) for n in range(0, 12, 3)]


def batch_seeds() -> list[bytes]:
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

    out = recorded("batches")
    rows = [NewRecord(key=f"k{i}".encode(), value=b"v" * i, headers=[("h", b"x")]) for i in range(4)]
    for codec in compression.CODEC_NAMES:
        out.append(build_batch(rows, compression=codec))
    for magic, codec in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]:  # no lz4 in magic 0
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i in range(3):
            builder.append(i, timestamp=1_700_000_000_000 + i if magic else None, key=b"k", value=b"legacy")
        out.append(bytes(builder.build()))
    return out


def compressed_seeds() -> list[bytes]:
    text = b"odradek fuzz seed " * 20
    return [bytes([codec, magic]) + compression.compress(codec, text) for codec in range(5) for magic in (0, 2)]


def index_seeds() -> list[bytes]:
    offsets = b"".join(struct.pack(">ii", rel, rel * 100) for rel in range(1, 20))
    times = b"".join(struct.pack(">qi", 1_700_000_000_000 + rel, rel) for rel in range(1, 20))
    work = Path(__import__("tempfile").mkdtemp(prefix="odradek-seeds-"))
    txn = work / "t.txnindex"
    txn_index.write_entries(str(txn), [txn_index.AbortedTxn(7, 10, 20, 15)], sync=False)
    snapshot = work / "s.snapshot"
    entry = producer_state.ProducerStateEntry(42, 1)
    producer_state.write_snapshot(str(snapshot), [entry])
    return [offsets, times, offsets + b"\x00" * 16, txn.read_bytes(), snapshot.read_bytes()]


def checkpoint_seeds() -> list[bytes]:
    return [
        b"0\n2\nmy-topic 0 1234\nmy-topic 1 99\n",
        b"0\n3\n0 0\n1 250\n4 1000\n",
        format_properties({"version": "1", "node.id": "0", "cluster.id": "abc=:#"}).encode("latin-1"),
    ]


SEEDS = {
    "frames": frame_seeds,
    "request": request_seeds,
    "response": response_seeds,
    "batch": batch_seeds,
    "compressed": compressed_seeds,
    "index": index_seeds,
    "checkpoint": checkpoint_seeds,
}


def write_seeds(target: str, directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    seeds = SEEDS[target]()
    for n, data in enumerate(seeds):
        (directory / f"seed-{n:04d}").write_bytes(data)
    return len(seeds)
