"""``odradek share-groups``: kafka-share-groups.sh's list and describe (KIP-932)."""

from __future__ import annotations

import click

from odradek.cli.common import CliError, client_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def share_groups():
    """List and describe share groups (queues: several members read one partition, each
    record goes to one of them). Share groups are on when the broker's
    group.coordinator.rebalance.protocols lists share.

    \b
    Examples:
      odradek share-groups list
      odradek share-groups describe --group jobs
      odradek share-groups delete jobs
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
@client_command
def describe(session, group_arg, group_opt):
    """The group's members and the partitions each reads.

    \b
    Examples:
      odradek share-groups describe jobs
      odradek share-groups describe --group jobs -o json
    """
    group = group_opt or group_arg
    if not group:
        raise click.UsageError("Missing group: give its id or --group GROUP.")
    with session.admin() as admin:
        described = admin.describe_share_group(group)
    if described is None:
        raise CliError(f"share group {group!r} does not exist", "check the id with `odradek share-groups list`")
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
