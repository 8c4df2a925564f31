"""The one check every console action passes before it changes anything.

``ConsoleAuthorizer.check(principal, operation, resource_type, name)`` returns None to
allow, or a sentence saying why not; the API answers 403 with that sentence and the
console shows it. Operations and resource types use Kafka's ACL names ("CREATE" on a
"TOPIC", "DELETE" on a "TOPIC" for DeleteRecords, "READ" on a "GROUP" for an offset
reset, as Kafka's tools need). HTTP requests carry no identity yet, so the principal is
``User:ANONYMOUS``.

Today every action is allowed. The security work (ACLs in the metadata store, one
``Authorizer`` for the Kafka handlers) plugs in here by replacing ``allow_all`` with a
function that asks that authorizer, so console and Kafka clients obey the same ACLs.
"""

from __future__ import annotations

from collections.abc import Callable

ANONYMOUS = "User:ANONYMOUS"

Check = Callable[[str, str, str, str], "str | None"]


def allow_all(principal: str, operation: str, resource_type: str, name: str) -> str | None:
    return None


class ConsoleAuthorizer:
    def __init__(self, check: Check = allow_all):
        self.check_fn = check

    def check(self, principal: str, operation: str, resource_type: str, name: str) -> str | None:
        return self.check_fn(principal, operation, resource_type, name)
