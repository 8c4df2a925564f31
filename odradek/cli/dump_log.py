"""``odradek dump-log``: Kafka's kafka-dump-log (DumpLogSegments) for Odradek's (= Kafka's) files.

Reads files only (never opens them for writing), so it is safe on a running broker's dir.

* ``.log``: one line per batch — baseOffset lastOffset count baseSequence lastSequence
  producerId producerEpoch partitionLeaderEpoch isTransactional isControl deleteHorizonMs
  position CreateTime/LogAppendTime size magic compresscodec crc isvalid — and, with
  ``--deep-iteration`` or ``--print-data-log``, one ``|`` line per record (offset, timestamp,
  keySize, valueSize, sequence, headerKeys; with ``--print-data-log`` also key and payload,
  or the marker of a control record). Torn or corrupt tails are reported, as are offset gaps
  (normal in compacted logs) under deep iteration.
* ``.index`` / ``.timeindex``: the entries, each checked against the ``.log`` beside it
  (mismatches are listed on stderr at the end, in Kafka's words); ``--index-sanity-check``
  only checks, ``--verify-index-only`` checks without printing entries.
* ``.snapshot``: producer state entries.

Suffixes ``.deleted``, ``.cleaned`` and ``.swap`` are looked through.
"""

from __future__ import annotations

import os
import struct
import sys

import click

from odradek.protocol import batch as batch_header
from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.control_records import decode_control_key, decode_end_txn_marker
from odradek.protocol.legacy_records import LegacyBatch
from odradek.protocol.record_batch import decode_batch

_TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CHUNK = 1 << 20


def _kind(path: str) -> tuple[str, str]:
    """(kind, path without a temp suffix): kind is the real extension (``.log``, ...)."""
    name = os.path.basename(path)
    for suffix in _TEMP_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    root, ext = os.path.splitext(name)
    return ext, root


def _base_offset(path: str) -> int:
    _, root = _kind(path)
    try:
        return int(root)
    except ValueError:
        return 0


def _sibling(path: str, ext: str) -> str | None:
    """The file of the same segment with extension ``ext`` (same temp suffix, or none)."""
    name = os.path.basename(path)
    d = os.path.dirname(path)
    kind, root = _kind(path)
    suffix = name[len(root) + len(kind) :]
    for candidate in (root + ext + suffix, root + ext):
        full = os.path.join(d, candidate)
        if os.path.exists(full):
            return full
    return None


def _batches(fd: int, size: int, start: int = 0, max_size: int = 1 << 62):
    """Yield ``(position, batch bytes)`` for each complete batch; stops at a torn tail."""
    pos = start
    buf = b""
    buf_start = pos
    while pos + batch_header.LOG_OVERHEAD <= size:
        rel = pos - buf_start
        if rel + batch_header.LOG_OVERHEAD > len(buf):
            buf = os.pread(fd, _CHUNK, pos)
            buf_start, rel = pos, 0
        _, length = batch_header.read_offset_and_size(buf, rel)
        if length < batch_header.LOG_OVERHEAD + 5 or pos + length > size or length > max_size:
            return
        if rel + length > len(buf):
            buf = os.pread(fd, max(length, _CHUNK), pos)
            buf_start, rel = pos, 0
            if len(buf) < length:
                return
        yield pos, buf[rel : rel + length]
        pos += length


def _decode(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="replace")


def _bool(value: bool) -> str:
    return "true" if value else "false"


# ---- .log ---------------------------------------------------------------------------------


def dump_log_file(
    path: str, *, deep: bool, print_data: bool, skip_metadata: bool, max_size: int, out, err
) -> None:
    out(f"Log starting offset: {_base_offset(path)}")
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        valid = 0
        gaps: list[tuple[int, int]] = []
        last_offset = -1
        for pos, data in _batches(fd, size, max_size=max_size):
            valid = pos + len(data)
            try:
                batch = decode_batch(data, check_crc=False)
            except errors.KafkaError as exc:
                out(f"Found an undecodable batch at position {pos}: {exc}")
                continue
            if isinstance(batch, LegacyBatch):
                _dump_legacy(batch, pos, deep or print_data, print_data, out)
                continue
            h = batch.header
            if not skip_metadata:
                horizon = (
                    f"OptionalLong[{h.base_timestamp}]"
                    if h.attributes & batch_header.DELETE_HORIZON_BIT
                    else "OptionalLong.empty"
                )
                ts_type = "LogAppendTime" if h.timestamp_type == batch_header.LOG_APPEND_TIME else "CreateTime"
                out(
                    f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
                    f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                    f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                    f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                    f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
                    f"deleteHorizonMs: {horizon} position: {pos} {ts_type}: {h.max_timestamp} "
                    f"size: {h.size} magic: {h.magic} "
                    f"compresscodec: {codecs.CODEC_NAMES.get(h.compression, h.compression)} "
                    f"crc: {h.crc} isvalid: {_bool(batch.crc_is_valid())}"
                )
            if not (deep or print_data):
                continue
            try:
                records = batch.records()
            except errors.KafkaError as exc:
                out(f"| records of the batch at position {pos} do not decode: {exc}")
                continue
            ts_type = "LogAppendTime" if h.timestamp_type == batch_header.LOG_APPEND_TIME else "CreateTime"
            for rec in records:
                if last_offset >= 0 and rec.offset != last_offset + 1:
                    gaps.append((last_offset, rec.offset))
                last_offset = rec.offset
                if skip_metadata:
                    line = "|"
                else:
                    seq = (
                        -1
                        if h.base_sequence < 0
                        else (h.base_sequence + rec.offset - h.base_offset) & 0x7FFFFFFF
                    )
                    keys = ",".join(k for k, _v in rec.headers)
                    line = (
                        f"| offset: {rec.offset} {ts_type}: {rec.timestamp} "
                        f"keySize: {-1 if rec.key is None else len(rec.key)} "
                        f"valueSize: {-1 if rec.value is None else len(rec.value)} "
                        f"sequence: {seq} headerKeys: [{keys}]"
                    )
                if print_data:
                    if h.is_control:
                        line += _control_text(rec)
                    else:
                        if rec.key is not None:
                            line += f" key: {_decode(rec.key)}"
                        line += f" payload: {_decode(rec.value)}"
                out(line)
        if valid < size:
            out(f"Found {size - valid} invalid bytes at the end of {os.path.basename(path)}")
        if gaps:
            err(f"Non-consecutive offsets in {os.path.abspath(path)}")
            for a, b in gaps:
                err(f"  {a} is followed by {b}")
    finally:
        os.close(fd)


def _control_text(rec) -> str:
    try:
        _version, control_type = decode_control_key(rec.key)
    except errors.KafkaError:
        return " controlType: unknown"
    if control_type in (0, 1):
        try:
            _v, coordinator_epoch = decode_end_txn_marker(rec.value)
        except errors.KafkaError:
            coordinator_epoch = -1
        name = "COMMIT" if control_type == 1 else "ABORT"
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f" controlType: {control_type}"


def _dump_legacy(batch, pos: int, deep: bool, print_data: bool, out) -> None:
    items = batch.inner() if deep and batch.compression else [batch]
    for m in items:
        line = (
            f"offset: {m.offset} position: {pos} "
            f"{'LogAppendTime' if m.timestamp_type == batch_header.LOG_APPEND_TIME else 'CreateTime'}: {m.timestamp} "
            f"isvalid: {_bool(m.crc_is_valid())} keySize: {-1 if m.key is None else len(m.key)} "
            f"valueSize: {-1 if m.value is None else len(m.value)} magic: {m.magic} "
            f"compresscodec: {codecs.CODEC_NAMES.get(m.compression, m.compression)} crc: {m.crc}"
        )
        if print_data:
            if m.key is not None:
                line += f" key: {_decode(m.key)}"
            line += f" payload: {_decode(m.value)}"
        out(line)


# ---- indexes ------------------------------------------------------------------------------


def _index_entries(path: str, entry: struct.Struct) -> tuple[list, int]:
    """Entries up to the first all-zero one (a preallocated tail), and the file size."""
    with open(path, "rb") as f:
        data = f.read()
    entries = []
    for fields in entry.iter_unpack(data[: len(data) // entry.size * entry.size]):
        if not any(fields):
            break  # the zeroed, preallocated tail of an active (or crashed) segment's index
        entries.append(fields)
    return entries, len(data)


def _batch_at(fd: int, size: int, position: int) -> bytes | None:
    for _pos, data in _batches(fd, size, position):
        return data
    return None


def _index_sanity(
    path: str, entries: list[tuple[int, int]], base: int, file_size: int, log_size: int
) -> str | None:
    if file_size % 8:
        return f"size {file_size} is not a multiple of 8"
    prev = None
    for rel, position in entries:
        if rel < 0:
            return f"relative offset {rel} is negative"
        if position < 0 or position > log_size:
            return f"position {position} is outside the log (size {log_size})"
        if prev is not None and (rel <= prev[0] or position <= prev[1]):
            return f"entries out of order at offset {base + rel}"
        prev = (rel, position)
    return None


def dump_offset_index(path: str, *, sanity_only: bool, verify_only: bool, max_size: int, out, err) -> bool:
    base = _base_offset(path)
    entries, file_size = _index_entries(path, _OFFSET_ENTRY)
    log_path = _sibling(path, ".log")
    log_size = os.path.getsize(log_path) if log_path else 1 << 62
    problem = _index_sanity(path, entries, base, file_size, log_size)
    if sanity_only:
        if problem:
            out(f"{path} failed sanity check: {problem}")
            return False
        out(f"{path} passed sanity check.")
        return True
    if problem:
        err(f"{path} failed sanity check: {problem}")
    mismatches = []
    fd = os.open(log_path, os.O_RDONLY) if log_path else None
    try:
        for rel, position in entries:
            offset = base + rel
            if fd is not None:
                data = _batch_at(fd, log_size, position)
                if data is None:
                    mismatches.append((offset, -1))
                else:
                    last = _last_offset(data)
                    if last != offset:
                        mismatches.append((offset, last))
            if not verify_only:
                out(f"offset: {offset} position: {position}")
    finally:
        if fd is not None:
            os.close(fd)
    if log_path is None:
        err(f"No log file beside {path}: entries not checked")
    if mismatches:
        err(f"Mismatches in :{os.path.abspath(path)}")
        for index_offset, log_offset in mismatches:
            err(f"  Index offset: {index_offset}, log offset: {log_offset}")
    return not mismatches and problem is None


def _last_offset(data: bytes) -> int:
    if data[batch_header.MAGIC_OFFSET] == 2:
        return batch_header.read_header(data, 0).last_offset
    return batch_header.read_offset_and_size(data, 0)[0]


def dump_time_index(path: str, *, sanity_only: bool, verify_only: bool, max_size: int, out, err) -> bool:
    base = _base_offset(path)
    entries, file_size = _index_entries(path, _TIME_ENTRY)
    problem = None
    if file_size % 12:
        problem = f"size {file_size} is not a multiple of 12"
    elif entries and entries[-1][0] < entries[0][0]:
        problem = "last timestamp below the first"
    elif any(rel < 0 for _ts, rel in entries):
        problem = "offset below the base offset"
    if sanity_only:
        if problem:
            out(f"{path} failed sanity check: {problem}")
            return False
        out(f"{path} passed sanity check.")
        return True
    if problem:
        err(f"{path} failed sanity check: {problem}")
    log_path = _sibling(path, ".log")
    index_path = _sibling(path, ".index")
    index_entries = _index_entries(index_path, _OFFSET_ENTRY)[0] if index_path else []
    mismatched_ts, not_found, out_of_order = [], [], []
    fd = os.open(log_path, os.O_RDONLY) if log_path else None
    try:
        log_size = os.fstat(fd).st_size if fd is not None else 0
        prev_ts = -1
        for ts, rel in entries:
            offset = base + rel
            if fd is not None:
                position = 0
                for irel, ipos in index_entries:  # largest entry at or below the offset
                    if base + irel > offset:
                        break
                    position = ipos
                found = None
                for _pos, data in _batches(fd, log_size, position):
                    if _last_offset(data) >= offset:
                        found = data
                        break
                if found is None:
                    not_found.append((offset, -1))
                elif _last_offset(found) != offset:
                    not_found.append((offset, _last_offset(found)))
                else:
                    batch_max = _batch_max_timestamp(found)
                    if batch_max != ts:
                        mismatched_ts.append((ts, batch_max))
                if prev_ts >= ts:
                    out_of_order.append((ts, prev_ts))
            if not verify_only:
                out(f"timestamp: {ts} offset: {offset}")
            prev_ts = ts
    finally:
        if fd is not None:
            os.close(fd)
    if log_path is None:
        err(f"No log file beside {path}: entries not checked")
    name = os.path.abspath(path)
    for ts, log_ts in mismatched_ts:
        err(f"Found timestamp mismatch in :{name}")
        err(f"  Index timestamp: {ts}, log timestamp: {log_ts}")
    for ts, prev in out_of_order:
        err(f"Found out of order timestamp in :{name}")
        err(f"  Index timestamp: {ts}, Previously indexed timestamp: {prev}")
    if not_found:
        err("The following indexed offsets are not found in the log.")
        for offset, log_offset in not_found:
            err(f"Indexed offset: {offset}, found log offset: {log_offset}")
    return not (mismatched_ts or out_of_order or not_found or problem)


def _batch_max_timestamp(data: bytes) -> int:
    batch = decode_batch(data, check_crc=False)
    if isinstance(batch, LegacyBatch):
        return max((m.timestamp for m in (batch.inner() if batch.compression else [batch])), default=-1)
    h = batch.header
    if h.timestamp_type == batch_header.LOG_APPEND_TIME or h.is_control:
        return h.max_timestamp
    return max((r.timestamp for r in batch.records()), default=h.max_timestamp)


# ---- producer snapshots -------------------------------------------------------------------


def dump_snapshot(path: str, out) -> None:
    from odradek.storage.producer_state import CorruptSnapshotError, read_snapshot

    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as exc:
        out(f"{path} is not a valid producer snapshot: {exc}")
        return
    for e in entries:
        txn = e.current_txn_first_offset
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {f'Optional[{txn}]' if txn >= 0 else 'Optional.empty'} "
            f"lastTimestamp: {e.last_timestamp}"
        )
        for m in e.batches:
            line += (
                f" firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                f"offsetDelta: {m.offset_delta} timestamp: {m.timestamp}"
            )
        out(line)


# ---- the command --------------------------------------------------------------------------


@click.command("dump-log")
@click.option(
    "--files",
    "files",
    multiple=True,
    metavar="PATH[,PATH...]",
    help="Files to dump: .log, .index, .timeindex, .snapshot (comma-separated or repeated).",
)
@click.argument("more_files", nargs=-1, type=click.Path())
@click.option(
    "--print-data-log", is_flag=True, help="Print each record's key and payload (implies --deep-iteration)."
)
@click.option("--deep-iteration", is_flag=True, help="Print every record, not only batch headers.")
@click.option(
    "--index-sanity-check", is_flag=True, help="Only check the index files' sanity; print no entries."
)
@click.option(
    "--verify-index-only", is_flag=True, help="Check index entries against the log; print no entries."
)
@click.option("--skip-record-metadata", is_flag=True, help="Leave out batch and record metadata.")
@click.option(
    "--max-message-size",
    type=int,
    default=5 * 1024 * 1024,
    show_default=True,
    help="Largest batch size accepted while reading.",
)
def dump_log(
    files,
    more_files,
    print_data_log,
    deep_iteration,
    index_sanity_check,
    verify_index_only,
    skip_record_metadata,
    max_message_size,
):
    """Print the contents of log segments, indexes and producer snapshots (kafka-dump-log).

    \b
    Examples:
      odradek dump-log --files data/orders-0/00000000000000000000.log
      odradek dump-log --print-data-log --files data/orders-0/00000000000000000000.log
      odradek dump-log --files data/orders-0/00000000000000000000.index,data/orders-0/00000000000000000000.timeindex
    Exit status 1 if an index does not match its log.
    """
    paths = [p for item in files for p in item.split(",") if p] + list(more_files)
    if not paths:
        raise click.UsageError("Missing option '--files'.")

    def out(line: str) -> None:
        click.echo(line)

    def err(line: str) -> None:
        click.echo(line, err=True)

    ok = True
    for path in paths:
        if not os.path.isfile(path):
            err(f"{path} is not a file")
            ok = False
            continue
        kind, _ = _kind(path)
        out(f"Dumping {path}")
        if kind == ".log":
            dump_log_file(
                path,
                deep=deep_iteration,
                print_data=print_data_log,
                skip_metadata=skip_record_metadata,
                max_size=max_message_size,
                out=out,
                err=err,
            )
        elif kind in (".index", ".timeindex"):
            dump_index = dump_offset_index if kind == ".index" else dump_time_index
            ok &= dump_index(
                path,
                sanity_only=index_sanity_check,
                verify_only=verify_index_only,
                max_size=max_message_size,
                out=out,
                err=err,
            )
        elif kind == ".snapshot":
            dump_snapshot(path, out)
        else:
            err(f"Ignoring unknown file {path}")
    if not ok:
        sys.exit(1)
