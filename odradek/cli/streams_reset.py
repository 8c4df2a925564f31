"""``odradek streams reset``: kafka-streams-application-reset.sh for Odradek's Streams apps.

A Streams app's ``application.id`` is its consumer group, the prefix of its internal topics and the
name of its checkpoint directory under ``state.dir``. Resetting it so that it reprocesses its input
from the start:

1. the group's committed offsets: input topics to their earliest offsets, intermediate topics
   (written and read back by the app) to their ends, as Kafka's tool does; the group must be inactive;
2. the internal topics deleted: ``<application.id>-...-changelog`` and ``<application.id>-...-repartition``;
3. the checkpoints removed: ``<state.dir>/<application.id>`` (Spark's checkpoint and state store live
   there: without this, Spark would resume from its own offsets whatever the group says).

``--dry-run`` prints the plan and changes nothing. Against a secured broker, the client security
keys (``security.protocol``, ``sasl.*``, ``ssl.*``) come from a properties file, ``--config-file`` as
Kafka's tool names it (``--command-config``, the other tools' name, works too).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import click

from .common import CliError, Session, client_command

_INACTIVE = {"Empty", "Dead"}
DEFAULT_STATE_DIR = os.path.join(tempfile.gettempdir(), "kafka-streams")  # Kafka Streams' default


def internal_topics(application_id: str, topics: list[str]) -> list[str]:
    """The app's internal topics among ``topics``, named as Kafka Streams names them."""
    prefix = application_id + "-"
    return sorted(t for t in topics if t.startswith(prefix) and t.endswith(("-changelog", "-repartition")))


@click.group()
def streams():
    """Kafka Streams apps on Spark (this group holds `reset` until `odradek streams` is wired)."""


@streams.command("reset")
@click.option("--application-id", required=True, help="The app's application.id (its consumer group).")
@click.option(
    "--input-topics", default="", metavar="T1,T2", help="Input topics: their offsets go back to the start."
)
@click.option(
    "--intermediate-topics",
    default="",
    metavar="T1,T2",
    help="Topics the app writes and reads back (through(), to() then stream()): offsets go to their ends.",
)
@click.option(
    "--state-dir",
    default=DEFAULT_STATE_DIR,
    show_default=True,
    type=click.Path(file_okay=False),
    help="The app's state.dir: <state-dir>/<application-id> (checkpoints, state) is removed.",
)
@click.option(
    "--config-file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Client properties (Kafka's tool's name for --command-config): security.protocol, sasl.*, ssl.*.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
@client_command
def reset(session, application_id, input_topics, intermediate_topics, state_dir, config_file, dry_run):
    """Reset a Streams app to reprocess its input from the start (kafka-streams-application-reset).

    Stop every instance of the app first: the group must have no members.

    \b
    Examples:
      odradek streams reset --application-id wordcount --input-topics lines
      odradek streams reset --application-id wordcount --input-topics lines,more --dry-run
      odradek streams reset --application-id wordcount --input-topics lines \\
          -b broker:9094 --config-file client.properties   # security.protocol=SASL_SSL, sasl.*, ssl.*
    """
    if config_file:
        if session.command_config:
            raise CliError("both --config-file and --command-config given", "give one properties file")
        session = Session(session.bootstrap, config_file, session.output)
    from odradek.client.structs import TopicPartition

    inputs = [t for t in input_topics.split(",") if t]
    intermediates = [t for t in intermediate_topics.split(",") if t]
    checkpoint = os.path.join(state_dir, application_id)
    with session.admin() as admin:
        state = admin.describe_groups([application_id])[application_id].state
        if state not in _INACTIVE:
            raise CliError(
                f"the app '{application_id}' is running: its consumer group is {state}",
                "stop every instance of the app, then reset it",
            )
        existing = admin.list_topics()
        missing = sorted(set(inputs + intermediates) - set(existing))
        if missing:
            raise CliError(
                f"no such topic: {', '.join(missing)}", "check --input-topics and --intermediate-topics"
            )
        named = inputs + intermediates
        described = admin.describe_topics(named) if named else {}
        tps = {t: [TopicPartition(t, p.partition) for p in described[t].partitions] for t in named}
        with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
            starts = consumer.beginning_offsets([tp for t in inputs for tp in tps[t]]) if inputs else {}
            ends = consumer.end_offsets([tp for t in intermediates for tp in tps[t]]) if intermediates else {}
        offsets = {**starts, **ends}
        internal = internal_topics(application_id, existing)
        if not dry_run:
            if offsets:
                admin.alter_group_offsets(application_id, offsets)
            if internal:
                admin.delete_topics(internal)
            if os.path.isdir(checkpoint):
                shutil.rmtree(checkpoint)
    plan = {
        "application_id": application_id,
        "executed": not dry_run,
        "offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": off}
            for tp, off in sorted(offsets.items())
        ],
        "deleted_topics": internal,
        "removed_checkpoint": checkpoint if os.path.isdir(checkpoint) or not dry_run else None,
    }
    if session.json:
        session.print_json(plan)
        return
    verb = "Would" if dry_run else "Did"
    session.table(
        ["TOPIC", "PARTITION", "NEW-OFFSET"],
        [[o["topic"], o["partition"], o["offset"]] for o in plan["offsets"]],
    )
    session.info(f"{verb} delete internal topics: {', '.join(internal) or '(none)'}")
    session.info(f"{verb} remove the checkpoints in {checkpoint}")
    if dry_run:
        session.info("Dry run: nothing was changed.")
