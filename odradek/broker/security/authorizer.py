"""The authorizer: may this principal, from this host, do this operation on this resource?

Kafka's semantics (``AclAuthorizer`` / ``StandardAuthorizer``, which agree on them):

* ``super.users`` (``User:a;User:b``) may do everything.
* The ACLs that apply to a resource are its literal ACLs, the literal ``*`` ACLs of its type
  and the prefixed ACLs whose prefix starts its name.
* No ACL applies: allowed only with ``allow.everyone.if.no.acl.found=true``.
* A Deny that matches (principal or ``User:*``; host or ``*``; the operation or ``All``) wins.
* Else an Allow that matches allows; allowing Read, Write, Delete or Alter also allows
  Describe, and AlterConfigs allows DescribeConfigs.

ACLs live in the metadata store (``MetadataStore.acls``); this class keeps them indexed by
resource type and reloads them after each change through ``add`` / ``remove``. Denials are
logged at DEBUG on ``odradek.authorizer``, as Kafka's authorizer logger does at INFO.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from odradek.config_def import ConfigError
from odradek.protocol.acl_model import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD,
    AclBinding,
    AclFilter,
)

log = logging.getLogger("odradek.authorizer")

AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "odradek.broker.security.authorizer.Authorizer",
)


def parse_super_users(text: str | None) -> frozenset[str]:
    users = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        if ":" not in item:
            raise ConfigError(f"super.users: {item!r} is not a principal; expected User:name;User:other", "super.users")
        users.add(item)
    return frozenset(users)


class Authorizer:
    def __init__(self, store, super_users: frozenset[str], allow_if_no_acl: bool):
        self._store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._index: dict[str, list[AclBinding]] = {}
        self.generation = 0  # bumped by each reload: decisions cached elsewhere are stale
        self.reload()

    @classmethod
    def from_config(cls, config, store) -> Authorizer | None:
        name = config.get("authorizer.class.name")
        if not name:
            return None
        return cls(store, parse_super_users(config.get("super.users")), config.get("allow.everyone.if.no.acl.found"))

    # -- the ACLs ----------------------------------------------------------------------------

    def reload(self) -> None:
        index = defaultdict(list)
        for data in self._store.acls():
            b = AclBinding.from_json(data)
            index[b.resource_type].append(b)
        self._index = dict(index)
        self.generation += 1

    def acls(self) -> list[AclBinding]:
        return [b for bindings in self._index.values() for b in bindings]

    def add(self, bindings: list[AclBinding]) -> None:
        current = self.acls()
        new = current + [b for b in dict.fromkeys(bindings) if b not in current]
        self._store.set_acls([b.to_json() for b in new])
        self.reload()

    def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Delete the ACLs each filter matches; returns what each filter deleted."""
        current = self.acls()
        deleted = [[b for b in current if f.matches(b)] for f in filters]
        gone = {b for group in deleted for b in group}
        if gone:
            self._store.set_acls([b.to_json() for b in current if b not in gone])
            self.reload()
        return deleted

    # -- decisions ---------------------------------------------------------------------------

    def authorize(self, request, operation: str, resource_type: str, name: str) -> bool:
        principal = request.principal
        if principal in self.super_users:
            return True
        host = _host(request.peer)
        applicable = [b for b in self._index.get(resource_type, ()) if _applies(b, name)]
        if not applicable:
            allowed = self.allow_if_no_acl
        else:
            allowed = self._decide(applicable, principal, host, operation)
        if not allowed:
            log.debug(
                "Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s",
                principal,
                operation,
                host,
                resource_type,
                name,
            )
        return allowed

    @staticmethod
    def _decide(acls: list[AclBinding], principal: str, host: str, operation: str) -> bool:
        def matches(b: AclBinding) -> bool:
            return b.principal in (principal, "User:*") and b.host in (host, WILDCARD)

        if any(b.permission == "Deny" and b.operation in (operation, "All") and matches(b) for b in acls):
            return False
        allowed_by = {operation, "All"}
        if operation == "Describe":
            allowed_by.update(IMPLIES_DESCRIBE)
        elif operation == "DescribeConfigs":
            allowed_by.update(IMPLIES_DESCRIBE_CONFIGS)
        return any(b.permission == "Allow" and b.operation in allowed_by and matches(b) for b in acls)

    def may_write_some_topic(self, request) -> bool:
        """KIP-679: an idempotent producer may start when it may Write to some topic: an
        Allow for Write (or All) on topics matching its principal and host."""
        principal, host = request.principal, _host(request.peer)
        return any(
            b.permission == "Allow"
            and b.operation in ("Write", "All")
            and b.principal in (principal, "User:*")
            and b.host in (host, WILDCARD)
            for b in self._index.get("Topic", ())
        )

    def authorized_operations(self, request, resource_type: str, name: str, operations) -> int:
        """KIP-430: the bit field of ``operations`` (Kafka codes) the principal may do."""
        from odradek.protocol.acl_model import OPERATIONS

        bits = 0
        for code in operations:
            if self.authorize(request, OPERATIONS[code], resource_type, name):
                bits |= 1 << code
        return bits


CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)  # Create .. IdempotentWrite: Kafka's cluster operations
NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations not requested"


def cluster_authorized_operations(authorizer, request, requested: bool) -> int:
    """KIP-430's cluster bit field for Metadata (v8-v10) and DescribeCluster: what the principal
    may do on the cluster; every cluster operation without an authorizer, as Kafka."""
    if not requested:
        return NOT_REQUESTED
    if authorizer is None:
        return sum(1 << code for code in CLUSTER_OPERATIONS)
    return authorizer.authorized_operations(request, "Cluster", CLUSTER_NAME, CLUSTER_OPERATIONS)


def _applies(b: AclBinding, name: str) -> bool:
    if b.pattern_type == "LITERAL":
        return b.name == name or b.name == WILDCARD
    return name.startswith(b.name)


def _host(peer: str) -> str:
    host = peer.rsplit(":", 1)[0]
    return host.strip("[]")


__all__ = [
    "AUTHORIZER_CLASSES",
    "CLUSTER_NAME",
    "CLUSTER_OPERATIONS",
    "NOT_REQUESTED",
    "Authorizer",
    "cluster_authorized_operations",
    "parse_super_users",
]
