"""``odradek groups``: kafka-consumer-groups.sh (list, describe, delete, reset-offsets, delete-offsets)."""

from __future__ import annotations

import re
import time

import click

from odradek.cli.common import CliError, client_command, one_name, parse_int_list, parse_time

_GROUP_OPTION = click.option(
    "--group", "-g", "group_opt", metavar="GROUP", help="Group id (or give it as an argument)."
)
_INACTIVE = {"Empty", "Dead"}


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def groups():
    """List, describe and delete consumer groups; reset their committed offsets.

    \b
    Examples:
      odradek groups list
      odradek groups describe billing
      odradek groups reset-offsets billing --topic orders --to-earliest --execute
      odradek groups delete billing
    """


def _topic_partitions(specs, admin) -> list:
    """``--topic orders`` (all partitions) or ``--topic orders:0,2``."""
    from odradek.client.structs import TopicPartition

    out = []
    names = []
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if sep:
            out += [TopicPartition(name, p) for p in parse_int_list(parts, "--topic")]
        else:
            names.append(name)
    if names:
        described = admin.describe_topics(names)
        for name in names:
            out += [TopicPartition(name, p.partition) for p in described[name].partitions]
    return sorted(set(out))


def _log_offsets(session, tps, how: str) -> dict:
    if not tps:
        return {}
    with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
        if how == "earliest":
            return consumer.beginning_offsets(tps)
        return consumer.end_offsets(tps)


# -- list ----------------------------------------------------------------------------------


@groups.command("list")
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only groups in this state (Stable, Empty, ...; repeatable).",
)
@client_command
def list_(session, states):
    """List consumer groups with their type (classic, or consumer for KIP-848's protocol) and state.

    \b
    Examples:
      odradek groups list
      odradek groups list --state Stable
      odradek groups list -o json
    """
    with session.admin() as admin:
        listing = admin.list_groups()
    wanted = {s.lower() for s in states}
    rows = [g for g in listing if not wanted or (g.state or "").lower() in wanted]
    if session.json:
        session.print_json(
            [
                {"group": g.group_id, "type": g.group_type, "state": g.state, "protocol_type": g.protocol_type}
                for g in rows
            ]
        )
    elif not rows:
        session.info("No consumer groups.")
    else:
        session.table(
            ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
            [[g.group_id, g.group_type, g.state, g.protocol_type or ""] for g in rows],
        )


# -- describe ------------------------------------------------------------------------------


@groups.command()
@click.argument("group_args", nargs=-1, metavar="[GROUP]...")
@click.option(
    "--group", "-g", "group_opts", multiple=True, metavar="GROUP", help="Group to describe (repeatable)."
)
@click.option("--all-groups", is_flag=True, help="Describe every group.")
@click.option("--members", is_flag=True, help="Show the members instead of the offsets.")
@click.option(
    "--state", "show_state", is_flag=True, help="Show the group's state, protocol and member count."
)
@click.option("--verbose", "-v", is_flag=True, help="With --members: list each member's partitions.")
@client_command
def describe(session, group_args, group_opts, all_groups, members, show_state, verbose):
    """Per partition: CURRENT-OFFSET, LOG-END-OFFSET and LAG, with the owning member.

    \b
    Examples:
      odradek groups describe billing
      odradek groups describe --all-groups
      odradek groups describe billing --members --verbose
      odradek groups describe billing --state
      odradek groups describe billing -o json
    """
    names = list(dict.fromkeys([*group_args, *group_opts]))
    if members and show_state:
        raise click.UsageError("Give --members or --state, not both.")
    with session.admin() as admin:
        if all_groups:
            names = [g.group_id for g in admin.list_groups()]
        if not names:
            raise click.UsageError("Missing group: give its id, --group GROUP or --all-groups.")
        described = admin.describe_groups(names)
        missing = [g for g in names if described[g].state == "Dead"]
        if missing and not all_groups:
            raise CliError(
                f"consumer group{'s' if len(missing) > 1 else ''} {', '.join(repr(g) for g in missing)} "
                f"do{'' if len(missing) > 1 else 'es'} not exist",
                "check the id with `odradek groups list`",
            )
        committed = {g: admin.list_group_offsets(g) for g in names if not (members or show_state)}
    results = []
    if members or show_state:
        for g in names:
            d = described[g]
            results.append(
                {
                    "group": g,
                    "type": d.group_type,
                    "state": d.state,
                    "protocol_type": d.protocol_type,
                    "protocol": d.protocol,
                    "members": d.members,
                }
            )
        _print_members(session, results, members, verbose)
        return

    all_tps = set()
    for g in names:
        all_tps |= set(committed[g])
        for m in described[g].members:
            all_tps |= set(m.assignment)
    ends = _log_offsets(session, sorted(all_tps), "latest")
    for g in names:
        d = described[g]
        owner = {tp: m for m in d.members for tp in m.assignment}
        tps = sorted(set(committed[g]) | set(owner))
        rows = []
        for tp in tps:
            om = committed[g].get(tp)
            current = om.offset if om is not None else None
            end = ends.get(tp)
            lag = max(end - current, 0) if current is not None and end is not None and end >= 0 else None
            m = owner.get(tp)
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current_offset": current,
                    "log_end_offset": end,
                    "lag": lag,
                    "consumer_id": m.member_id if m else None,
                    "host": m.client_host if m else None,
                    "client_id": m.client_id if m else None,
                }
            )
        results.append(
            {"group": g, "type": d.group_type, "state": d.state, "members": len(d.members), "partitions": rows}
        )
    if session.json:
        session.print_json(results)
        return
    for i, res in enumerate(results):
        g = res["group"]
        if i:
            click.echo()
        if res["members"] == 0:
            session.info(f"Consumer group '{g}' has no active members.")
        if res["state"] in ("PreparingRebalance", "CompletingRebalance"):
            session.info(f"Warning: consumer group '{g}' is rebalancing.")
        if not res["partitions"]:
            session.info(f"Consumer group '{g}' has no committed offsets and no assigned partitions.")
            continue
        session.table(
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [
                [
                    g,
                    r["topic"],
                    r["partition"],
                    r["current_offset"],
                    r["log_end_offset"],
                    r["lag"],
                    r["consumer_id"],
                    r["host"],
                    r["client_id"],
                ]
                for r in res["partitions"]
            ],
        )


def _print_members(session, results, members: bool, verbose: bool) -> None:
    if session.json:
        out = []
        for res in results:
            entry = {k: v for k, v in res.items() if k != "members"}
            entry["members"] = [
                {
                    "consumer_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "host": m.client_host,
                    "client_id": m.client_id,
                    "assignment": [
                        {"topic": tp.topic, "partition": tp.partition} for tp in sorted(m.assignment)
                    ],
                }
                for m in res["members"]
            ]
            out.append(entry)
        session.print_json(out)
        return
    if not members:
        session.table(
            ["GROUP", "TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [[r["group"], r["type"], r["protocol"] or "", r["state"], len(r["members"])] for r in results],
        )
        return
    rows = []
    for res in results:
        if not res["members"]:
            session.info(f"Consumer group '{res['group']}' has no active members.")
        for m in res["members"]:
            row = [
                res["group"],
                m.member_id,
                m.group_instance_id,
                m.client_host,
                m.client_id,
                len(m.assignment),
            ]
            if verbose:
                row.append(_assignment_text(m.assignment))
            rows.append(row)
    if rows:
        cols = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        session.table(cols + (["ASSIGNMENT"] if verbose else []), rows)


def _assignment_text(assignment) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(assignment):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-"


# -- delete --------------------------------------------------------------------------------


@groups.command()
@click.argument("group_args", nargs=-1, metavar="[GROUP]...")
@click.option(
    "--group", "-g", "group_opts", multiple=True, metavar="GROUP", help="Group to delete (repeatable)."
)
@client_command
def delete(session, group_args, group_opts):
    """Delete consumer groups (and their committed offsets). Their members must be gone.

    \b
    Examples:
      odradek groups delete billing
      odradek groups delete --group a --group b
    """
    names = list(dict.fromkeys([*group_args, *group_opts]))
    if not names:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    with session.admin() as admin:
        admin.delete_groups(names)
    if session.json:
        session.print_json({"deleted": names})
    else:
        click.echo(
            f"Deletion of requested consumer groups ({', '.join(repr(n) for n in names)}) was successful."
        )


# -- delete-offsets ------------------------------------------------------------------------


@groups.command("delete-offsets")
@click.argument("group", required=False)
@_GROUP_OPTION
@click.option(
    "--topic",
    "-t",
    "topics",
    multiple=True,
    required=True,
    metavar="TOPIC[:P,P]",
    help="Topic (or topic:partitions) whose offsets to delete.",
)
@client_command
def delete_offsets(session, group, group_opt, topics):
    """Delete a group's committed offsets of some topics.

    \b
    Examples:
      odradek groups delete-offsets billing --topic orders
      odradek groups delete-offsets billing --topic orders:0,1
    """
    gid = one_name(group, group_opt, "group")
    with session.admin() as admin:
        tps = _topic_partitions(topics, admin)
        admin.delete_group_offsets(gid, tps)
    if session.json:
        session.print_json({"group": gid, "deleted": [{"topic": t, "partition": p} for t, p in tps]})
    else:
        session.table(["TOPIC", "PARTITION", "STATUS"], [[t, p, "Successful"] for t, p in tps])


# -- reset-offsets -------------------------------------------------------------------------

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 durations as Kafka's --by-duration takes them: PnDTnHnMnS."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT"):
        raise click.BadParameter(
            f"{text!r}: expected an ISO-8601 duration such as PT1H, P1DT12H or PT30M",
            param_hint="--by-duration",
        )
    parts = {k: float(v) for k, v in m.groupdict().items() if v}
    seconds = (
        parts.get("days", 0) * 86400
        + parts.get("hours", 0) * 3600
        + parts.get("minutes", 0) * 60
        + parts.get("seconds", 0)
    )
    return int(seconds * 1000)


@groups.command("reset-offsets")
@click.argument("group", required=False)
@_GROUP_OPTION
@click.option(
    "--topic",
    "-t",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P]",
    help="Topic to reset, all or some partitions (repeatable).",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="The earliest offset still in the log.")
@click.option("--to-latest", is_flag=True, help="The log end: skip everything.")
@click.option("--to-current", is_flag=True, help="The committed offset (the log end where none).")
@click.option(
    "--to-offset", type=click.IntRange(min=0), metavar="N", help="Offset N (kept within earliest..latest)."
)
@click.option(
    "--to-datetime", metavar="TIME", help="The first record at or after TIME (ISO date-time or epoch ms)."
)
@click.option(
    "--by-duration", metavar="DURATION", help="The first record at or after now minus DURATION (e.g. PT1H)."
)
@click.option("--shift-by", type=int, metavar="N", help="Move the committed offset by N (negative: back).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@client_command
def reset_offsets(
    session,
    group,
    group_opt,
    topics,
    all_topics,
    to_earliest,
    to_latest,
    to_current,
    to_offset,
    to_datetime,
    by_duration,
    shift_by,
    dry_run,
    execute,
):
    """Move a group's committed offsets. The group must have no active members.

    Without --execute nothing changes: the new offsets are only shown (--dry-run).

    \b
    Examples:
      odradek groups reset-offsets billing --topic orders --to-earliest --execute
      odradek groups reset-offsets billing --all-topics --to-latest --dry-run
      odradek groups reset-offsets billing --topic orders:0 --to-offset 42 --execute
      odradek groups reset-offsets billing --topic orders --to-datetime 2024-05-01T00:00:00 --execute
      odradek groups reset-offsets billing --topic orders --by-duration PT1H --execute
      odradek groups reset-offsets billing --topic orders --shift-by -10 --execute
    """
    gid = one_name(group, group_opt, "group")
    specs = {
        "--to-earliest": to_earliest,
        "--to-latest": to_latest,
        "--to-current": to_current,
        "--to-offset": to_offset is not None,
        "--to-datetime": to_datetime is not None,
        "--by-duration": by_duration is not None,
        "--shift-by": shift_by is not None,
    }
    chosen = [k for k, v in specs.items() if v]
    if len(chosen) != 1:
        raise click.UsageError(
            "Give exactly one of "
            + ", ".join(specs)
            + (f" (got {', '.join(chosen)})" if chosen else "")
            + "."
        )
    if bool(topics) == bool(all_topics):
        raise click.UsageError("Give --topic TOPIC (repeatable) or --all-topics.")
    if dry_run and execute:
        raise click.UsageError("Give --dry-run or --execute, not both.")
    target_ms = None
    if to_datetime is not None:
        target_ms = parse_time(to_datetime, "--to-datetime")
    elif by_duration is not None:
        target_ms = int(time.time() * 1000) - parse_duration_ms(by_duration)

    with session.admin() as admin:
        state = admin.describe_groups([gid])[gid].state
        if state not in _INACTIVE:
            raise CliError(
                f"assignments can only be reset if the group '{gid}' is inactive, but the current state is {state}",
                f"stop the group's consumers first (see them with `odradek groups describe {gid} --members`)",
            )
        committed = admin.list_group_offsets(gid)
        if all_topics:
            tps = sorted(committed)
            if not tps:
                raise CliError(
                    f"group '{gid}' has no committed offsets", "name the topics with --topic TOPIC"
                )
        else:
            tps = _topic_partitions(topics, admin)
        new_offsets = _plan(session, gid, tps, committed, chosen[0], to_offset, shift_by, target_ms)
        if execute:
            admin.alter_group_offsets(gid, new_offsets)

    rows = [
        {
            "group": gid,
            "topic": tp.topic,
            "partition": tp.partition,
            "previous_offset": committed[tp].offset if tp in committed else None,
            "new_offset": off,
        }
        for tp, off in sorted(new_offsets.items())
    ]
    if session.json:
        session.print_json({"group": gid, "executed": execute, "partitions": rows})
        return
    if not execute:
        session.info("Dry run: nothing was changed. Add --execute to commit these offsets.")
    session.table(
        ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
        [[r["group"], r["topic"], r["partition"], r["previous_offset"], r["new_offset"]] for r in rows],
    )


def _plan(session, gid, tps, committed, how, to_offset, shift_by, target_ms) -> dict:
    if not tps:
        return {}
    with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
        earliest = consumer.beginning_offsets(tps)
        latest = consumer.end_offsets(tps)
        by_time = consumer.offsets_for_times({tp: target_ms for tp in tps}) if target_ms is not None else {}

    def clamp(tp, off):
        if off < earliest[tp]:
            session.info(
                f"New offset ({off}) is lower than the earliest offset of {tp.topic}-{tp.partition}; using {earliest[tp]}."
            )
            return earliest[tp]
        if off > latest[tp]:
            session.info(
                f"New offset ({off}) is higher than the latest offset of {tp.topic}-{tp.partition}; using {latest[tp]}."
            )
            return latest[tp]
        return off

    out = {}
    for tp in tps:
        current = committed.get(tp)
        if how == "--to-earliest":
            out[tp] = earliest[tp]
        elif how == "--to-latest":
            out[tp] = latest[tp]
        elif how == "--to-current":
            out[tp] = current.offset if current is not None else latest[tp]
        elif how == "--to-offset":
            out[tp] = clamp(tp, to_offset)
        elif how == "--shift-by":
            if current is None:
                raise CliError(
                    f"cannot shift the offset of {tp.topic}-{tp.partition}: group '{gid}' has no committed offset there",
                    "use --to-earliest, --to-latest or --to-offset for that partition",
                )
            out[tp] = clamp(tp, current.offset + shift_by)
        else:
            found = by_time.get(tp)
            out[tp] = found.offset if found is not None else latest[tp]
    return out
