"""Shared settings for the client tests (a module of its own: ``conftest`` is ambiguous on sys.path)."""

# Group timings that tansu and Kafka accept and keep the tests short.
GROUP_OPTIONS = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
    "auto_offset_reset": "earliest",
}
