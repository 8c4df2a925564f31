"""The mirror connectors' configuration keys, with MirrorMaker 2's names and defaults.

``MIRROR_CONFIGS`` serves both connectors (as ``MirrorConnectorConfig`` does in Kafka). The
clusters are reached through ``source.cluster.bootstrap.servers`` / ``target.cluster.bootstrap.servers``
and the other ``source.cluster.*`` / ``target.cluster.*`` client keys (``security.protocol``,
``sasl.*``, ``ssl.*``), which ``cluster_client_config`` turns into an Odradek client config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from odradek.config_def import (
    BOOL,
    INT,
    LIST,
    LONG,
    STR,
    AtLeast,
    ConfigDef,
    config_table,
)
from odradek.connect.jdbc.connector_support import check
from odradek.connect.jdbc.connector_support import parse as parse_checked

MIRROR_CONFIGS = config_table(
    ConfigDef(
        "source.cluster.alias", STR, "source", doc="The source cluster's name; remote topics start with it."
    ),
    ConfigDef("target.cluster.alias", STR, "target", doc="The target cluster's name."),
    ConfigDef("source.cluster.bootstrap.servers", STR, None, doc="Where to read the source cluster."),
    ConfigDef(
        "target.cluster.bootstrap.servers", STR, None, doc="Where to create topics and commit offsets."
    ),
    ConfigDef("replication.policy.separator", STR, ".", doc="Between the source alias and the topic name."),
    ConfigDef("topics", LIST, [".*"], doc="Regular expressions of the topics to mirror."),
    ConfigDef(
        "topics.exclude",
        LIST,
        [r".*[\-\.]internal", r".*\.replica", "__.*"],
        doc="Regular expressions of topics never mirrored.",
    ),
    ConfigDef("groups", LIST, [".*"], doc="Regular expressions of the consumer groups to checkpoint."),
    ConfigDef(
        "groups.exclude",
        LIST,
        ["console-consumer-.*", "connect-.*", "__.*"],
        doc="Regular expressions of groups never checkpointed.",
    ),
    ConfigDef(
        "sync.topic.configs.enabled", BOOL, True, doc="Copy the source topics' configs to the remote topics."
    ),
    ConfigDef(
        "refresh.topics.interval.seconds",
        LONG,
        600,
        AtLeast(1),
        doc="How often new topics, partitions and configs are looked for.",
    ),
    ConfigDef(
        "refresh.topics.interval.ms", LONG, None, AtLeast(1), doc="The same, in milliseconds (wins if set)."
    ),
    ConfigDef(
        "refresh.groups.interval.seconds", LONG, 600, AtLeast(1), doc="How often new groups are looked for."
    ),
    ConfigDef("replication.factor", INT, 2, AtLeast(1), doc="Replication factor of remote topics created."),
    ConfigDef("offset-syncs.topic.replication.factor", INT, 3, AtLeast(1), doc="Of the offset-syncs topic."),
    ConfigDef("checkpoints.topic.replication.factor", INT, 3, AtLeast(1), doc="Of the checkpoints topic."),
    ConfigDef(
        "offset.lag.max",
        LONG,
        100,
        AtLeast(0),
        doc="How far the remote offset may drift before a new offset sync is written.",
    ),
    ConfigDef("emit.checkpoints.enabled", BOOL, True, doc="Write group checkpoints to the target cluster."),
    ConfigDef(
        "emit.checkpoints.interval.seconds", LONG, 60, AtLeast(0), doc="How often checkpoints are written."
    ),
    ConfigDef(
        "sync.group.offsets.enabled", BOOL, False, doc="Commit translated offsets to the target's groups."
    ),
    ConfigDef(
        "sync.group.offsets.interval.seconds", LONG, 60, AtLeast(0), doc="How often they are committed."
    ),
    ConfigDef("task.assigned.partitions", LIST, [], doc="(Set by the connector: a task's topic-partitions.)"),
    ConfigDef("task.assigned.groups", LIST, [], doc="(Set by the connector: a task's groups.)"),
)

# Client keys that pass from source.cluster.* / target.cluster.* to the Odradek clients.
_CLIENT_KEY = re.compile(r"bootstrap\.servers|client\.id|security\.protocol|sasl\..+|ssl\..+")


def parse(props: Mapping[str, Any]) -> dict[str, Any]:
    return parse_checked(MIRROR_CONFIGS, props, _rules)


def problems(props: Mapping[str, Any]) -> list[tuple[str, str]]:
    return check(MIRROR_CONFIGS, props, _rules)


def _rules(values: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for key in ("source.cluster.bootstrap.servers", "target.cluster.bootstrap.servers"):
        if not values[key]:
            out.append((key, f"{key}: required (host:port of a broker of that cluster)"))
    for key in ("topics", "topics.exclude", "groups", "groups.exclude"):
        for pattern in values[key]:
            try:
                re.compile(pattern)
            except re.error as exc:
                out.append((key, f"{key}: {pattern!r} is not a regular expression ({exc})"))
    return out


def refresh_topics_seconds(config: dict[str, Any]) -> float:
    if config["refresh.topics.interval.ms"] is not None:
        return config["refresh.topics.interval.ms"] / 1000
    return float(config["refresh.topics.interval.seconds"])


def cluster_client_config(props: Mapping[str, Any], cluster: str) -> dict[str, str]:
    """``source``/``target``: the Odradek client config from that cluster's prefixed keys."""
    prefix = f"{cluster}.cluster."
    return {
        key[len(prefix) :]: str(value)
        for key, value in props.items()
        if key.startswith(prefix) and _CLIENT_KEY.fullmatch(key[len(prefix) :])
    }


def matcher(include: list[str], exclude: list[str]):
    """A predicate: the name fully matches an include pattern and no exclude pattern."""
    inc = [re.compile(p) for p in include]
    exc = [re.compile(p) for p in exclude]
    return lambda name: any(p.fullmatch(name) for p in inc) and not any(p.fullmatch(name) for p in exc)
