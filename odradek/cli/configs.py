"""``odradek configs``: kafka-configs.sh for topics and brokers, and the client quotas of users,
client ids and IP addresses (describe, alter)."""

from __future__ import annotations

import click

from odradek.cli.common import CliError, client_command, parse_key_values, translate
from odradek.client.security_admin import DEFAULT_ENTITY
from odradek.config_def import NO_EFFECT

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
    "ip": "ips",
    "ips": "ips",
}
_QUOTA_ENTITY = {"users": "user", "clients": "client-id", "ips": "ip"}
# --entity-default shares --entity-name's list, so that names and defaults keep their order.
_DEFAULT = "\0default"
QUOTAS = "quotas"


def _entity(
    entity_types, entity_names, topic, broker, pos_type, pos_name
) -> tuple[str, str | None] | tuple[str, list[tuple[str, str | None]]]:
    """Resolve the many spellings (Kafka's and positional) to ("topics"|"brokers", name|None)
    (the cluster-wide broker defaults, --entity-default, are the broker named ""), or to
    (QUOTAS, [(quota entity type, name | "" for its default | None for any)]): quota
    entities take one --entity-type each, the i-th --entity-name / --entity-default naming
    the i-th type, as kafka-configs pairs them."""
    kinds = [_TYPES[t.lower()] for t in entity_types]
    if any(k in _QUOTA_ENTITY for k in kinds):
        return QUOTAS, _quota_entity(kinds, entity_names, topic, broker, pos_type)
    if len(kinds) > 1 or len(entity_names) > 1:
        raise click.UsageError("Give one --entity-type and one --entity-name (several only for users and clients).")
    entity_type = entity_types[0] if entity_types else None
    entity_name = entity_names[0] if entity_names else None
    if entity_name == _DEFAULT:
        if topic is not None or broker is not None or pos_name is not None:
            raise click.UsageError("--entity-default names the cluster-wide defaults: give no broker id.")
        kind = _TYPES.get((entity_type or pos_type or "brokers").lower())
        if kind != "brokers":
            raise click.UsageError("--entity-default applies to brokers, users, clients and ips.")
        return kind, ""
    given = []
    if topic is not None:
        given.append(("topics", topic))
    if broker is not None:
        given.append(("brokers", broker))
    if entity_type is not None or entity_name is not None:
        if entity_type is None:
            raise click.UsageError("--entity-name needs --entity-type topics|brokers|users|clients|ips.")
        given.append((_TYPES[entity_type.lower()], entity_name))
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


def _quota_entity(kinds, names, topic, broker, pos_type) -> list[tuple[str, str | None]]:
    if topic is not None or broker is not None or pos_type is not None:
        raise click.UsageError("Quota entities (users, clients, ips) go with --entity-type/--entity-name only.")
    if any(k not in _QUOTA_ENTITY for k in kinds):
        raise click.UsageError("users, clients and ips cannot be combined with topics or brokers.")
    if len(set(kinds)) != len(kinds):
        raise click.UsageError("Give each of users and clients at most once.")
    if "ips" in kinds and len(kinds) > 1:
        raise click.UsageError("ips cannot be combined with users or clients.")
    if len(names) > len(kinds):
        raise click.UsageError("More --entity-name/--entity-default than --entity-type: give one type before each name.")
    padded = list(names) + [None] * (len(kinds) - len(names))
    return [(_QUOTA_ENTITY[k], "" if n == _DEFAULT else n) for k, n in zip(kinds, padded, strict=True)]


def _entity_options(fn):
    fn = click.option(
        "--broker", metavar="ID", help="A broker (same as --entity-type brokers --entity-name ID)."
    )(fn)
    fn = click.option(
        "--topic", "-t", metavar="TOPIC", help="A topic (same as --entity-type topics --entity-name TOPIC)."
    )(fn)
    fn = click.option(
        "--entity-default",
        "entity_names",
        flag_value=_DEFAULT,
        multiple=True,
        help="The default entity of the --entity-type before it: the cluster-wide broker defaults "
        "(dynamic configs every broker takes unless it has its own), or the default user, client id or ip.",
    )(fn)
    fn = click.option(
        "--entity-name",
        "entity_names",
        metavar="NAME",
        multiple=True,
        help="Topic name, broker id, user, client id or IP address; the i-th names the i-th --entity-type.",
    )(fn)
    fn = click.option(
        "--entity-type",
        "entity_types",
        type=click.Choice(sorted(_TYPES), case_sensitive=False),
        multiple=True,
        help="topics, brokers, or for quotas users, clients (both together for a user's client id) or ips.",
    )(fn)
    fn = click.argument("pos_name", required=False, metavar="[NAME]")(fn)
    fn = click.argument("pos_type", required=False, metavar="[topics|brokers]")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def configs():
    """Describe and alter topic and broker configs, and client quotas (kafka-configs.sh).

    Broker configs come from server.properties; those Kafka can change at run time
    (read_only=false in `describe --all -o json`) can also be set dynamically, for one
    broker or as the cluster-wide default. Dynamic configs apply at once and survive restarts.
    Quotas belong to users, client ids, a user's client id, or IP addresses.

    \b
    Examples:
      odradek configs describe --topic orders
      odradek configs describe --entity-type brokers --entity-name 0 --all
      odradek configs alter --topic orders --add-config retention.ms=86400000,cleanup.policy=compact
      odradek configs alter --topic orders --delete-config retention.ms
      odradek configs alter --entity-type brokers --entity-default --add-config log.retention.ms=3600000
      odradek configs alter --entity-type brokers --entity-name 0 --add-config message.max.bytes=2097152
      odradek configs alter --entity-type users --entity-name alice --entity-type clients \\
                            --entity-name app --add-config producer_byte_rate=1048576
    """


@configs.command()
@_entity_options
@click.option(
    "--all", "show_all", is_flag=True, help="Every config, defaults included (default: only those set)."
)
@client_command
def describe(session, pos_type, pos_name, entity_types, entity_names, topic, broker, show_all):
    """Show the configs set on a topic or broker (with --all: every config in force).

    Without a name, every topic (or broker) is described. A broker's configs show where
    each value comes from: DYNAMIC_BROKER_CONFIG (set for that broker at run time),
    DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide default), STATIC_BROKER_CONFIG
    (server.properties) or DEFAULT_CONFIG. NOTE says "no effect in Odradek" for Kafka keys
    Odradek accepts but does not use (thread counts, Java plugin classes, KRaft keys, ...).

    \b
    Examples:
      odradek configs describe --topic orders
      odradek configs describe topics orders --all
      odradek configs describe --entity-type topics                 # every topic
      odradek configs describe --broker 0 --all -o json
      odradek configs describe --entity-type brokers --entity-default
      odradek configs describe --entity-type users --entity-name alice --entity-type clients
      odradek configs describe --entity-type ips                      # every IP with a quota

    Quotas: each --entity-type with an --entity-name (or --entity-default) shows that
    entity; one without a name shows every named entity of that type. Only entities of
    exactly the given types are listed, as kafka-configs lists them.
    """
    from odradek.client.structs import ConfigResource

    kind, name = _entity(entity_types, entity_names, topic, broker, pos_type, pos_name)
    if kind == QUOTAS:
        describe_quotas(session, name)
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
        resources = [ConfigResource(rtype, n) for n in names]
        described = admin.describe_configs(resources, include_documentation=True) if names else {}
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
                            "effect": not _no_effect(e),
                            "documentation": e.documentation,
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
            ["NAME", "VALUE", "SOURCE", "NOTE"],
            [
                [
                    e.name,
                    "(sensitive)" if e.is_sensitive else e.value,
                    SOURCES.get(e.source, str(e.source)),
                    NO_EFFECT if _no_effect(e) else "",
                ]
                for e in rows
            ],
        )


def _no_effect(entry) -> bool:
    """A key the broker accepts without effect (its documentation says so; Kafka's never does)."""
    return NO_EFFECT in (entry.documentation or "")


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
def alter(session, pos_type, pos_name, entity_types, entity_names, topic, broker, add, delete, validate_only):
    """Set or remove configs of a topic or broker, or quotas (incrementally: others stay).

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
      odradek configs alter --entity-type users --entity-name alice --entity-type clients \\
                            --entity-name app --add-config producer_byte_rate=1024,request_percentage=50
      odradek configs alter --entity-type ips --entity-default --add-config connection_creation_rate=10

    Quota keys: producer_byte_rate and consumer_byte_rate (bytes a second),
    request_percentage (percent of one thread's time) for users and clients;
    connection_creation_rate (new connections a second) for ips.
    """
    from odradek.client.structs import ConfigResource

    kind, name = _entity(entity_types, entity_names, topic, broker, pos_type, pos_name)
    if kind == QUOTAS:
        if any(n is None for _, n in name):
            raise click.UsageError("Give --entity-name or --entity-default after each --entity-type.")
    elif name is None:
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
    if kind == QUOTAS:
        _alter_quotas(session, name, changes, validate_only)
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


def _describe_entity(entity: list[tuple[str, str | None]]) -> str:
    """As kafka-configs names them: user-principal 'alice', the default client-id."""
    labels = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    return ", ".join(f"the default {labels[t]}" if not n else f"{labels[t]} '{n}'" for t, n in entity)


def _alter_quotas(session, entity: list[tuple[str, str | None]], changes: dict, validate_only: bool) -> None:
    """Client quotas of a user, a client id, both, or an IP address (KIP-546)."""
    try:
        values = {k: None if v is None else float(v) for k, v in changes.items()}
    except ValueError:
        raise click.UsageError("quota values are numbers, e.g. producer_byte_rate=1048576") from None
    with session.admin() as admin:
        admin.alter_client_quotas({t: n or None for t, n in entity}, values, validate_only=validate_only)
    session.info(f"{'Checked' if validate_only else 'Altered'} quotas of {_describe_entity(entity)}.")


def describe_quotas(session, entity: list[tuple[str, str | None]]) -> None:
    with session.admin() as admin:
        found = admin.describe_client_quotas(
            {t: DEFAULT_ENTITY if n == "" else n for t, n in entity}, strict=True
        )
    rows = [
        [", ".join(f"{t}={n if n is not None else '<default>'}" for t, n in e.items()), key, value]
        for e, quotas in found
        for key, value in sorted(quotas.items())
    ]
    if session.json:
        session.print_json([{"entity": e, "quotas": q} for e, q in found])
        return
    session.table(["ENTITY", "QUOTA", "VALUE"], rows)
