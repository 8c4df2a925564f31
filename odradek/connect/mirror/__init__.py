"""MirrorMaker 2's connectors for Odradek: copy topics between clusters and translate consumer
groups' offsets (Kafka's ``org.apache.kafka.connect.mirror`` connectors, same keys, same
internal topics and record formats). See docs/connect-mirror.md.
"""

from odradek.connect.mirror.mirror_checkpoint import MirrorCheckpointConnector, MirrorCheckpointTask
from odradek.connect.mirror.mirror_source import MirrorSourceConnector, MirrorSourceTask

__all__ = ["MirrorCheckpointConnector", "MirrorCheckpointTask", "MirrorSourceConnector", "MirrorSourceTask"]
