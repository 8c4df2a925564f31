"""``odradek produce``: kafka-console-producer.sh — one record per input line."""

from __future__ import annotations

import itertools
import sys
import threading

import click

from odradek.cli.common import CliError, client_command, one_name, parse_key_values, topic_arguments

_READER_PROPERTIES = {
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
}


class LineParser:
    """Kafka's LineMessageReader: ``[headers<delim>][key<sep>]value`` per line.

    Headers look like ``h1:v1,h2:v2``; ``null.marker`` stands for a null key, value or
    header value.
    """

    def __init__(
        self,
        parse_key: bool,
        key_separator: str,
        parse_headers: bool,
        headers_delimiter: str,
        headers_separator: str,
        headers_key_separator: str,
        null_marker: str | None,
        ignore_error: bool,
    ):
        if parse_key and not key_separator:
            raise click.BadParameter("the key separator cannot be empty", param_hint="--key-separator")
        self.parse_key = parse_key
        self.key_sep = key_separator.encode()
        self.parse_headers = parse_headers
        self.headers_delim = headers_delimiter.encode()
        self.headers_sep = headers_separator.encode()
        self.headers_key_sep = headers_key_separator.encode()
        self.null = None if null_marker is None else null_marker.encode()
        self.ignore_error = ignore_error

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null is not None and data == self.null else data

    def parse(self, line: bytes, lineno: int):
        """``(key, value, headers)``; a malformed line raises CliError unless ignore.error."""
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            head, sep, rest = rest.partition(self.headers_delim)
            if not sep:
                if not self.ignore_error:
                    raise CliError(
                        f"line {lineno}: no headers delimiter {self.headers_delim.decode()!r} in {line[:80]!r}",
                        "start each line with h1:v1,h2:v2 and the delimiter, or drop --parse-headers",
                    )
                rest = head
                head = b""
            if head and head != self.null:
                for item in head.split(self.headers_sep):
                    k, ksep, v = item.partition(self.headers_key_sep)
                    if not ksep and not self.ignore_error:
                        raise CliError(
                            f"line {lineno}: header {item[:40]!r} has no {self.headers_key_sep.decode()!r}",
                            "write headers as name:value",
                        )
                    headers.append((k.decode(errors="replace"), self._nullable(v) if ksep else None))
        key = None
        if self.parse_key:
            k, sep, value = rest.partition(self.key_sep)
            if not sep:
                if not self.ignore_error:
                    raise CliError(
                        f"line {lineno}: no key separator {self.key_sep.decode()!r} in {line[:80]!r}",
                        "write key<separator>value on every line, pass --key-separator, "
                        "or add --property ignore.error=true to send such lines without a key",
                    )
                value = rest
            else:
                key = self._nullable(k)
        else:
            value = rest
        return key, self._nullable(value), headers


def _partition_count(session, producer, name: str) -> int:
    """The topic's partition count, from one metadata answer (which creates the topic where
    the broker does that): a missing topic or a denial is told at once."""
    from odradek.protocol.errors import UnknownTopicOrPartitionError

    try:
        return len(producer.partitions_for(name, fail_if_missing=True))
    except UnknownTopicOrPartitionError:
        raise CliError(
            f"topic {name!r} does not exist, and the broker does not create topics on first use "
            "(auto.create.topics.enable=false)",
            f"create it with `odradek topics create {name}`",
        ) from None


def _lines(stream):
    lineno = 0
    for raw in stream:
        lineno += 1
        line = raw.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        yield lineno, line


@click.command()
@topic_arguments("Topic to write to (or give it as an argument).")
@click.option(
    "--file", "-f", "file_", type=click.File("rb"), default="-", help="Read lines from FILE instead of stdin."
)
@click.option(
    "--parse-key", "-K", is_flag=True, help="Each line is KEY<separator>VALUE (separator: --key-separator)."
)
@click.option(
    "--key-separator",
    metavar="SEP",
    help="Separator between key and value (default TAB); implies --parse-key.",
)
@click.option("--parse-headers", is_flag=True, help="Lines start with headers h1:v1,h2:v2 then TAB.")
@click.option(
    "--header",
    "-H",
    "static_headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="Add a header to every record (repeatable).",
)
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Send every record to this partition.")
@click.option("--null-marker", metavar="TEXT", help="A key or value equal to TEXT is sent as null.")
@click.option(
    "--compression-type",
    "--compression-codec",
    "compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@click.option(
    "--acks",
    "--request-required-acks",
    "acks",
    type=click.Choice(["all", "-1", "0", "1"]),
    default="all",
    show_default=True,
    help="Acknowledgements to wait for.",
)
@click.option(
    "--sync", is_flag=True, help="Wait for each record's acknowledgement before reading the next line."
)
@click.option(
    "--linger-ms", type=click.IntRange(min=0), help="Time to wait for more records before sending a batch."
)
@click.option(
    "--producer-property",
    "producer_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="A producer property (repeatable).",
)
@click.option(
    "--property",
    "reader_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="Kafka's reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
    "headers.separator, headers.key.separator, null.marker, ignore.error.",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
@client_command
def produce(
    session,
    topic,
    topic_opt,
    file_,
    parse_key,
    key_separator,
    parse_headers,
    static_headers,
    partition,
    null_marker,
    compression,
    acks,
    sync,
    linger_ms,
    producer_props,
    reader_props,
    quiet,
):
    """Send lines from stdin (or --file) to a topic, one record per line.

    The producer waits for every acknowledgement before it exits; a record the broker
    refuses makes the command fail (exit 1) naming the first error.

    \b
    Examples:
      echo 'hello' | odradek produce greetings
      odradek produce orders --file orders.txt --key-separator ':'      # lines like id-1:{...}
      odradek produce orders -K < keyed.tsv                             # key TAB value
      odradek produce orders --parse-headers <<< $'source:web\\tid-1'
      odradek produce orders --header source=cli --partition 0 --acks 1 --compression-type zstd
      kafka-style: odradek produce --topic orders --property parse.key=true --property key.separator=:
    """
    name = one_name(topic, topic_opt, "topic")
    props = parse_key_values(reader_props, "--property")
    unknown = set(props) - _READER_PROPERTIES
    if unknown:
        raise click.BadParameter(
            f"unknown reader propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_READER_PROPERTIES))}",
            param_hint="--property",
        )

    def flag(key, default):
        return props[key].lower() == "true" if key in props else default

    sep = key_separator if key_separator is not None else props.get("key.separator", "\t")
    parser = LineParser(
        parse_key=flag("parse.key", parse_key or key_separator is not None),
        key_separator=sep,
        parse_headers=flag("parse.headers", parse_headers),
        headers_delimiter=props.get("headers.delimiter", "\t"),
        headers_separator=props.get("headers.separator", ","),
        headers_key_separator=props.get("headers.key.separator", ":"),
        null_marker=null_marker if null_marker is not None else props.get("null.marker"),
        ignore_error=flag("ignore.error", False),
    )
    fixed_headers = [(k, v.encode()) for k, v in parse_key_values(static_headers, "--header").items()]
    options = parse_key_values(producer_props, "--producer-property")
    options.setdefault("acks", acks)
    options.setdefault("compression.type", compression)
    if linger_ms is not None:
        options["linger.ms"] = linger_ms

    sent = 0
    failures: list[BaseException] = []
    acked: dict[int, list[int]] = {}
    lock = threading.Lock()

    def on_done(fut):
        exc = fut.exception(0)
        with lock:
            if exc is not None:
                failures.append(exc)
                return
            md = fut.result(0)
            span = acked.setdefault(md.partition, [md.offset, md.offset])
            span[0], span[1] = min(span[0], md.offset), max(span[1], md.offset)

    options.setdefault("max.block.ms", 15000)
    records = (parser.parse(line, lineno) for lineno, line in _lines(file_))
    with session.explained_denials("Write", name), session.producer(**options) as producer:
        # The topic is looked up (and, where the broker does that, created) once the first
        # line has parsed: input that is wrong from the start leaves no empty topic behind.
        first = next(records, None)
        if first is None:
            records = iter(())
        else:
            count = _partition_count(session, producer, name)
            if partition is not None and partition >= count:
                raise CliError(
                    f"topic {name!r} has {count} partition{'s' if count != 1 else ''}; there is no partition {partition}",
                    f"use --partition 0..{count - 1}, or add partitions with `odradek topics alter {name} --partitions N`",
                )
            records = itertools.chain([first], records)
        try:
            for key, value, headers in records:
                fut = producer.send(
                    name, value=value, key=key, headers=(headers + fixed_headers) or None, partition=partition
                )
                fut.add_done_callback(on_done)
                sent += 1
                if sync:
                    fut.exception()
                if failures:
                    break
        finally:
            producer.flush()
    if failures:
        first = failures[0]
        from odradek.cli.common import translate
        from odradek.protocol.errors import TopicAuthorizationFailedError

        if isinstance(first, TopicAuthorizationFailedError):
            err = session.not_authorized(first, "Write", "topic", name)
        else:
            err = translate(first, session) or CliError(str(first))
        err.message = f"{len(failures)} of {sent} records were not delivered to {name!r}: {err.message}"
        raise err
    delivered = sent
    if session.json:
        session.print_json(
            {
                "topic": name,
                "records": delivered,
                "partitions": {
                    str(p): {"first_offset": a, "last_offset": b} for p, (a, b) in sorted(acked.items())
                },
            }
        )
    elif not quiet:
        where = ", ".join(f"{p}@{a}..{b}" if a != b else f"{p}@{a}" for p, (a, b) in sorted(acked.items()))
        plural = "s" if delivered != 1 else ""
        click.echo(
            f"Produced {delivered} record{plural} to {name}"
            + (f" (partition@offsets {where})" if where else "")
            + ".",
            err=True,
        )
    sys.stdout.flush()
