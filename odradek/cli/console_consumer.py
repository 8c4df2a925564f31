"""``odradek consume``: kafka-console-consumer.sh — print the records of a topic.

Without ``--group`` the consumer assigns itself the partitions (all, or ``--partition``)
and commits nothing, so it starts at once. With ``--group`` it joins the group, and
commits the offsets of the records it printed (not merely fetched) every few seconds and
on exit, so a later run with the same group continues after the last printed record.
"""

from __future__ import annotations

import base64
import json
import signal
import sys
import threading
import time

import click

from odradek.cli.common import (
    EXIT_INTERRUPTED,
    CliError,
    client_command,
    millis_to_iso,
    one_name,
    parse_key_values,
    parse_time,
    topic_arguments,
)

_FORMATTER_PROPERTIES = {
    "print.timestamp",
    "print.key",
    "print.offset",
    "print.partition",
    "print.headers",
    "print.value",
    "key.separator",
    "line.separator",
    "headers.separator",
    "headers.key.separator",
    "null.literal",
}
_COMMIT_INTERVAL_S = 5.0


def _text(data: bytes | None, null: str = "null") -> str:
    if data is None:
        return null
    return data.decode("utf-8", errors="replace")


def _is_utf8(data: bytes | None) -> bool:
    if data is None or data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _json_bytes(out: dict, field: str, data: bytes | None) -> None:
    """Valid UTF-8 goes out as a string; other bytes as ``<field>_base64``."""
    if data is None:
        out[field] = None
        return
    try:
        out[field] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[field] = None
        out[f"{field}_base64"] = base64.b64encode(data).decode()


def record_json(r) -> str:
    out = {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp}
    out["timestamp_type"] = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
    _json_bytes(out, "key", r.key)
    _json_bytes(out, "value", r.value)
    headers = []
    for k, v in r.headers or ():
        h = {"key": k}
        _json_bytes(h, "value", v)
        headers.append(h)
    out["headers"] = headers
    return json.dumps(out, ensure_ascii=False)


class Formatter:
    """Kafka's DefaultMessageFormatter, or a ``--format`` template.

    Template fields: {topic} {partition} {offset} {timestamp} {datetime} {timestamp_type}
    {key} {value} {headers} {key_length} {value_length}. The template ``raw`` writes each
    value's bytes unchanged (``format_bytes``).

    Text is UTF-8: bytes that are not valid UTF-8 show as U+FFFD (``lossy`` tells).
    """

    def __init__(self, template: str | None, props: dict[str, str]):
        self.raw = template == "raw"
        self.template = None if self.raw else template
        template = self.template
        self.p = props

        def flag(name, default=False):
            return props.get(name, str(default)).lower() == "true"

        self.print_ts = flag("print.timestamp")
        self.print_key = flag("print.key")
        self.print_offset = flag("print.offset")
        self.print_partition = flag("print.partition")
        self.print_headers = flag("print.headers")
        self.print_value = flag("print.value", True)
        self.sep = props.get("key.separator", "\t")
        self.line_sep = props.get("line.separator", "\n")
        self.headers_sep = props.get("headers.separator", ",")
        self.headers_key_sep = props.get("headers.key.separator", ":")
        self.null = props.get("null.literal", "null")
        if template is not None:
            try:
                template.format(**self._fields_of(None))
            except (KeyError, IndexError, ValueError) as exc:
                raise click.BadParameter(
                    f"{template!r}: {exc}; fields: {', '.join(self._fields_of(None))}", param_hint="--format"
                ) from None

    def _headers_text(self, headers) -> str:
        if not headers:
            return "NO_HEADERS"
        return self.headers_sep.join(f"{k}{self.headers_key_sep}{_text(v, self.null)}" for k, v in headers)

    def _fields_of(self, r) -> dict:
        if r is None:
            return dict.fromkeys(
                [
                    "topic",
                    "partition",
                    "offset",
                    "timestamp",
                    "datetime",
                    "timestamp_type",
                    "key",
                    "value",
                    "headers",
                    "key_length",
                    "value_length",
                ],
                "",
            )
        return {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "datetime": millis_to_iso(r.timestamp) or "",
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": _text(r.key, self.null),
            "value": _text(r.value, self.null),
            "headers": self._headers_text(r.headers),
            "key_length": -1 if r.key is None else len(r.key),
            "value_length": -1 if r.value is None else len(r.value),
        }

    def lossy(self, r) -> bool:
        """Whether the text of ``r`` replaces bytes that are not UTF-8 with U+FFFD."""
        shown = []
        if self.template is not None:
            shown = [r.key, r.value] + [v for _, v in r.headers or ()]
        else:
            if self.print_key:
                shown.append(r.key)
            if self.print_value:
                shown.append(r.value)
            if self.print_headers:
                shown.extend(v for _, v in r.headers or ())
        return not all(_is_utf8(data) for data in shown)

    def format_bytes(self, r) -> bytes:
        """``--format raw``: the value's bytes as they are (nothing for a null value)."""
        return (r.value or b"") + self.line_sep.encode()

    def format(self, r) -> str:
        if self.template is not None:
            return self.template.format(**self._fields_of(r))
        parts = []
        if self.print_ts:
            kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
            parts.append(f"{kind}:{r.timestamp}")
        if self.print_partition:
            parts.append(f"Partition:{r.partition}")
        if self.print_offset:
            parts.append(f"Offset:{r.offset}")
        if self.print_headers:
            parts.append(self._headers_text(r.headers))
        if self.print_key:
            parts.append(_text(r.key, self.null))
        if self.print_value:
            parts.append(_text(r.value, self.null))
        return self.sep.join(parts)


@click.command()
@topic_arguments("Topic to read (or give it as an argument).")
@click.option(
    "--group", "-g", metavar="GROUP", help="Consume as a member of GROUP and commit the offsets printed."
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start at the earliest offset (with --group: when the group has none).",
)
@click.option(
    "--offset",
    metavar="earliest|latest|N",
    help="Start at this offset of each partition read (without --group).",
)
@click.option(
    "--from-timestamp",
    "--from-datetime",
    "from_time",
    metavar="TIME",
    help="Start at the first record at or after TIME (epoch ms or ISO date-time).",
)
@click.option(
    "--partition",
    "-p",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="Read only this partition (repeatable).",
)
@click.option(
    "--max-messages", "-n", type=click.IntRange(min=1), help="Exit after printing this many records."
)
@click.option("--timeout-ms", type=click.IntRange(min=0), help="Exit when no record arrives for this long.")
@click.option(
    "--exit-at-end", "-e", is_flag=True, help="Exit once every partition's end (as of the start) is reached."
)
@click.option(
    "--format",
    "-F",
    "template",
    metavar="TEMPLATE",
    help="Print each record with TEMPLATE, e.g. '{partition}:{offset} {key}={value}'; "
    "'raw' writes each value's bytes unchanged.",
)
@click.option("--print-key", "-K", is_flag=True, help="Print the key, a TAB, then the value.")
@click.option(
    "--property",
    "formatter_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="Kafka's formatter properties: print.key, print.offset, print.partition, print.timestamp, "
    "print.headers, print.value, key.separator, line.separator, null.literal, ...",
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
)
@click.option(
    "--consumer-property",
    "consumer_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="A consumer property (repeatable).",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
@client_command
def consume(
    session,
    topic,
    topic_opt,
    group,
    from_beginning,
    offset,
    from_time,
    partitions,
    max_messages,
    timeout_ms,
    exit_at_end,
    template,
    print_key,
    formatter_props,
    isolation_level,
    consumer_props,
    quiet,
):
    """Print the records of a topic, until Ctrl-C, --max-messages, --timeout-ms or --exit-at-end.

    --output json prints one JSON object per record and line (topic, partition, offset,
    timestamp, key, value, headers); bytes that are not UTF-8 come as key_base64/value_base64.

    Text output decodes keys, values and headers as UTF-8 and shows bytes that are not
    valid UTF-8 as U+FFFD (a note on stderr says so, once). For the exact bytes use
    --output json (base64), or --format raw (each value's bytes, unchanged).

    Ctrl-C (or SIGTERM) stops it: with --group the offsets printed are committed, then the
    count is printed and the exit status is 130.

    \b
    Examples:
      odradek consume orders --from-beginning
      odradek consume orders --from-beginning --max-messages 10 --print-key
      odradek consume orders -e --format '{partition}:{offset} {key}={value} [{headers}]'
      odradek consume orders --partition 0 --offset 42 --max-messages 1
      odradek consume orders --from-timestamp 2024-05-01T12:00:00 -e -o json
      odradek consume orders --group billing --from-beginning --timeout-ms 5000
      odradek consume images --partition 0 --offset 7 -n 1 --format raw > image.png
      kafka-style: odradek consume --topic orders --property print.key=true --property print.offset=true
    """
    name = one_name(topic, topic_opt, "topic")
    props = parse_key_values(formatter_props, "--property")
    unknown = set(props) - _FORMATTER_PROPERTIES
    if unknown:
        raise click.BadParameter(
            f"unknown formatter propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_FORMATTER_PROPERTIES))}",
            param_hint="--property",
        )
    if print_key:
        props.setdefault("print.key", "true")
    starts = [x for x in (from_beginning, offset, from_time) if x]
    if len(starts) > 1:
        raise click.UsageError("Give one of --from-beginning, --offset and --from-timestamp.")
    if group and offset:
        raise click.UsageError("--offset works without --group; a group starts from its committed offsets.")
    start_offset = None
    if offset is not None:
        if offset not in ("earliest", "latest"):
            try:
                start_offset = int(offset)
            except ValueError:
                raise click.BadParameter(
                    f"{offset!r}: expected earliest, latest or a number", param_hint="--offset"
                ) from None
            if start_offset < 0:
                raise click.BadParameter("offsets are >= 0", param_hint="--offset")
    start_ms = parse_time(from_time, "--from-timestamp") if from_time else None
    formatter = Formatter(template, props)
    line_sep = formatter.line_sep

    options = parse_key_values(consumer_props, "--consumer-property")
    options.setdefault("isolation.level", isolation_level)
    options.setdefault("allow.auto.create.topics", "false")
    options.setdefault("auto.offset.reset", "earliest" if from_beginning else "latest")
    if group:
        options["group.id"] = group
        options["enable.auto.commit"] = "false"
    else:
        options.pop("group.id", None)
        options["enable.auto.commit"] = "false"

    from odradek.client.client_errors import CommitFailedError
    from odradek.client.structs import OffsetAndMetadata, TopicPartition
    from odradek.protocol.errors import RebalanceInProgressError

    printed = 0
    interrupted = False
    warned_lossy = False
    out = sys.stdout
    # Before the consumer exists: a SIGTERM while it joins its group must close it (and so
    # leave the group) like Ctrl-C, not kill the process and leave a member behind.
    _sigterm_stops()
    from odradek.protocol.errors import UnknownTopicOrPartitionError

    with session.explained_denials("Read", name, group), session.consumer(**options) as consumer:
        try:
            all_parts = sorted(consumer.partitions_for_topic(name, fail_if_missing=True))
        except UnknownTopicOrPartitionError:
            raise CliError(
                f"topic {name!r} does not exist",
                "check the name with `odradek topics list`, or create it with `odradek topics create`",
            ) from None
        if partitions:
            bad = sorted(set(partitions) - set(all_parts))
            if bad:
                raise CliError(
                    f"topic {name!r} has no partition {', '.join(map(str, bad))} (it has {len(all_parts)})",
                    f"use --partition 0..{len(all_parts) - 1}",
                )
        ends: dict = {}
        if group and not partitions:
            consumer.subscribe([name])
        else:
            tps = [TopicPartition(name, p) for p in (partitions or all_parts)]
            if exit_at_end or start_offset is not None:
                # Looked up before fetching starts: a ListOffsets sent while a fetch long-polls
                # on the same connection waits for that fetch (Kafka answers in order).
                ends = consumer.end_offsets(tps)
            consumer.assign(tps)
            if from_beginning or offset == "earliest":
                if not group:
                    consumer.seek_to_beginning(tps)
            elif offset == "latest":
                consumer.seek_to_end(tps)
            elif start_offset is not None:
                for tp in tps:
                    consumer.seek(tp, min(start_offset, ends[tp]))
        if start_ms is not None and not (group and not partitions):
            _seek_to_time(consumer, consumer.assignment(), start_ms)

        seeked_time: set = set()
        last_seen: dict = {}
        last_commit = time.monotonic()
        deadline_idle = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        try:
            while True:
                records = consumer.poll(0.2, max_records=(max_messages - printed) if max_messages else None)
                assigned = consumer.assignment()
                if start_ms is not None and group and not partitions:
                    fresh = assigned - seeked_time
                    if fresh:
                        _seek_to_time(consumer, fresh, start_ms)
                        seeked_time |= fresh
                        records = [r for r in records if r.topic_partition not in fresh]
                if exit_at_end and assigned and set(ends) != assigned:
                    missing = [tp for tp in assigned if tp not in ends]
                    ends.update(consumer.end_offsets(missing))
                if records:
                    if deadline_idle is not None:
                        deadline_idle = time.monotonic() + timeout_ms / 1000
                    for r in records:
                        if session.json:
                            out.write(record_json(r) + "\n")
                        elif formatter.raw:
                            out.flush()
                            out.buffer.write(formatter.format_bytes(r))
                        else:
                            if not warned_lossy and formatter.lossy(r):
                                warned_lossy = True
                                session.info(
                                    f"Note: record {r.partition}@{r.offset} holds bytes that are not UTF-8; they "
                                    "show as U+FFFD. For the exact bytes use --output json (base64) or --format raw."
                                )
                            out.write(formatter.format(r) + line_sep)
                        last_seen[r.topic_partition] = r.offset
                        printed += 1
                        if max_messages and printed >= max_messages:
                            break
                    out.flush()
                if max_messages and printed >= max_messages:
                    break
                if group and time.monotonic() - last_commit > _COMMIT_INTERVAL_S and last_seen:
                    try:
                        _commit(consumer, last_seen, OffsetAndMetadata)
                        last_commit = time.monotonic()
                    except (RebalanceInProgressError, CommitFailedError):
                        pass  # the group is between generations: commit once it has a new one
                if exit_at_end and assigned and _at_end(consumer, assigned, ends, last_seen):
                    break
                if deadline_idle is not None and time.monotonic() >= deadline_idle:
                    break
        except KeyboardInterrupt:
            interrupted = True  # Ctrl-C or SIGTERM: commit and report, then exit 130
        finally:
            if group and last_seen:
                try:
                    _commit(consumer, last_seen, OffsetAndMetadata)
                except Exception as exc:  # the records were printed; report, do not hide them
                    session.info(f"Warning: could not commit the offsets of group {group!r}: {exc}")
            if not quiet and not session.json:
                click.echo(f"Processed a total of {printed} messages", err=True)
    if interrupted:
        sys.exit(EXIT_INTERRUPTED)


def _sigterm_stops() -> None:
    """Let SIGTERM end the loop like Ctrl-C, so offsets are committed and the count printed."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _commit(consumer, last_seen: dict, OffsetAndMetadata) -> None:
    """Commit past the printed records of the partitions this consumer still owns (one that
    moved to another member is that member's to commit: ours would rewind its offset)."""
    owned = consumer.assignment()
    for tp in [tp for tp in last_seen if tp not in owned]:
        del last_seen[tp]
    if last_seen:
        consumer.commit({tp: OffsetAndMetadata(off + 1) for tp, off in last_seen.items()})


def _seek_to_time(consumer, tps, start_ms: int) -> None:
    tps = list(tps)
    found = consumer.offsets_for_times({tp: start_ms for tp in tps})
    missing = [tp for tp in tps if found.get(tp) is None]
    for tp, ot in found.items():
        if ot is not None:
            consumer.seek(tp, ot.offset)
    if missing:
        consumer.seek_to_end(missing)


def _at_end(consumer, assigned, ends: dict, last_seen: dict) -> bool:
    for tp in assigned:
        end = ends.get(tp)
        if end is None:
            return False
        if last_seen.get(tp, -1) + 1 >= end:
            continue
        if consumer.position(tp) < end:
            return False
    return True
