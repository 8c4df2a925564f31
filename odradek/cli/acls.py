"""``odradek acls``: kafka-acls.sh (add, remove, list) through CreateAcls, DeleteAcls and
DescribeAcls, with kafka-acls' resource and principal flags."""

from __future__ import annotations

import click

from odradek.cli.common import client_command

OPERATIONS = [
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
]
_PATTERNS = {"literal": "LITERAL", "prefixed": "PREFIXED", "match": "MATCH", "any": None}


def _resource_options(fn):
    fn = click.option("--resource-pattern-type", "pattern", default=None, type=click.Choice(sorted(_PATTERNS)), help="literal (default for add), prefixed; for list/remove also match or any.")(fn)
    fn = click.option("--transactional-id", metavar="ID", help="A transactional id ('*': all).")(fn)
    fn = click.option("--cluster", is_flag=True, help="The cluster resource.")(fn)
    fn = click.option("--group", metavar="GROUP", help="A consumer group ('*': all).")(fn)
    fn = click.option("--topic", metavar="TOPIC", help="A topic ('*': all).")(fn)
    return fn


def _principal_options(fn):
    fn = click.option("--operation", "operations", multiple=True, type=click.Choice(OPERATIONS, case_sensitive=False), help="Operation (repeatable).")(fn)
    fn = click.option("--deny-host", "deny_hosts", multiple=True, metavar="HOST", help="Hosts the deny applies to (default *).")(fn)
    fn = click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST", help="Hosts the allow applies to (default *).")(fn)
    fn = click.option("--deny-principal", "deny", multiple=True, metavar="User:NAME", help="Principal to deny (repeatable).")(fn)
    fn = click.option("--allow-principal", "allow", multiple=True, metavar="User:NAME", help="Principal to allow (repeatable).")(fn)
    return fn


def _resources(topic, group, cluster, transactional_id) -> list[tuple[str, str]]:
    out = []
    if topic:
        out.append(("Topic", topic))
    if group:
        out.append(("Group", group))
    if cluster:
        out.append(("Cluster", "kafka-cluster"))
    if transactional_id:
        out.append(("TransactionalId", transactional_id))
    return out


def _canonical_operation(op: str) -> str:
    return next(o for o in OPERATIONS if o.lower() == op.lower())


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def acls():
    """Add, remove and list ACLs (kafka-acls.sh), on a broker with an authorizer.

    \b
    Examples:
      odradek acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
      odradek acls add --allow-principal User:alice --operation Read --group app-
      odradek acls add --allow-principal User:etl --operation Write --topic logs. --resource-pattern-type prefixed
      odradek acls add --deny-principal User:mallory --operation All --topic '*'
      odradek acls list --topic orders
      odradek acls remove --allow-principal User:alice --operation Read --topic orders
    """


@acls.command()
@_resource_options
@_principal_options
@client_command
def add(session, topic, group, cluster, transactional_id, pattern, allow, deny, allow_hosts, deny_hosts, operations):
    """Add ACLs: each principal x host x operation on each resource.

    \b
    Examples:
      odradek acls add --allow-principal User:alice --operation Write --topic orders
      odradek acls add --allow-principal User:ops --operation Alter --cluster
    """
    from odradek.protocol.acl_model import AclBinding

    resources = _resources(topic, group, cluster, transactional_id)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
    if not allow and not deny:
        raise click.UsageError("name a principal: --allow-principal or --deny-principal")
    if not operations:
        raise click.UsageError("name an operation: --operation Read (repeatable)")
    pattern_type = _PATTERNS[pattern or "literal"]
    if pattern_type not in ("LITERAL", "PREFIXED"):
        raise click.UsageError("add takes --resource-pattern-type literal or prefixed")
    bindings = [
        AclBinding(rtype, pattern_type, name, principal, host, _canonical_operation(op), permission)
        for rtype, name in resources
        for permission, principals, hosts in (("Allow", allow, allow_hosts), ("Deny", deny, deny_hosts))
        for principal in principals
        for host in (hosts or ("*",))
        for op in operations
    ]
    with session.admin() as admin:
        admin.create_acls(bindings)
    for b in bindings:
        session.info(f"Added {b}")


@acls.command()
@_resource_options
@_principal_options
@client_command
def remove(session, topic, group, cluster, transactional_id, pattern, allow, deny, allow_hosts, deny_hosts, operations):
    """Remove the ACLs that match (principals, hosts and operations default to any).

    \b
    Examples:
      odradek acls remove --topic orders                               # every ACL of the topic
      odradek acls remove --allow-principal User:alice --operation Read --topic orders
    """
    from odradek.protocol.acl_model import AclFilter

    resources = _resources(topic, group, cluster, transactional_id)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
    pattern_type = _PATTERNS[pattern or "literal"]
    filters = []
    for rtype, name in resources:
        for permission, principals, hosts in (("Allow", allow, allow_hosts), ("Deny", deny, deny_hosts)):
            if (allow or deny) and not principals:
                continue
            for principal in principals or (None,):
                for host in hosts or (None,):
                    for op in operations or (None,):
                        filters.append(
                            AclFilter(rtype, name, pattern_type, principal, host, op and _canonical_operation(op), permission if (allow or deny) else None)
                        )
            if not (allow or deny):
                break
    with session.admin() as admin:
        removed = admin.delete_acls(filters)
    for b in removed:
        session.info(f"Removed {b}")
    if not removed:
        session.info("No ACL matched.")


@acls.command(name="list")
@_resource_options
@click.option("--principal", metavar="User:NAME", help="Only this principal's ACLs.")
@client_command
def list_acls(session, topic, group, cluster, transactional_id, pattern, principal):
    """List ACLs (all, or those of one resource; --resource-pattern-type match shows every ACL
    that applies to the named resource).

    \b
    Examples:
      odradek acls list
      odradek acls list --topic orders --resource-pattern-type match
      odradek acls list --principal User:alice -o json
    """
    from odradek.protocol.acl_model import AclFilter

    resources = _resources(topic, group, cluster, transactional_id) or [(None, None)]
    pattern_type = _PATTERNS[pattern or ("literal" if topic or group or transactional_id else "any")]
    found = []
    with session.admin() as admin:
        for rtype, name in resources:
            found += admin.describe_acls(AclFilter(rtype, name, pattern_type, principal, None, None, None))
    rows = [[b.resource_type, b.pattern_type, b.name, b.principal, b.host, b.operation, b.permission] for b in found]
    if session.json:
        session.print_json([b.to_json() for b in found])
        return
    session.table(["RESOURCE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"], rows)
