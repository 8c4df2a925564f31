"""Kafka's small text checkpoint files and ``meta.properties``.

Offset checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``), one per log dir::

    0                       version
    2                       number of entries
    my-topic 0 1234         topic, partition, offset (space separated)
    my-topic 1 99

The leader epoch checkpoint (``leader-epoch-checkpoint`` in each partition dir) has the same
frame with ``epoch startOffset`` lines; ``CheckpointFile`` is the shared frame.

Writes go to ``<file>.tmp``, are fsynced, renamed over the file and the directory is fsynced,
so a crash leaves either the old or the new file. A malformed file raises ``CheckpointError``.

``meta.properties`` is a Java properties file (read and written by ``odradek.properties``)
holding ``version=1``, ``node.id`` and ``cluster.id`` for a KRaft-style log dir; a malformed
one raises ``CheckpointError`` too.

Thread rules: stateless functions; one writer per file at a time (the owner serialises).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ..properties import PropertiesError, format_properties, parse_properties

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
# The log manager's checkpoints, each written on its own interval (LogManager.checkpoint_all).
LOG_MANAGER_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
META_PROPERTIES = "meta.properties"


class CheckpointError(ValueError):
    """A checkpoint file exists but cannot be parsed."""


def fsync_dir(path: str) -> None:
    """Make a rename or file creation inside ``path`` durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a fsynced temp file and a rename."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except OSError as e:
        os.close(fd)
        os.unlink(tmp)  # a full disk: give back what the partial file took
        e.filename = path
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointFile:
    """The ``version / count / lines`` frame shared by Kafka's checkpoint files."""

    def __init__(
        self,
        path: str,
        version: int,
        format_entry: Callable[[Any], str],
        parse_entry: Callable[[list[str]], Any],
    ):
        self.path = path
        self.version = version
        self._format = format_entry
        self._parse = parse_entry

    def write(self, entries: Iterable[Any]) -> None:
        lines = [self._format(e) for e in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        atomic_write(self.path, text.encode())

    def read(self) -> list[Any]:
        """Entries in file order; ``[]`` if the file does not exist."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode()
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as exc:
            raise CheckpointError(f"Checkpoint file {self.path} is not text: {exc}") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            version = int(lines[0])
            count = int(lines[1])
        except (IndexError, ValueError):
            raise CheckpointError(f"Malformed header in checkpoint file {self.path}") from None
        if version != self.version:
            raise CheckpointError(f"Unrecognised version {version} in checkpoint file {self.path}")
        body = lines[2:]
        if len(body) != count:
            raise CheckpointError(
                f"Expected {count} entries in checkpoint file {self.path}, found {len(body)}"
            )
        out = []
        for line in body:
            try:
                out.append(self._parse(line.split()))
            except (ValueError, IndexError):
                raise CheckpointError(f"Malformed line {line!r} in checkpoint file {self.path}") from None
        return out


def _format_offset(entry) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_offset(fields: list[str]):
    if len(fields) != 3:
        raise ValueError
    return (fields[0], int(fields[1])), int(fields[2])


def offset_checkpoint(path: str) -> CheckpointFile:
    return CheckpointFile(path, 0, _format_offset, _parse_offset)


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}``; empty if the file is missing."""
    return dict(offset_checkpoint(path).read())


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    offset_checkpoint(path).write(sorted(offsets.items()))


# ---- meta.properties ----------------------------------------------------------------------


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    """The log dir's ``meta.properties`` as a dict, or None if it has none."""
    path = os.path.join(log_dir, META_PROPERTIES)
    try:
        with open(path, encoding="latin-1") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        return parse_properties(text, path)
    except PropertiesError as exc:
        raise CheckpointError(str(exc)) from None


def write_meta_properties(log_dir: str, node_id: int, cluster_id: str, **extra: str) -> None:
    """Write ``version=1``, ``node.id``, ``cluster.id`` (and any extra keys, e.g. directory.id)."""
    props = {"version": "1", "node.id": str(node_id), "cluster.id": cluster_id}
    props.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    text = format_properties(props)
    atomic_write(os.path.join(log_dir, META_PROPERTIES), text.encode("latin-1", "backslashreplace"))
