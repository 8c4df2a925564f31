"""Checking a log's files batch by batch: every CRC, offsets in order, the framing to the end.

The broker re-validates only what a crash may have torn (segments past the recovery point,
see log.Log); a bit flipped inside an older segment is served as it is, as in Kafka, until a
consumer's CRC check trips on it. ``verify_segment`` reads a whole ``.log`` (read-only, safe
next to a running broker) and reports each batch that fails its CRC or the stored-batch
rules (segment.stored_batch_problem), an offset that goes backwards, and bytes at the end that do
not frame a batch. ``odradek verify-log`` (cli/verify_log.py) runs it over log dirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .file_records import FileRecords
from .segment import LOG_SUFFIX, batch_last_offset, stored_batch_problem

_CHUNK = 1 << 20


@dataclass
class Problem:
    """One thing wrong in a ``.log`` file, where it is and why (read-only checks)."""

    path: str
    position: int
    offset: int  # the batch's base offset, or the next expected offset for a bad tail
    reason: str


@dataclass
class SegmentReport:
    """What ``verify_segment`` found in one ``.log`` file (read-only, safe next to a
    running broker)."""

    path: str
    base_offset: int
    size: int
    batches: int = 0
    next_offset: int = 0  # after the last readable batch
    problems: list[Problem] = field(default_factory=list)


def verify_segment(path: str, expected_first: int | None = None) -> SegmentReport:
    """Check every batch of the ``.log`` at ``path``; ``expected_first`` is the offset the
    previous segment ended at (its batches must not go below it)."""
    base = int(os.path.basename(path)[:20])
    records = FileRecords.open_read_only(path)
    try:
        report = SegmentReport(path, base, records.size, next_offset=base)
        floor = base if expected_first is None else max(base, expected_first)
        end = 0
        for pos, buf, rel, size in records.batches(0, chunk_size=_CHUNK, full=True):
            first = int.from_bytes(buf[rel : rel + 8], "big", signed=True)
            reason = stored_batch_problem(buf, rel, size, base)
            if reason is None and first < floor:
                reason = f"offset {first} is below the offset {floor} the log had reached"
            if reason is not None:
                report.problems.append(Problem(path, pos, first, reason))
            report.batches += 1
            last = batch_last_offset(buf, rel)
            if last + 1 > report.next_offset:
                report.next_offset = last + 1
            floor = max(floor, last + 1)
            end = pos + size
        if end < records.size:
            report.problems.append(
                Problem(
                    path,
                    end,
                    report.next_offset,
                    f"{records.size - end} bytes at the end do not frame a complete batch (a torn write or damage)",
                )
            )
        return report
    finally:
        records.close()


def batch_positions(path: str) -> list[tuple[int, int, int]]:
    """``(position, base offset, size)`` of each framed batch of a ``.log`` file, unchecked."""
    records = FileRecords.open_read_only(str(path))
    try:
        return [
            (pos, int.from_bytes(buf[rel : rel + 8], "big"), size)
            for pos, buf, rel, size in records.batches()
        ]
    finally:
        records.close()


def segment_files(partition_dir: str) -> list[str]:
    """The partition's ``.log`` files in offset order."""
    names = [
        n for n in os.listdir(partition_dir) if n.endswith(LOG_SUFFIX) and n[:20].isdigit() and len(n) == 24
    ]
    return [os.path.join(partition_dir, n) for n in sorted(names)]


def verify_partition(partition_dir: str) -> list[SegmentReport]:
    """Every segment of one partition dir, each checked against where the previous one ended."""
    reports = []
    expected = None
    for path in segment_files(partition_dir):
        report = verify_segment(path, expected)
        reports.append(report)
        expected = report.next_offset
    return reports
