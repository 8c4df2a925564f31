"""The security znodes in Kafka's ZooKeeper layout (issue 17), on top of ``zk_data``.

What the metadata store keeps for the authorizer and SASL/SCRAM, as Kafka lays it out: an
ACL binding (``protocol.acl_model``: "Topic", "LITERAL", "Read", "Allow") lives in the znode
of its resource and pattern (``zk_data.acl_path``) with every other entry of that resource;
a change creates a sequential ``acl_changes_`` node naming the resource. A user's SCRAM
credentials are keys of its entity config (``/config/users/<user>``): "SCRAM-SHA-256" ->
"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>", beside its quotas.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.cluster.zk_data import AclEntry, acl_path, decode_acls, encode_acls, enum_name, pascal_case
from odradek.protocol.acl_model import AclBinding

SCRAM_CONFIG_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def acl_znodes(bindings) -> dict[str, bytes]:
    """``{znode path: bytes}`` for ``acl_model.AclBinding`` s, grouped by resource and pattern."""
    grouped: dict[str, list[AclEntry]] = {}
    for b in bindings:
        path = acl_path(enum_name(b.resource_type), b.name, b.pattern_type)
        grouped.setdefault(path, []).append(
            AclEntry(b.principal, enum_name(b.permission), enum_name(b.operation), b.host)
        )
    return {path: encode_acls(entries) for path, entries in grouped.items()}


def acl_bindings(resource_type: str, resource_name: str, pattern_type: str, data: bytes) -> list:
    """The ``acl_model.AclBinding`` s stored in one resource's znode; ``resource_type`` is
    the znode's parent name (``Topic``) and ``pattern_type`` LITERAL or PREFIXED."""
    znode = acl_path(enum_name(resource_type), resource_name, pattern_type)
    return [
        AclBinding(
            pascal_case(enum_name(resource_type)),
            pattern_type,
            resource_name,
            e.principal,
            e.host,
            pascal_case(e.operation),
            pascal_case(e.permission_type),
        )
        for e in decode_acls(data, znode)
    ]


def scram_credentials(user_config: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM credentials among a user's entity config: ``{mechanism: credential text}``."""
    return {k: v for k, v in user_config.items() if k in SCRAM_CONFIG_KEYS}


def with_scram_credential(user_config: Mapping[str, str], mechanism: str, credential: str | None) -> dict[str, str]:
    """The user's entity config with one mechanism's credential set (or removed with None);
    quota keys are kept."""
    if mechanism not in SCRAM_CONFIG_KEYS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {', '.join(SCRAM_CONFIG_KEYS)}")
    config = dict(user_config)
    if credential is None:
        config.pop(mechanism, None)
    else:
        config[mechanism] = credential
    return config
