"""Schemas of the inter-broker control APIs that kio (built from Kafka 4's messages) lacks.

Kafka 4 removed ZooKeeper mode and with it LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6) and ControlledShutdown (7). We declare one flexible version of each, the
newest a Kafka 3.9 ZooKeeper-mode controller sends (so clients that infer a broker's Kafka
version from its ApiVersions still see 3.9), as kio-style dataclasses, so that the same
reader, writer and well-formedness check serve them as every other API
(``protocol.messages`` looks here before asking kio). The modules are named ``*_schema`` (the
handlers own the API names); ``inter_broker.leader_and_isr`` and the others are their aliases.
"""

from odradek.protocol.inter_broker import controlled_shutdown_schema as controlled_shutdown
from odradek.protocol.inter_broker import leader_and_isr_schema as leader_and_isr
from odradek.protocol.inter_broker import stop_replica_schema as stop_replica
from odradek.protocol.inter_broker import update_metadata_schema as update_metadata

# api key -> (name as kio spells API names, version, request class, response class)
SCHEMAS: dict[int, tuple[str, int, type, type]] = {
    leader_and_isr.API_KEY: (
        "leader_and_isr",
        leader_and_isr.VERSION,
        leader_and_isr.LeaderAndIsrRequest,
        leader_and_isr.LeaderAndIsrResponse,
    ),
    stop_replica.API_KEY: (
        "stop_replica",
        stop_replica.VERSION,
        stop_replica.StopReplicaRequest,
        stop_replica.StopReplicaResponse,
    ),
    update_metadata.API_KEY: (
        "update_metadata",
        update_metadata.VERSION,
        update_metadata.UpdateMetadataRequest,
        update_metadata.UpdateMetadataResponse,
    ),
    controlled_shutdown.API_KEY: (
        "controlled_shutdown",
        controlled_shutdown.VERSION,
        controlled_shutdown.ControlledShutdownRequest,
        controlled_shutdown.ControlledShutdownResponse,
    ),
}

__all__ = ["SCHEMAS", "controlled_shutdown", "leader_and_isr", "stop_replica", "update_metadata"]
