"""The one check every console action passes before it changes anything.

``ConsoleAuthorizer.check(principal, operation, resource_type, name)`` returns None to
allow, or a sentence saying why not; the API answers 403 with that sentence and the
console shows it. Operations and resource types use Kafka's ACL names ("CREATE" on a
"TOPIC", "DELETE" on a "TOPIC" for DeleteRecords, "READ" on a "GROUP" for an offset
reset, as Kafka's tools need). HTTP requests carry no identity yet, so the principal is
``User:ANONYMOUS``.

On a broker, ``broker_acls(broker)`` asks the broker's ACL authorizer (the one the Kafka
handlers ask), so the console and Kafka clients obey the same ACLs; without an authorizer,
and in ``odradek console`` (where the remote brokers check the tools' own credentials),
every action is allowed here.
"""

from __future__ import annotations

from collections.abc import Callable

ANONYMOUS = "User:ANONYMOUS"

Check = Callable[[str, str, str, str], "str | None"]


def allow_all(principal: str, operation: str, resource_type: str, name: str) -> str | None:
    return None


class Caller:
    """What the broker's authorizer reads of a request: its principal and peer."""

    def __init__(self, principal: str):
        self.principal = principal
        self.peer = "127.0.0.1:0"


def broker_acls(broker) -> Check:
    """A check that asks ``broker.authorizer``; creating a topic is also allowed by Create on
    the cluster, as Kafka's CreateTopics is."""

    def check(principal: str, operation: str, resource_type: str, name: str) -> str | None:
        authorizer = broker.authorizer
        if authorizer is None:
            return None
        caller = Caller(principal)
        op, rtype = operation.capitalize(), resource_type.capitalize()
        if authorizer.authorize(caller, op, rtype, name):
            return None
        if (op, rtype) == ("Create", "Topic") and authorizer.authorize(caller, "Create", "Cluster", "kafka-cluster"):
            return None
        return (
            f"not authorized: the console acts as {principal}, which may not {op.lower()} the "
            f"{rtype.lower()} {name!r}; allow it with `odradek acls add --allow-principal {principal} "
            f"--operation {op.lower()} --{rtype.lower()} {name}`, or use the odradek commands with "
            "--command-config and your own credentials"
        )

    return check


class ConsoleAuthorizer:
    def __init__(self, check: Check = allow_all):
        self.check_fn = check

    def check(self, principal: str, operation: str, resource_type: str, name: str) -> str | None:
        return self.check_fn(principal, operation, resource_type, name)
