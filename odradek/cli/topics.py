"""``odradek topics``: kafka-topics.sh as subcommands (create, list, describe, alter, delete)."""

from __future__ import annotations

import click

from odradek.cli.common import (
    CliError,
    client_command,
    one_name,
    parse_int_list,
    parse_key_values,
    topic_arguments,
)
from odradek.protocol.uuids import topic_id_text


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's syntax: partitions separated by ``,``, each a ``:``-separated broker list.

    ``0:1,1:0`` → partition 0 on brokers [0, 1], partition 1 on [1, 0].
    """
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        brokers = parse_int_list(part.replace(":", ","), "--replica-assignment")
        if len(set(brokers)) != len(brokers):
            raise click.BadParameter(
                f"partition {len(out)} lists a broker twice: {part}", param_hint="--replica-assignment"
            )
        out.append(brokers)
    if not out:
        raise click.BadParameter("empty assignment; expected e.g. 0:1,1:2", param_hint="--replica-assignment")
    if len({len(b) for b in out}) != 1:
        raise click.BadParameter(
            "every partition needs the same number of replicas", param_hint="--replica-assignment"
        )
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def topics():
    """Create, list, describe, alter and delete topics (kafka-topics.sh).

    \b
    Examples:
      odradek topics create orders --partitions 3 --config retention.ms=86400000
      odradek topics list
      odradek topics describe orders
      odradek topics alter orders --partitions 6
      odradek topics delete orders
    """


# -- create --------------------------------------------------------------------------------


@topics.command()
@topic_arguments("Topic name (or give it as an argument).")
@click.option(
    "--partitions",
    "-p",
    type=click.IntRange(min=1),
    help="Number of partitions (default: the broker's num.partitions).",
)
@click.option(
    "--replication-factor",
    "-r",
    type=click.IntRange(min=1),
    help="Replicas per partition (default: the broker's default.replication.factor).",
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config (repeatable, or comma-separated).",
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B",
    help="Brokers of each partition: partitions separated by ',', replicas by ':' (e.g. 0:1,1:0). "
    "Replaces --partitions and --replication-factor.",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
@click.option(
    "--validate-only", is_flag=True, help="Check the request on the broker without creating anything."
)
@client_command
def create(
    session,
    topic,
    topic_opt,
    partitions,
    replication_factor,
    configs,
    replica_assignment,
    if_not_exists,
    validate_only,
):
    """Create a topic.

    \b
    Examples:
      odradek topics create orders
      odradek topics create orders --partitions 6 --replication-factor 1
      odradek topics create --topic audit --config cleanup.policy=compact --config retention.ms=-1
      odradek topics create placed --replica-assignment 0,0,0      # 3 partitions on broker 0
      odradek topics create orders --if-not-exists                 # idempotent, for scripts
    """
    from odradek.client.structs import NewTopic

    name = one_name(topic, topic_opt, "topic")
    config_map = parse_key_values(configs)
    assignment = None
    if replica_assignment:
        if partitions or replication_factor:
            raise click.UsageError(
                "--replica-assignment replaces --partitions and --replication-factor; give one or the other."
            )
        assignment = dict(enumerate(parse_replica_assignment(replica_assignment)))
    new = NewTopic(name, partitions or -1, replication_factor or -1, config_map or None, assignment)
    from odradek.protocol.errors import TopicAlreadyExistsError

    created = True
    with session.admin() as admin:
        try:
            admin.create_topics([new], validate_only=validate_only)
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise CliError(
                    f"topic {name!r} already exists",
                    "choose another name, or add --if-not-exists to accept the existing topic "
                    f"(see it with `odradek topics describe {name}`)",
                ) from None
            created = False
    if session.json:
        session.print_json(
            {"topic": name, "created": created and not validate_only, "validate_only": validate_only}
        )
    elif validate_only:
        click.echo(f"Topic {name} would be created (validated only).")
    elif created:
        click.echo(f"Created topic {name}.")
    else:
        click.echo(f"Topic {name} already exists.")


# -- list ----------------------------------------------------------------------------------


@topics.command("list")
@click.option(
    "--exclude-internal", is_flag=True, help="Leave out internal topics such as __consumer_offsets."
)
@click.option("--names-only", is_flag=True, help="One name per line, like kafka-topics.sh --list.")
@client_command
def list_(session, exclude_internal, names_only):
    """List topics with their partition counts and replication factors.

    \b
    Examples:
      odradek topics list
      odradek topics list --exclude-internal --names-only
      odradek topics list -o json
    """
    with session.admin() as admin:
        described = admin.describe_topics(None)
    rows = []
    for name in sorted(described):
        d = described[name]
        if exclude_internal and d.is_internal:
            continue
        rf = max((len(p.replicas) for p in d.partitions), default=0)
        rows.append((name, len(d.partitions), rf, d.is_internal))
    if session.json:
        session.print_json(
            [{"topic": n, "partitions": p, "replication_factor": r, "internal": i} for n, p, r, i in rows]
        )
    elif names_only:
        for row in rows:
            click.echo(row[0])
    elif not rows:
        session.info("No topics. Create one with `odradek topics create NAME`.")
    else:
        session.table(
            ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"],
            [[n, p, r, "yes" if i else ""] for n, p, r, i in rows],
        )


# -- describe ------------------------------------------------------------------------------


@topics.command()
@click.argument("topic_args", nargs=-1, metavar="[TOPIC]...")
@click.option(
    "--topic", "-t", "topic_opts", multiple=True, metavar="TOPIC", help="Topic to describe (repeatable)."
)
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics when describing all.")
@click.option(
    "--under-replicated-partitions",
    is_flag=True,
    help="Only partitions whose ISR is smaller than their replica set.",
)
@click.option("--unavailable-partitions", is_flag=True, help="Only partitions without a live leader.")
@client_command
def describe(
    session, topic_args, topic_opts, exclude_internal, under_replicated_partitions, unavailable_partitions
):
    """Show partitions (Leader, Replicas, Isr) and non-default configs of topics.

    Without a topic, every topic is described. The text has kafka-topics.sh's layout.

    \b
    Examples:
      odradek topics describe orders
      odradek topics describe --topic orders --topic payments
      odradek topics describe --under-replicated-partitions
      odradek topics describe orders -o json
    """
    from odradek.client.structs import ConfigResource

    names = list(dict.fromkeys([*topic_args, *topic_opts]))
    with session.admin() as admin:
        described = admin.describe_topics(names or None)
        if not names:
            described = {n: d for n, d in described.items() if not (exclude_internal and d.is_internal)}
        configs = {}
        if described:
            resources = [ConfigResource("topic", n) for n in sorted(described)]
            for res, entries in admin.describe_configs(resources).items():
                configs[res[1]] = {
                    k: e.value
                    for k, e in sorted(entries.items())
                    if e.source == 1 or (e.source < 0 and not e.is_default)
                }
    filtered = under_replicated_partitions or unavailable_partitions
    result = []
    for name in sorted(described):
        d = described[name]
        parts = []
        for p in d.partitions:
            if under_replicated_partitions and not len(p.isr) < len(p.replicas):
                continue
            if unavailable_partitions and p.leader >= 0:
                continue
            parts.append(p)
        if filtered and not parts:
            continue
        result.append((d, parts))
    if session.json:
        session.print_json(
            [
                {
                    "topic": d.name,
                    "topic_id": topic_id_text(d.topic_id),
                    "internal": d.is_internal,
                    "partition_count": len(d.partitions),
                    "replication_factor": max((len(p.replicas) for p in d.partitions), default=0),
                    "configs": configs.get(d.name, {}),
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "offline_replicas": list(p.offline_replicas),
                        }
                        for p in parts
                    ],
                }
                for d, parts in result
            ]
        )
        return
    if not result and filtered:
        session.info("No partitions match.")
    for d, parts in result:
        rf = max((len(p.replicas) for p in d.partitions), default=0)
        conf = ",".join(f"{k}={v}" for k, v in configs.get(d.name, {}).items())
        if not filtered:
            click.echo(
                f"Topic: {d.name}\tTopicId: {topic_id_text(d.topic_id) or '-'}\tPartitionCount: {len(d.partitions)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {conf}"
            )
        for p in parts:
            line = (
                f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            click.echo(line)


# -- alter ---------------------------------------------------------------------------------


@topics.command()
@topic_arguments("Topic name (or give it as an argument).")
@click.option("--partitions", "-p", type=click.IntRange(min=1), help="The new, larger partition count.")
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B",
    help="Brokers of the new partitions (or of all partitions; the existing ones are skipped, as in Kafka).",
)
@click.option(
    "--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config (repeatable)."
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="KEY",
    help="Remove a topic config override (repeatable).",
)
@client_command
def alter(session, topic, topic_opt, partitions, replica_assignment, configs, delete_configs):
    """Add partitions to a topic, or change its configs.

    Partitions can only be added: Kafka never shrinks a topic, since keys would move.

    \b
    Examples:
      odradek topics alter orders --partitions 6
      odradek topics alter orders --partitions 4 --replica-assignment 0,0,0,0
      odradek topics alter orders --config retention.ms=3600000 --delete-config cleanup.policy
    """
    from odradek.client.structs import ConfigResource, NewPartitions

    name = one_name(topic, topic_opt, "topic")
    config_map = parse_key_values(configs)
    deletes = [k.strip() for item in delete_configs for k in item.split(",") if k.strip()]
    if not (partitions or config_map or deletes):
        raise click.UsageError("Nothing to change: give --partitions, --config or --delete-config.")
    if replica_assignment and not partitions:
        raise click.UsageError("--replica-assignment needs --partitions (the new total).")
    done = {}
    with session.admin() as admin:
        if partitions:
            current = len(admin.describe_topics([name])[name].partitions)
            if partitions < current:
                raise CliError(
                    f"topic {name!r} has {current} partitions; it cannot shrink to {partitions}",
                    f"give --partitions larger than {current}",
                )
            if partitions == current:
                raise CliError(
                    f"topic {name!r} already has {current} partitions",
                    f"give --partitions larger than {current}",
                )
            new_assignments = None
            if replica_assignment:
                assignment = parse_replica_assignment(replica_assignment)
                if len(assignment) == partitions:
                    assignment = assignment[current:]
                if len(assignment) != partitions - current:
                    raise click.BadParameter(
                        f"lists {len(assignment)} partitions; expected {partitions - current} (the new ones) or {partitions} (all)",
                        param_hint="--replica-assignment",
                    )
                new_assignments = assignment
            admin.create_partitions({name: NewPartitions(partitions, new_assignments)})
            done["partitions"] = {"from": current, "to": partitions}
        if config_map or deletes:
            changes: dict = dict(config_map)
            changes.update({k: None for k in deletes})
            admin.incremental_alter_configs({ConfigResource("topic", name): changes})
            done["configs"] = {"set": config_map, "deleted": deletes}
    if session.json:
        session.print_json({"topic": name, **done})
        return
    if "partitions" in done:
        click.echo(f"Topic {name}: partitions {done['partitions']['from']} -> {partitions}.")
    if config_map:
        click.echo(f"Topic {name}: set {', '.join(f'{k}={v}' for k, v in config_map.items())}.")
    if deletes:
        click.echo(f"Topic {name}: removed {', '.join(deletes)}.")


# -- delete --------------------------------------------------------------------------------


@topics.command()
@click.argument("topic_args", nargs=-1, metavar="[TOPIC]...")
@click.option(
    "--topic", "-t", "topic_opts", multiple=True, metavar="TOPIC", help="Topic to delete (repeatable)."
)
@click.option("--if-exists", is_flag=True, help="Succeed when a topic does not exist.")
@client_command
def delete(session, topic_args, topic_opts, if_exists):
    """Delete topics and their data.

    \b
    Examples:
      odradek topics delete orders
      odradek topics delete --topic orders --topic payments --if-exists
    """
    names = list(dict.fromkeys([*topic_args, *topic_opts]))
    if not names:
        raise click.UsageError("Missing topic name: give it as an argument or with --topic.")
    deleted, missing = [], []
    with session.admin() as admin:
        existing = set(admin.list_topics(internal=True))
        for name in names:
            (deleted if name in existing else missing).append(name)
        if missing and not if_exists:
            raise CliError(
                f"topic{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                f"do{'' if len(missing) > 1 else 'es'} not exist",
                "check the names with `odradek topics list`, or add --if-exists",
            )
        if deleted:
            admin.delete_topics(deleted)
    if session.json:
        session.print_json({"deleted": deleted, "missing": missing})
        return
    for name in deleted:
        click.echo(f"Deleted topic {name}.")
    for name in missing:
        session.info(f"Topic {name} does not exist.")
