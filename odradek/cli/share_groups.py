"""``odradek share-groups``: kafka-share-groups.sh's list, describe (offsets, --members,
--state), delete, reset-offsets and delete-offsets (KIP-932)."""

from __future__ import annotations

import click

from odradek.cli.common import CliError, client_command, parse_time
from odradek.cli.groups import _topic_partitions


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def share_groups():
    """List and describe share groups (queues: several members read one partition, each
    record goes to one of them). Share groups are on by default (the broker's
    group.coordinator.rebalance.protocols lists share).

    \b
    Examples:
      odradek share-groups list
      odradek share-groups describe --group jobs
      odradek share-groups delete jobs
      odradek share-groups describe --group jobs --members
      odradek share-groups reset-offsets jobs --topic orders --to-earliest --execute
      odradek share-groups delete-offsets jobs --topic orders
    """


@share_groups.command("list")
@client_command
def list_(session):
    """List share groups with their states.

    \b
    Examples:
      odradek share-groups list
      odradek share-groups list -o json
    """
    with session.admin() as admin:
        rows = [g for g in admin.list_groups() if g.group_type == "share"]
    if session.json:
        session.print_json([{"group": g.group_id, "state": g.state} for g in rows])
    elif not rows:
        session.info("No share groups.")
    else:
        session.table(["GROUP", "STATE"], [[g.group_id, g.state] for g in rows])


@share_groups.command()
@click.argument("group_arg", required=False, metavar="[GROUP]")
@click.option("--group", "-g", "group_opt", metavar="GROUP", help="Group id (or give it as an argument).")
@click.option("--members", "show_members", is_flag=True, help="Show the members and the partitions each reads.")
@click.option("--state", "show_state", is_flag=True, help="Show the group's state and member count.")
@client_command
def describe(session, group_arg, group_opt, show_members, show_state):
    """Where the group is in each partition it reads (as kafka-share-groups.sh --describe):
    the share-partition start offset (records before it are done with) and the lag (records
    from it on not yet acknowledged). --members lists the members, --state the group's state.

    \b
    Examples:
      odradek share-groups describe --group jobs
      odradek share-groups describe jobs --members
      odradek share-groups describe jobs --state -o json
    """
    group = group_opt or group_arg
    if not group:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    if show_members and show_state:
        raise click.UsageError("Give --members or --state, not both.")
    with session.admin() as admin:
        described = admin.describe_share_group(group)
        if described is None:
            raise CliError(f"share group {group!r} does not exist", "check the id with `odradek share-groups list`")
        offsets = {} if show_members or show_state else admin.describe_share_group_offsets(group)
    if show_state:
        _print_state(session, group, described)
    elif show_members:
        _print_members(session, group, described)
    else:
        _print_offsets(session, group, offsets)


def _print_offsets(session, group: str, offsets: dict) -> None:
    unknown = [tp for tp, (start, lag) in offsets.items() if lag < 0 and start >= 0]
    ends = {}
    if unknown:  # the coordinator does not lead these partitions: the lag from their log end
        with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
            ends = consumer.end_offsets(unknown)
    rows = []
    for tp, (start, lag) in sorted(offsets.items()):
        if lag < 0 and tp in ends:
            lag = max(ends[tp] - start, 0)
        rows.append({"group": group, "topic": tp.topic, "partition": tp.partition,
                     "start_offset": start if start >= 0 else None, "lag": lag if start >= 0 else None})
    if session.json:
        session.print_json({"group": group, "offsets": rows})
        return
    if not rows:
        session.info(f"Share group '{group}' has not read any partition yet.")
        return
    session.table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [
        [group, r["topic"], r["partition"], "-" if r["start_offset"] is None else r["start_offset"],
         "-" if r["lag"] is None else r["lag"]]
        for r in rows
    ])


def _print_state(session, group: str, described) -> None:
    if session.json:
        session.print_json({"group": group, "state": described.state, "members": len(described.members)})
        return
    session.table(["GROUP", "STATE", "#MEMBERS"], [[group, described.state, len(described.members)]])


def _print_members(session, group: str, described) -> None:
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(m.assignment)],
        }
        for m in described.members
    ]
    if session.json:
        session.print_json({"group": group, "state": described.state, "members": members})
        return
    session.info(f"Share group '{group}' is {described.state} with {len(members)} member(s).")
    session.table(
        ["GROUP", "MEMBER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"],
        [
            [group, m["member_id"], m["host"], m["client_id"],
             ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or "-"]
            for m in members
        ],
    )


@share_groups.command()
@click.argument("group_arg", required=False, metavar="[GROUP]")
@click.option("--group", "-g", "group_opt", metavar="GROUP", help="Group id (or give it as an argument).")
@client_command
def delete(session, group_arg, group_opt):
    """Delete an empty share group with its delivery state and group configs.

    \b
    Examples:
      odradek share-groups delete jobs
    """
    group = group_opt or group_arg
    if not group:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    with session.admin() as admin:
        try:
            admin.delete_groups([group])
        except Exception as exc:
            raise CliError(f"could not delete share group {group!r}: {exc}", "stop its members first") from None
    session.info(f"Deleted share group '{group}'.")


@share_groups.command("reset-offsets")
@click.argument("group_arg", required=False, metavar="[GROUP]")
@click.option("--group", "-g", "group_opt", metavar="GROUP", help="Group id (or give it as an argument).")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]",
              help="A topic (all its partitions) or topic:0,2; repeatable.")
@click.option("--to-earliest", is_flag=True, help="Start at the first record still in the log.")
@click.option("--to-latest", is_flag=True, help="Start after the last record: only new records are read.")
@click.option("--to-datetime", metavar="TIME", help="Start at the first record at or after TIME (ISO date-time or epoch ms).")
@click.option("--to-offset", type=int, metavar="OFFSET", help="Start at OFFSET (kept within the log's first and end offsets).")
@click.option("--dry-run", is_flag=True, help="Show the new start offsets without changing anything (the default).")
@click.option("--execute", is_flag=True, help="Apply the new start offsets.")
@client_command
def reset_offsets(session, group_arg, group_opt, topics, to_earliest, to_latest, to_datetime, to_offset, dry_run, execute):
    """Move where an empty share group reads its partitions from. Records before the new
    start are skipped, records after it are delivered again; the group must have no members.

    \b
    Examples:
      odradek share-groups reset-offsets jobs --topic orders --to-earliest --execute
      odradek share-groups reset-offsets jobs --topic orders:0 --to-latest --dry-run
      odradek share-groups reset-offsets jobs --topic orders --to-datetime 2026-05-01T00:00:00 --execute
      odradek share-groups reset-offsets jobs --topic orders:0 --to-offset 42 --execute
    """
    group = group_opt or group_arg
    if not group:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    chosen = [name for name, on in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                                    ("--to-datetime", to_datetime is not None), ("--to-offset", to_offset is not None)) if on]
    if len(chosen) != 1:
        raise click.UsageError("Give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset.")
    if not topics:
        raise click.UsageError("Give --topic TOPIC (repeatable).")
    if dry_run and execute:
        raise click.UsageError("Give --dry-run or --execute, not both.")
    target_ms = parse_time(to_datetime, "--to-datetime") if to_datetime is not None else None
    with session.admin() as admin:
        described = admin.describe_share_group(group)
        if described is not None and described.members:
            raise CliError(
                f"share group {group!r} has {len(described.members)} member(s); its offsets can only be reset "
                "while it has none",
                f"stop its consumers first (see them with `odradek share-groups describe {group}`)",
            )
        tps = _topic_partitions(topics, admin)
        with session.consumer(allow_auto_create_topics=False, enable_auto_commit=False) as consumer:
            earliest = consumer.beginning_offsets(tps)
            latest = consumer.end_offsets(tps)
            by_time = consumer.offsets_for_times({tp: target_ms for tp in tps}) if target_ms is not None else {}
        new = {}
        for tp in tps:
            if to_earliest:
                new[tp] = earliest[tp]
            elif to_latest:
                new[tp] = latest[tp]
            elif to_offset is not None:
                new[tp] = min(max(to_offset, earliest[tp]), latest[tp])
            else:
                found = by_time.get(tp)
                new[tp] = found.offset if found is not None else latest[tp]
        if execute:
            try:
                admin.alter_share_group_offsets(group, new)
            except Exception as exc:
                raise CliError(f"could not reset share group {group!r}: {exc}", "stop its members first") from None
    rows = [{"group": group, "topic": tp.topic, "partition": tp.partition, "new_start_offset": off}
            for tp, off in sorted(new.items())]
    if session.json:
        session.print_json({"group": group, "executed": execute, "partitions": rows})
        return
    if not execute:
        session.info("Dry run: nothing was changed. Add --execute to apply these start offsets.")
    session.table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
                  [[r["group"], r["topic"], r["partition"], r["new_start_offset"]] for r in rows])


@share_groups.command("delete-offsets")
@click.argument("group_arg", required=False, metavar="[GROUP]")
@click.option("--group", "-g", "group_opt", metavar="GROUP", help="Group id (or give it as an argument).")
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC", help="A topic; repeatable.")
@client_command
def delete_offsets(session, group_arg, group_opt, topics):
    """Make an empty share group forget where it is in whole topics (as
    kafka-share-groups.sh --delete-offsets): its next member starts them where the group's
    share.auto.offset.reset says.

    \b
    Examples:
      odradek share-groups delete-offsets jobs --topic orders
    """
    group = group_opt or group_arg
    if not group:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    with session.admin() as admin:
        try:
            admin.delete_share_group_offsets(group, list(topics))
        except Exception as exc:
            raise CliError(f"could not delete the offsets of share group {group!r}: {exc}",
                           "stop its members first, and check the topic names") from None
    if session.json:
        session.print_json({"group": group, "deleted": sorted(topics)})
    else:
        session.info(f"Share group '{group}' forgot its offsets in {', '.join(sorted(topics))}.")
