"""Consumer groups (the classic protocol) and committed offsets, stored in ``__consumer_offsets``.

``coordinator.GroupCoordinator`` is the component; ``state`` holds the state machine and
its theory of operation; ``group`` and ``member`` the data; ``schema`` the record
formats; ``offsets_topic`` the topic itself; ``delayed`` the timers.
"""
