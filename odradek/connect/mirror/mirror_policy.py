"""How MirrorMaker 2 names things: remote topics and its internal topics (Kafka's
``DefaultReplicationPolicy`` and ``MirrorClientConfig``).

A topic ``orders`` copied from the cluster aliased ``us-west`` is ``us-west.orders`` on the
target (``replication.policy.separator`` between them). Offset syncs live on the source cluster
in ``mm2-offset-syncs.<target alias>.internal``; checkpoints on the target cluster in
``<source alias>.checkpoints.internal``. Internal topics (MM2's own, and ``__``-prefixed ones)
are never mirrored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicationPolicy:
    separator: str = "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a remote topic came from (``us-west`` for ``us-west.orders``), or None."""
        alias, found, _ = topic.partition(self.separator)
        return alias if found and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        alias = self.topic_source(topic)
        return None if alias is None else topic[len(alias) + len(self.separator) :]

    def offset_syncs_topic(self, target_alias: str) -> str:
        return f"mm2-offset-syncs{self.separator}{target_alias}{self.separator}internal"

    def checkpoints_topic(self, source_alias: str) -> str:
        return f"{source_alias}{self.separator}checkpoints{self.separator}internal"

    def heartbeats_topic(self) -> str:
        return "heartbeats"

    def is_internal_topic(self, topic: str) -> bool:
        return (
            topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith(".internal")
            or topic.endswith("-internal")
            or topic.startswith("mm2-")
        )
