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

``meta.properties`` is a Java properties file (``key=value`` lines, ``#`` comments) holding
``version=1``, ``node.id`` and ``cluster.id`` for a KRaft-style log dir.

Thread rules: stateless functions; one writer per file at a time (the owner serialises).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
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


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _unescape(text: str) -> str:
    # A malformed \uXXXX keeps its text (Java refuses the file; a damaged meta.properties
    # should not stop us reading its other keys).
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            digits = text[i + 2 : i + 6]
            if nxt == "u" and len(digits) == 4 and all(d in _HEX_DIGITS for d in digits):
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _escape(text: str, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c in "\\=:#!" or (c == " " and (key or i == 0)):
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load``: ``key=value``/``key:value``/``key value``, comments, continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        i = 0
        key_chars = []
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        while i < len(line) and line[i] in " \t\f":
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in " \t\f":
                i += 1
        props[_unescape("".join(key_chars))] = _unescape(line[i:])
    return props


def format_properties(props: dict[str, str], comment: str | None = None) -> str:
    lines = []
    if comment is not None:
        lines.append(f"#{comment}")
    lines.append("#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()))
    for key, value in props.items():
        lines.append(f"{_escape(key, True)}={_escape(str(value), False)}")
    return "\n".join(lines) + "\n"


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    """The log dir's ``meta.properties`` as a dict, or None if it has none."""
    try:
        with open(os.path.join(log_dir, META_PROPERTIES), encoding="latin-1") as f:
            return parse_properties(f.read())
    except FileNotFoundError:
        return None


def write_meta_properties(log_dir: str, node_id: int, cluster_id: str, **extra: str) -> None:
    """Write ``version=1``, ``node.id``, ``cluster.id`` (and any extra keys, e.g. directory.id)."""
    props = {"version": "1", "node.id": str(node_id), "cluster.id": cluster_id}
    props.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    text = format_properties(props)
    atomic_write(os.path.join(log_dir, META_PROPERTIES), text.encode("latin-1", "backslashreplace"))
