"""``odradek configs``: kafka-configs.sh for topics and brokers (describe, alter)."""

from __future__ import annotations

import click

from odradek.cli.common import CliError, client_command, parse_key_values, translate

# DescribeConfigs config_source → the names kafka-configs.sh prints.
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_TYPES = {
    "topic": "topics",
    "topics": "topics",
    "broker": "brokers",
    "brokers": "brokers",
    "user": "users",
    "users": "users",
    "client": "clients",
    "clients": "clients",
}
_QUOTA_ENTITY = {"users": "user", "clients": "client-id"}


def _entity(
    entity_type, entity_name, topic, broker, pos_type, pos_name, entity_default=False
) -> tuple[str, str | None]:
    """Resolve the many spellings (Kafka's and positional) to ("topics"|"brokers", name|None);
    the cluster-wide broker defaults (--entity-default) are the broker named ""."""
    if entity_default:
        if entity_name is not None or topic is not None or broker is not None or pos_name is not None:
            raise click.UsageError("--entity-default names the cluster-wide defaults: give no broker id.")
        kind = _TYPES.get((entity_type or pos_type or "brokers").lower())
        if kind not in ("brokers", "users", "clients"):
            raise click.UsageError("--entity-default applies to brokers, users and clients.")
        return kind, ""
    given = []
    if topic is not None:
        given.append(("topics", topic))
    if broker is not None:
        given.append(("brokers", broker))
    if entity_type is not None or entity_name is not None:
        if entity_type is None:
            raise click.UsageError("--entity-name needs --entity-type topics|brokers.")
        given.append((_TYPES[entity_type], entity_name))
    if pos_type is not None:
        if pos_type.lower() not in _TYPES:
            raise click.UsageError(f"Unknown entity type {pos_type!r}: use topics or brokers.")
        given.append((_TYPES[pos_type.lower()], pos_name))
    if not given:
        raise click.UsageError(
            "Say what to describe: --topic NAME, --broker ID, or --entity-type topics|brokers [--entity-name NAME]."
        )
    if len(given) > 1:
        raise click.UsageError(
            "Give one entity: --topic, --broker, --entity-type/--entity-name, or TYPE NAME."
        )
    return given[0]


def _entity_options(fn):
    fn = click.option(
        "--broker", metavar="ID", help="A broker (same as --entity-type brokers --entity-name ID)."
    )(fn)
    fn = click.option(
        "--topic", "-t", metavar="TOPIC", help="A topic (same as --entity-type topics --entity-name TOPIC)."
    )(fn)
    fn = click.option(
        "--entity-default",
        is_flag=True,
        help="The cluster-wide broker defaults (dynamic configs every broker takes unless it has its own).",
    )(fn)
    fn = click.option("--entity-name", metavar="NAME", help="Topic name or broker id.")(fn)
    fn = click.option("--entity-type", type=click.Choice(sorted(_TYPES)), help="topics, brokers, users (quotas) or clients (quotas).")(fn)
    fn = click.argument("pos_name", required=False, metavar="[NAME]")(fn)
    fn = click.argument("pos_type", required=False, metavar="[topics|brokers]")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def configs():
    """Describe and alter topic and broker configs (kafka-configs.sh).

    Broker configs come from server.properties; those Kafka can change at run time
    (read_only=false in `describe --all -o json`) can also be set dynamically, for one
    broker or as the cluster-wide default. Dynamic configs apply at once and survive restarts.

    \b
    Examples:
      odradek configs describe --topic orders
      odradek configs describe --entity-type brokers --entity-name 0 --all
      odradek configs alter --topic orders --add-config retention.ms=86400000,cleanup.policy=compact
      odradek configs alter --topic orders --delete-config retention.ms
      odradek configs alter --entity-type brokers --entity-default --add-config log.retention.ms=3600000
      odradek configs alter --entity-type brokers --entity-name 0 --add-config message.max.bytes=2097152
    """


@configs.command()
@_entity_options
@click.option(
    "--all", "show_all", is_flag=True, help="Every config, defaults included (default: only those set)."
)
@client_command
def describe(session, pos_type, pos_name, entity_type, entity_name, entity_default, topic, broker, show_all):
    """Show the configs set on a topic or broker (with --all: every config in force).

    Without a name, every topic (or broker) is described. A broker's configs show where
    each value comes from: DYNAMIC_BROKER_CONFIG (set for that broker at run time),
    DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide default), STATIC_BROKER_CONFIG
    (server.properties) or DEFAULT_CONFIG.

    \b
    Examples:
      odradek configs describe --topic orders
      odradek configs describe topics orders --all
      odradek configs describe --entity-type topics                 # every topic
      odradek configs describe --broker 0 --all -o json
      odradek configs describe --entity-type brokers --entity-default
    """
    from odradek.client.structs import ConfigResource

    kind, name = _entity(entity_type, entity_name, topic, broker, pos_type, pos_name, entity_default)
    if kind in _QUOTA_ENTITY:
        describe_quotas(session, kind, name)
        return
    with session.admin() as admin:
        if name is None:
            if kind == "topics":
                names = admin.list_topics()
            else:
                names = [str(b.node_id) for b in admin.describe_cluster().brokers]
        else:
            names = [name]
        rtype = "topic" if kind == "topics" else "broker"
        described = admin.describe_configs([ConfigResource(rtype, n) for n in names]) if names else {}
    results = []
    for res, entries in described.items():
        rows = []
        for e in sorted(entries.values()):
            if not show_all and (e.is_default or e.source == 5):
                continue
            rows.append(e)
        results.append((res[1], rows))
    results.sort(key=lambda r: r[0])
    if session.json:
        session.print_json(
            [
                {
                    "entity_type": kind,
                    "entity_name": n,
                    "configs": [
                        {
                            "name": e.name,
                            "value": None if e.is_sensitive else e.value,
                            "source": SOURCES.get(e.source, str(e.source)),
                            "read_only": e.read_only,
                            "sensitive": e.is_sensitive,
                        }
                        for e in rows
                    ],
                }
                for n, rows in results
            ]
        )
        return
    for i, (n, rows) in enumerate(results):
        if i:
            click.echo()
        what = "topic" if kind == "topics" else "broker"
        if kind == "brokers" and n == "":
            label = "Cluster-wide default configs for brokers"
        else:
            label = f"Configs for {what} '{n}'" if show_all else f"Configs set on {what} '{n}'"
        if not rows:
            click.echo(f"{label}: none (everything at its default; --all shows the values in force).")
            continue
        click.echo(f"{label}:")
        session.table(
            ["NAME", "VALUE", "SOURCE"],
            [
                [e.name, "(sensitive)" if e.is_sensitive else e.value, SOURCES.get(e.source, str(e.source))]
                for e in rows
            ],
        )


@configs.command()
@_entity_options
@click.option(
    "--add-config",
    "add",
    multiple=True,
    metavar="K=V[,K=V]",
    help="Configs to set; list values in [a,b] (repeatable).",
)
@click.option(
    "--delete-config",
    "delete",
    multiple=True,
    metavar="K[,K]",
    help="Configs to remove, back to their defaults (repeatable).",
)
@click.option("--validate-only", is_flag=True, help="Check the change on the broker without applying it.")
@client_command
def alter(
    session, pos_type, pos_name, entity_type, entity_name, entity_default, topic, broker, add, delete, validate_only
):
    """Set or remove configs of a topic or broker (incrementally: other configs stay).

    A broker takes the keys Kafka can change at run time (log.retention.ms,
    message.max.bytes, log.cleaner.*, ...) for itself (--entity-name ID) or for every
    broker (--entity-default); --delete-config returns a key to the next level down.

    \b
    Examples:
      odradek configs alter --topic orders --add-config retention.ms=86400000
      odradek configs alter --entity-type topics --entity-name orders \\
                            --add-config 'cleanup.policy=[compact,delete],min.compaction.lag.ms=0'
      odradek configs alter topics orders --delete-config retention.ms,cleanup.policy
      odradek configs alter --entity-type brokers --entity-name 0 --add-config log.cleaner.threads=2
      odradek configs alter --entity-type brokers --entity-default --delete-config log.retention.ms
      odradek configs alter --entity-type clients --entity-name app --add-config producer_byte_rate=1048576
      odradek configs alter --entity-type users --entity-default --add-config consumer_byte_rate=2097152
    """
    from odradek.client.structs import ConfigResource

    kind, name = _entity(entity_type, entity_name, topic, broker, pos_type, pos_name, entity_default)
    if name is None:
        raise click.UsageError(
            f"Name the {kind[:-1]} to alter (--entity-name)"
            + (", or --entity-default for every broker." if kind == "brokers" else ".")
        )
    to_set = parse_key_values(add, "--add-config")
    to_delete = [k.strip() for item in delete for k in item.split(",") if k.strip()]
    if not (to_set or to_delete):
        raise click.UsageError("Nothing to change: give --add-config and/or --delete-config.")
    both = set(to_set) & set(to_delete)
    if both:
        raise click.UsageError(f"{', '.join(sorted(both))} both added and deleted.")
    changes: dict = dict(to_set)
    changes.update({k: None for k in to_delete})
    if kind in _QUOTA_ENTITY:
        _alter_quotas(session, kind, name, changes, validate_only)
        return
    rtype = "topic" if kind == "topics" else "broker"
    what = "the cluster-wide broker defaults" if name == "" else f"{rtype} '{name}'"
    from odradek.protocol.errors import KafkaError

    with session.admin() as admin:
        try:
            admin.incremental_alter_configs(
                {ConfigResource(rtype, name): changes}, validate_only=validate_only
            )
        except KafkaError as exc:
            if rtype != "broker":
                raise
            message = translate(exc).message.replace("broker '':", "the cluster-wide broker defaults:")
            hint = (
                "only keys with read_only=false in `odradek configs describe --broker ID --all -o json` "
                "change at run time; set the others in server.properties and restart"
                if "dynamically" in exc.message
                else None
            )
            raise CliError(message, hint) from None
    if session.json:
        session.print_json(
            {
                "entity_type": kind,
                "entity_name": name,
                "set": to_set,
                "deleted": to_delete,
                "validate_only": validate_only,
            }
        )
    elif validate_only:
        click.echo(f"The change to {what} is valid (nothing applied).")
    elif name == "":
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        click.echo(f"Completed updating config for {rtype} {name}.")


def _alter_quotas(session, kind: str, name: str, changes: dict, validate_only: bool) -> None:
    """Client quotas of a user or client id (KIP-546): producer_byte_rate, consumer_byte_rate."""
    try:
        values = {k: None if v is None else float(v) for k, v in changes.items()}
    except ValueError:
        raise click.UsageError("quota values are numbers, e.g. producer_byte_rate=1048576") from None
    entity = {_QUOTA_ENTITY[kind]: name or None}
    with session.admin() as admin:
        admin.alter_client_quotas(entity, values, validate_only=validate_only)
    who = f"the default {kind[:-1]}" if not name else f"{kind[:-1]} '{name}'"
    session.info(f"{'Checked' if validate_only else 'Altered'} quotas of {who}.")


def describe_quotas(session, kind: str, name: str | None) -> None:
    with session.admin() as admin:
        found = admin.describe_client_quotas(_QUOTA_ENTITY[kind], name or None, default=name == "")
    rows = [
        [", ".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity.items()), key, value]
        for entity, quotas in found
        for key, value in sorted(quotas.items())
    ]
    if session.json:
        session.print_json([{"entity": e, "quotas": q} for e, q in found])
        return
    session.table(["ENTITY", "QUOTA", "VALUE"], rows)
