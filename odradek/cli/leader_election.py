"""``odradek leader-election``: elect partition leaders now (kafka-leader-election.sh)."""

from __future__ import annotations

import json

import click

from odradek.cli.common import CliError, client_command


@click.command("leader-election")
@click.option(
    "--election-type",
    type=click.Choice(["preferred", "unclean"], case_sensitive=False),
    required=True,
    help="preferred: give leadership back to each partition's first replica, if it is in sync. "
    "unclean: elect a leader from any live replica where no in-sync one is left (records may be lost).",
)
@click.option("--topic", default=None, help="The topic (all its partitions, or --partition).")
@click.option("--partition", type=int, default=None, help="One partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option(
    "--path-to-json-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help='Partitions as Kafka\'s JSON: {"partitions":[{"topic":"t","partition":0}]}.',
)
@client_command
def leader_election(session, election_type, topic, partition, all_topic_partitions, path_to_json_file):
    """Elect leaders for the partitions named (ElectLeaders, KIP-460).

    \b
    Examples:
      odradek leader-election --election-type preferred --all-topic-partitions
      odradek leader-election --election-type preferred --topic orders --partition 3
      odradek leader-election --election-type unclean --path-to-json-file partitions.json
    """
    from odradek.client.structs import TopicPartition
    from odradek.protocol import errors

    chosen = sum(bool(x) for x in (topic, all_topic_partitions, path_to_json_file))
    if chosen != 1:
        raise click.UsageError("name the partitions one way: --topic, --all-topic-partitions or --path-to-json-file")
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    with session.admin() as admin:
        if all_topic_partitions:
            partitions = None
        elif path_to_json_file:
            try:
                with open(path_to_json_file) as f:
                    data = json.load(f)
                partitions = [TopicPartition(p["topic"], int(p["partition"])) for p in data["partitions"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise CliError(
                    f"cannot read {path_to_json_file}: {exc}", 'expected {"partitions":[{"topic":"t","partition":0}]}'
                ) from None
        elif partition is not None:
            partitions = [TopicPartition(topic, partition)]
        else:
            described = admin.describe_topics([topic])
            partitions = [TopicPartition(topic, p.partition) for p in described[topic].partitions]
        results = admin.elect_leaders(partitions, 0 if election_type.lower() == "preferred" else 1)
    rows = []
    failed = 0
    for tp, exc in sorted(results.items()):
        if exc is None:
            status = "elected"
        elif isinstance(exc, errors.ElectionNotNeededError):
            status = "not needed"
        else:
            status, failed = f"failed: {exc}", failed + 1
        rows.append([f"{tp.topic}-{tp.partition}", status])
    if session.json:
        session.print_json([{"partition": p, "result": s} for p, s in rows])
    else:
        session.table(["PARTITION", "RESULT"], rows)
    if failed:
        raise SystemExit(1)
