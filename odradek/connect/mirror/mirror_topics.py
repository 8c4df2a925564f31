"""Keeping the target's remote topics in step with the source's topics (MirrorSourceConnector's
housekeeping): which source topics are mirrored, creating ``<alias>.<topic>`` with the same
partition count, adding partitions when the source grows, and copying topic configs.

Configs are copied when ``sync.topic.configs.enabled``: every key the source topic sets
explicitly (not a broker default), except the ones MirrorMaker 2's ``DefaultConfigPropertyFilter``
leaves alone because they belong to the target cluster's own operation.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from odradek.client import ConfigResource, NewTopic
from odradek.connect.mirror.mirror_policy import ReplicationPolicy
from odradek.connect.mirror.mirror_settings import matcher
from odradek.protocol.errors import TopicAlreadyExistsError

log = logging.getLogger(__name__)

EXCLUDED_CONFIGS = re.compile(
    r"follower\.replication\.throttled\.replicas|leader\.replication\.throttled\.replicas"
    r"|message\.timestamp\.difference\.max\.ms|message\.timestamp\.type|unclean\.leader\.election\.enable"
    r"|min\.insync\.replicas"
)


class TopicSync:
    def __init__(self, config: dict[str, Any], source_admin: Any, target_admin: Any):
        self.config = config
        self.source = source_admin
        self.target = target_admin
        self.policy = ReplicationPolicy(config["replication.policy.separator"])
        self.alias = config["source.cluster.alias"]
        self._wanted = matcher(config["topics"], config["topics.exclude"])

    def mirrored(self, topic: str) -> bool:
        if self.policy.is_internal_topic(topic):
            return False
        # A topic that came from the target would travel back where it started (a cycle).
        if self.policy.topic_source(topic) == self.config["target.cluster.alias"]:
            return False
        return self._wanted(topic)

    def source_partitions(self) -> dict[str, int]:
        """{mirrored source topic: its partition count}."""
        names = [t for t in self.source.list_topics() if self.mirrored(t)]
        if not names:
            return {}
        return {name: len(d.partitions) for name, d in self.source.describe_topics(names).items()}

    def sync(self, partitions: dict[str, int]) -> None:
        """Create missing remote topics, grow their partitions, copy configs."""
        if not partitions:
            return
        remote = {self.policy.format_remote_topic(self.alias, t): t for t in partitions}
        existing = set(self.target.list_topics())
        configs = self._source_configs(list(partitions)) if self.config["sync.topic.configs.enabled"] else {}
        for name, upstream in remote.items():
            count = partitions[upstream]
            if name not in existing:
                log.info("mirror: creating %s with %d partitions", name, count)
                try:
                    self.target.create_topics(
                        [
                            NewTopic(
                                name, count, self.config["replication.factor"], configs.get(upstream) or None
                            )
                        ]
                    )
                except TopicAlreadyExistsError:
                    pass
        if existing & set(remote):
            described = self.target.describe_topics([n for n in remote if n in existing])
            grow = {
                n: partitions[remote[n]]
                for n, d in described.items()
                if len(d.partitions) < partitions[remote[n]]
            }
            if grow:
                log.info("mirror: adding partitions %s", grow)
                self.target.create_partitions(grow)
            if configs:
                changes = {
                    ConfigResource("topic", n): configs[remote[n]]
                    for n in remote
                    if n in existing and configs.get(remote[n])
                }
                if changes:
                    self.target.incremental_alter_configs(changes)

    def _source_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        described = self.source.describe_configs([ConfigResource("topic", t) for t in topics])
        out = {}
        for resource, entries in described.items():
            out[resource.name if hasattr(resource, "name") else resource[1]] = {
                name: entry.value
                for name, entry in entries.items()
                if not entry.is_default
                and not entry.is_sensitive
                and entry.value is not None
                and not EXCLUDED_CONFIGS.fullmatch(name)
            }
        return out

    def ensure_internal_topic(self, admin: Any, name: str, replication_factor: int) -> None:
        """A compacted one-partition topic (offset syncs, checkpoints), created if missing."""
        if name in set(admin.list_topics(internal=True)):
            return
        try:
            admin.create_topics([NewTopic(name, 1, replication_factor, {"cleanup.policy": "compact"})])
        except TopicAlreadyExistsError:
            pass
