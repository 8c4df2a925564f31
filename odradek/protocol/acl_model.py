"""ACLs as Kafka defines them: resource types, pattern types, operations and permissions
with their wire codes and names, the ``AclBinding`` and the ``AclFilter`` of Describe/DeleteAcls,
and their wire forms (the broker's ACL handlers and the admin client share them).

Codes are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``);
names are Kafka's spelling as ``kafka-acls.sh`` prints them and as ZooKeeper stores them
("Topic", "LITERAL", "Read", "Allow"). Pure data: no store, no broker.
"""

from __future__ import annotations

from dataclasses import dataclass

RESOURCE_TYPES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}
PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {
    2: "All",
    3: "Read",
    4: "Write",
    5: "Create",
    6: "Delete",
    7: "Alter",
    8: "Describe",
    9: "ClusterAction",
    10: "DescribeConfigs",
    11: "AlterConfigs",
    12: "IdempotentWrite",
    13: "CreateTokens",
    14: "DescribeTokens",
}
PERMISSIONS = {2: "Deny", 3: "Allow"}
CODES = {
    **{v: k for k, v in RESOURCE_TYPES.items()},
    **{v: k for k, v in PATTERN_TYPES.items()},
    **{v: k for k, v in OPERATIONS.items()},
    **{v: k for k, v in PERMISSIONS.items()},
}
ANY, MATCH = 1, 2
WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"

# Allowing one of these operations allows Describe (Kafka's implied operations).
IMPLIES_DESCRIBE = ("Read", "Write", "Delete", "Alter")
IMPLIES_DESCRIBE_CONFIGS = ("AlterConfigs",)

# Which operations make sense on which resource (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    "Topic": {"Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs", "AlterConfigs"},
    "Group": {"Read", "Describe", "Delete"},
    "Cluster": {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "Alter", "Describe"},
    "TransactionalId": {"Describe", "Write"},
    "DelegationToken": {"Describe"},
    "User": {"CreateTokens", "DescribeTokens"},
}


def resource_key(resource_type: str, name: str) -> str:
    return f"{resource_type}:{name}"


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: str  # "Topic", ...
    pattern_type: str  # "LITERAL" | "PREFIXED"
    name: str
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an address
    operation: str  # "Read", ..., "All"
    permission: str  # "Allow" | "Deny"

    def to_json(self) -> dict:
        return {
            "resource_type": self.resource_type,
            "pattern_type": self.pattern_type,
            "name": self.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission": self.permission,
        }

    @classmethod
    def from_json(cls, data: dict) -> AclBinding:
        return cls(
            data["resource_type"],
            data["pattern_type"],
            data["name"],
            data["principal"],
            data["host"],
            data["operation"],
            data["permission"],
        )

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation}, "
            f"permissionType={self.permission}) on {self.resource_type}:{self.pattern_type}:{self.name}"
        )


def binding_problem(b: AclBinding) -> str | None:
    """Why Kafka refuses to create this ACL, or None."""
    if b.resource_type not in SUPPORTED_OPERATIONS:
        return f"Invalid resource type {b.resource_type}"
    if b.pattern_type not in ("LITERAL", "PREFIXED"):
        return f"Invalid pattern type {b.pattern_type}"
    if b.operation != "All" and b.operation not in SUPPORTED_OPERATIONS[b.resource_type]:
        return f"Operation {b.operation} is not valid for resource type {b.resource_type}"
    if b.permission not in ("Allow", "Deny"):
        return f"Invalid permission type {b.permission}"
    if not b.name:
        return "Resource name must not be empty"
    if b.pattern_type == "PREFIXED" and b.name == WILDCARD:
        return "A prefixed ACL cannot use the wildcard name '*'"
    if b.resource_type == "Cluster" and b.name != CLUSTER_NAME:
        return f"The only valid name for the Cluster resource is {CLUSTER_NAME}"
    if ":" not in b.principal or not b.principal.split(":", 1)[1]:
        return f"Invalid principal {b.principal!r}; expected Type:name, e.g. User:alice"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A Describe/DeleteAcls filter: None fields match anything (Kafka's ANY / null);
    pattern type MATCH matches every pattern that applies to the name."""

    resource_type: str | None
    name: str | None
    pattern_type: str | None  # None (ANY), "MATCH", "LITERAL", "PREFIXED"
    principal: str | None
    host: str | None
    operation: str | None
    permission: str | None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type is not None and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == "MATCH":
            if self.name is not None and not (
                (b.pattern_type == "LITERAL" and b.name in (self.name, WILDCARD))
                or (b.pattern_type == "PREFIXED" and self.name.startswith(b.name))
            ):
                return False
        else:
            if self.pattern_type is not None and b.pattern_type != self.pattern_type:
                return False
            if self.name is not None and b.name != self.name:
                return False
        return (
            (self.principal is None or b.principal == self.principal)
            and (self.host is None or b.host == self.host)
            and (self.operation is None or b.operation == self.operation)
            and (self.permission is None or b.permission == self.permission)
        )


def filter_from_wire(item) -> AclFilter | str:
    """The ``AclFilter`` of a Describe/DeleteAcls filter entity, or why it is invalid."""

    def named(table: dict, code: int, what: str):
        if code == ANY:
            return None
        if code not in table:
            raise ValueError(f"Invalid {what} code {code}")
        return table[code]

    try:
        pattern = item.pattern_type_filter
        pattern_name = "MATCH" if pattern == MATCH else named(PATTERN_TYPES, pattern, "pattern type")
        return AclFilter(
            named(RESOURCE_TYPES, item.resource_type_filter, "resource type"),
            item.resource_name_filter,
            pattern_name,
            item.principal_filter,
            item.host_filter,
            named(OPERATIONS, item.operation, "operation"),
            named(PERMISSIONS, item.permission_type, "permission type"),
        )
    except ValueError as exc:
        return str(exc)


def binding_to_wire(b: AclBinding) -> dict:
    return {
        "resource_type": CODES[b.resource_type],
        "resource_name": b.name,
        "pattern_type": CODES[b.pattern_type],
        "principal": b.principal,
        "host": b.host,
        "operation": CODES[b.operation],
        "permission_type": CODES[b.permission],
    }


def binding_from_wire(wire: dict) -> AclBinding:
    return AclBinding(
        RESOURCE_TYPES.get(wire["resource_type"], str(wire["resource_type"])),
        PATTERN_TYPES.get(wire["pattern_type"], str(wire["pattern_type"])),
        wire["resource_name"],
        wire["principal"],
        wire["host"],
        OPERATIONS.get(wire["operation"], str(wire["operation"])),
        PERMISSIONS.get(wire["permission_type"], str(wire["permission_type"])),
    )


def filter_to_wire(f: AclFilter) -> dict:
    pattern = ANY if f.pattern_type is None else MATCH if f.pattern_type == "MATCH" else CODES[f.pattern_type]
    return {
        "resource_type_filter": ANY if f.resource_type is None else CODES[f.resource_type],
        "resource_name_filter": f.name,
        "pattern_type_filter": pattern,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": ANY if f.operation is None else CODES[f.operation],
        "permission_type": ANY if f.permission is None else CODES[f.permission],
    }
