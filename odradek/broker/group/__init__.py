"""Consumer groups and committed offsets, kept in ``__consumer_offsets`` (Kafka's group
coordinator).

- ``group_coordinator`` — ``GroupCoordinator``, the service the handlers call: one shard
  per ``__consumer_offsets`` partition this broker leads, loaded and unloaded with the
  partition's leadership; routes each group to its shard.
- ``group_coordinator_shard`` — ``GroupCoordinatorShard``: one partition's groups, and what
  spans groups and offsets (deleting a group, expiry, replaying records).
- ``classic_group_manager`` — membership and rebalances of the classic protocol (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup); ``classic_group``, ``classic_group_member`` its data;
  ``classic_group_state`` its state machine and theory of operation; ``delayed`` its timers.
- ``offset_manager`` — committed and transactional offsets (OffsetCommit, OffsetFetch,
  OffsetDelete, TxnOffsetCommit, expiry); ``offset_and_metadata`` the value kept.
- ``offsets_loader`` — replaying a partition into its shard when this broker becomes leader.
- ``offsets_topic`` — the topic itself (created on first use, appended to, read back);
  ``consumer_offsets_schema`` its record formats; ``partitioning`` which partition owns a group.
"""
