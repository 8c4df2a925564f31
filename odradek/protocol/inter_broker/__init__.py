"""Schemas of the inter-broker control APIs that kio (built from Kafka 4's messages) lacks.

Kafka 4 removed ZooKeeper mode and with it LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6) and ControlledShutdown (7). We declare one flexible version of each, the
one a Kafka 3.x ZooKeeper-mode controller sends, as kio-style dataclasses, so that the same
reader, writer and well-formedness check serve them as every other API
(``protocol.messages`` looks here before asking kio).
"""

from odradek.protocol.inter_broker import controlled_shutdown, leader_and_isr, stop_replica, update_metadata

# api key -> (name as kio spells API names, version, request class, response class)
SCHEMAS = {
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
