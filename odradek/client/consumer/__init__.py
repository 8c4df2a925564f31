"""The asyncio consumer and its parts, after aiokafka's layout.

``consumer.py`` is ``Consumer`` (the public asyncio class; ``odradek.aio.Consumer``), which
owns the rest: ``subscription.py`` (what is subscribed or assigned, and the positions;
data, no tasks), ``fetcher.py`` (the one task that fetches and decodes records),
``consumer_coordinator.py`` (group membership and rebalances: the client side of the group
coordinator) with its ``heartbeat_task.py``, ``offset_commits.py``, ``member_state.py``
and ``consumer_protocol.py`` (the subscription and assignment bytes), and ``assignors.py``
(range, round-robin, sticky, cooperative-sticky).
"""
