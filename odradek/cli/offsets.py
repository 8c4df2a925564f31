"""``odradek offsets``: kafka-get-offsets.sh — earliest, latest or by-time offsets per partition."""

from __future__ import annotations

import click

from odradek.cli.common import (
    CliError,
    client_command,
    millis_to_iso,
    one_name,
    parse_int_list,
    parse_time,
    topic_arguments,
)


@click.command()
@topic_arguments()
@click.option(
    "--time",
    "when",
    default="latest",
    show_default=True,
    metavar="latest|earliest|max-timestamp|TIME",
    help="Which offset: latest (-1), earliest (-2), max-timestamp (-3), or the first at or after TIME "
    "(epoch ms or ISO date-time).",
)
@click.option("--partitions", metavar="P[,P]", help="Only these partitions (default: all).")
@client_command
def offsets(session, topic, topic_opt, when, partitions):
    """Offsets of a topic's partitions: latest, earliest, or the first at or after a time.

    Without a topic, the latest and earliest offsets of every partition are shown side by
    side (LOG-START-OFFSET, LOG-END-OFFSET).

    \b
    Examples:
      odradek offsets orders                       # latest and earliest
      odradek offsets orders --time earliest
      odradek offsets orders --time 2024-05-01T12:00:00 --partitions 0,1
      odradek offsets orders --time max-timestamp -o json
    """
    from odradek.client.structs import TopicPartition

    name = one_name(topic, topic_opt, "topic")
    keyword = {"-1": "latest", "-2": "earliest", "-3": "max-timestamp"}.get(
        when.strip(), when.strip().lower()
    )
    with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
        if name not in consumer.topics():
            raise CliError(f"topic {name!r} does not exist", "check the name with `odradek topics list`")
        all_parts = sorted(consumer.partitions_for_topic(name))
        wanted = parse_int_list(partitions, "--partitions") if partitions else all_parts
        bad = sorted(set(wanted) - set(all_parts))
        if bad:
            raise CliError(
                f"topic {name!r} has no partition {', '.join(map(str, bad))}",
                f"use partitions 0..{len(all_parts) - 1}",
            )
        tps = [TopicPartition(name, p) for p in wanted]
        rows = []
        if keyword in ("latest", "earliest"):
            ends = consumer.end_offsets(tps)
            starts = consumer.beginning_offsets(tps)
            for tp in tps:
                rows.append(
                    {
                        "topic": name,
                        "partition": tp.partition,
                        "offset": (ends if keyword == "latest" else starts)[tp],
                        "log_start_offset": starts[tp],
                        "log_end_offset": ends[tp],
                    }
                )
        else:
            if keyword == "max-timestamp":
                found = _max_timestamp(consumer, tps)
            else:
                found = consumer.offsets_for_times({tp: parse_time(when, "--time") for tp in tps})
            for tp in tps:
                ot = found.get(tp)
                rows.append(
                    {
                        "topic": name,
                        "partition": tp.partition,
                        "offset": ot.offset if ot else None,
                        "timestamp": ot.timestamp if ot else None,
                    }
                )
    if session.json:
        session.print_json(rows)
    elif keyword in ("latest", "earliest"):
        session.table(
            ["TOPIC", "PARTITION", "OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET"],
            [
                [r["topic"], r["partition"], r["offset"], r["log_start_offset"], r["log_end_offset"]]
                for r in rows
            ],
        )
    else:
        session.table(
            ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "DATETIME"],
            [
                [r["topic"], r["partition"], r["offset"], r["timestamp"], millis_to_iso(r["timestamp"])]
                for r in rows
            ],
        )
        if any(r["offset"] is None for r in rows):
            session.info("'-': no record at or after that time in the partition.")


def _max_timestamp(consumer, tps) -> dict:
    """ListOffsets with timestamp -3 (MAX_TIMESTAMP, KIP-734): the record with the largest timestamp."""
    from odradek.client.structs import OffsetAndTimestamp

    found = consumer._thread.run(consumer._aio._lookup({tp: -3 for tp in tps}, None))
    return {tp: OffsetAndTimestamp(v[0], v[1]) if v and v[0] >= 0 else None for tp, v in found.items()}
