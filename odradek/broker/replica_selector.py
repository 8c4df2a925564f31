"""Choosing the replica a consumer should read from (KIP-392, Kafka's ReplicaSelector).

``replica.selector.class`` names the selector as in Kafka: unset (or Kafka's
``LeaderSelector``) keeps every consumer on the leader; Kafka's
``org.apache.kafka.common.replica.RackAwareReplicaSelector`` (or just
``RackAwareReplicaSelector``) sends a consumer whose ``client.rack`` matches a replica's
``broker.rack`` to that replica: the leader when it is in that rack, else the in-sync
follower in that rack whose log reaches furthest, provided it holds the fetch offset.
Racks come from the metadata image's brokers. Any other class name is refused at startup.
"""

from __future__ import annotations

RACK_AWARE = {"org.apache.kafka.common.replica.RackAwareReplicaSelector", "RackAwareReplicaSelector"}
LEADER = {"org.apache.kafka.common.replica.LeaderSelector", "LeaderSelector"}


class UnknownReplicaSelectorError(ValueError):
    pass


def replica_selector(class_name: str | None, store):
    """The selector function for ``replica.selector.class``, or None (the leader)."""
    if not class_name or class_name in LEADER:
        return None
    if class_name not in RACK_AWARE:
        raise UnknownReplicaSelectorError(
            f"replica.selector.class={class_name}: Odradek knows {sorted(RACK_AWARE | LEADER)}"
        )

    def rack_aware(partition, client_rack: str, fetch_offset: int) -> int | None:
        brokers = store.image.brokers
        here = brokers.get(partition.node_id)
        if here is not None and here.rack == client_rack:
            return None
        best, best_leo = None, -1
        followers = partition.follower_states()
        for replica in partition.state.isr:
            info = brokers.get(replica)
            follower = followers.get(replica)
            if info is None or info.rack != client_rack or follower is None:
                continue
            if follower.leo >= fetch_offset >= follower.log_start >= 0 and follower.leo > best_leo:
                best, best_leo = replica, follower.leo
        return best

    return rack_aware
