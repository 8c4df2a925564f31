"""Per-group configs (Kafka 4's GroupConfig): GROUP resources of IncrementalAlterConfigs and
DescribeConfigs.

A group may override a few broker settings for itself. Each key falls back to its broker key
and must lie within the bounds the broker sets, as in Kafka::

    group key                        broker default                         bounds
    consumer.session.timeout.ms      group.consumer.session.timeout.ms      group.consumer.{min,max}.session.timeout.ms
    consumer.heartbeat.interval.ms   group.consumer.heartbeat.interval.ms   group.consumer.{min,max}.heartbeat.interval.ms
    share.session.timeout.ms         group.share.session.timeout.ms         1 ms and up
    share.heartbeat.interval.ms      group.share.heartbeat.interval.ms      1 ms and up
    share.record.lock.duration.ms    group.share.record.lock.duration.ms    group.share.{min,max}.record.lock.duration.ms
    share.delivery.count.limit       group.share.delivery.count.limit       group.share.{min,max}.delivery.count.limit
    share.partition.max.record.locks group.share.partition.max.record.locks group.share.{min,max}.partition.max.record.locks
    share.auto.offset.reset          latest (Kafka's default)               latest, earliest
    share.isolation.level            read_uncommitted                       read_committed, read_uncommitted
    share.renew.acknowledge.enable   true                                   true, false (RENEW acknowledgements)

The overrides live in the metadata store (Kafka: GROUP ConfigRecords in the metadata log), so
they survive restarts; a group's configs go when the group is deleted.

Owned by the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.broker.config_entries import ConfigEntry, ConfigSynonym
from odradek.config_def import ConfigSource, ConfigType
from odradek.protocol import errors

SET, DELETE = 0, 1
_BOOLEAN = ("true", "false")


class GroupKey(NamedTuple):
    broker_key: str | None  # the broker setting it overrides (None: a fixed default)
    default: str  # when broker_key is None
    bounds: tuple[object, object] | tuple[str, ...]  # (min, max): ints or broker keys; or the choices
    doc: str


GROUP_CONFIGS: dict[str, GroupKey] = {
    "consumer.session.timeout.ms": GroupKey(
        "group.consumer.session.timeout.ms",
        "",
        ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        "How long a member of this consumer-protocol group may stay silent before it is fenced.",
    ),
    "consumer.heartbeat.interval.ms": GroupKey(
        "group.consumer.heartbeat.interval.ms",
        "",
        ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
        "How often the members of this consumer-protocol group heartbeat.",
    ),
    "share.session.timeout.ms": GroupKey(
        "group.share.session.timeout.ms", "", (1, 2**31 - 1), "Session timeout of this share group's members."
    ),
    "share.heartbeat.interval.ms": GroupKey(
        "group.share.heartbeat.interval.ms", "", (1, 2**31 - 1), "Heartbeat interval of this share group's members."
    ),
    "share.record.lock.duration.ms": GroupKey(
        "group.share.record.lock.duration.ms",
        "",
        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        "How long a member of this share group holds the records it acquired.",
    ),
    "share.delivery.count.limit": GroupKey(
        "group.share.delivery.count.limit",
        "",
        ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
        "Deliveries of a record to this share group's members before it is archived.",
    ),
    "share.partition.max.record.locks": GroupKey(
        "group.share.partition.max.record.locks",
        "",
        ("group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
        "Records of a partition this share group holds in flight at once.",
    ),
    "share.isolation.level": GroupKey(
        None,
        "read_uncommitted",
        ("read_committed", "read_uncommitted"),
        "read_committed: deliver only committed transactional records (aborted ones are skipped).",
    ),
    "share.renew.acknowledge.enable": GroupKey(
        None,
        "true",
        ("true", "false"),
        "Whether this share group's members may renew their acquisition locks (RENEW acknowledgements).",
    ),
    "share.auto.offset.reset": GroupKey(
        None,
        "latest",
        ("latest", "earliest"),
        "Where this share group starts reading a partition it has not read before.",
    ),
}


class GroupConfigs:
    """The groups' overrides, kept in ``store``; ``config()`` is the broker config in force."""

    def __init__(self, store, config: Callable[[], object]):
        self.store = store
        self.config = config

    def overrides(self, group_id: str) -> dict[str, str]:
        return self.store.group_configs(group_id)

    def value(self, group_id: str, name: str) -> str:
        """The value in force of group key ``name`` for ``group_id``, as a string."""
        override = self.store.group_configs(group_id).get(name)
        return override if override is not None else self._default(name)

    def int_value(self, group_id: str, name: str) -> int:
        return int(self.value(group_id, name))

    def _default(self, name: str) -> str:
        key = GROUP_CONFIGS[name]
        if key.broker_key is None:
            return key.default
        return str(self.config().get(key.broker_key))  # type: ignore[attr-defined]

    def _bound(self, bound) -> int:
        return int(self.config().get(bound)) if isinstance(bound, str) else int(bound)  # type: ignore[attr-defined]

    def alter(self, group_id: str, ops, validate_only: bool) -> None:
        """IncrementalAlterConfigs of GROUP ``group_id``: ``(name, op, value)``, SET or DELETE;
        raises InvalidConfigError / InvalidRequestError saying what is wrong."""
        if not group_id:
            raise errors.InvalidRequestError("A group resource needs a group id.")
        current = self.store.group_configs(group_id)
        for name, op, value in ops:
            key = GROUP_CONFIGS.get(name)
            if key is None:
                raise errors.InvalidConfigError(
                    f"Unknown group config {name}; group configs are {', '.join(sorted(GROUP_CONFIGS))}"
                )
            if op == DELETE:
                current.pop(name, None)
                continue
            if op != SET:
                raise errors.InvalidConfigError(f"{name} only takes SET and DELETE")
            current[name] = self._checked(name, key, value)
        if not validate_only:
            self.store.set_group_configs(group_id, current)

    def _checked(self, name: str, key: GroupKey, value: str) -> str:
        if key.broker_key is None:
            value = value.lower() if key.bounds == _BOOLEAN else value
            if value not in key.bounds:
                raise errors.InvalidConfigError(f"{name} must be one of {', '.join(map(str, key.bounds))}")
            return value
        try:
            number = int(value)
        except ValueError:
            raise errors.InvalidConfigError(f"{name} must be a number of milliseconds, not {value!r}") from None
        low, high = self._bound(key.bounds[0]), self._bound(key.bounds[1])
        if not low <= number <= high:
            raise errors.InvalidConfigError(f"{name} must be between {low} and {high} (it is {number})")
        return str(number)

    def delete(self, group_id: str) -> None:
        """The group was deleted: its configs go."""
        if self.store.group_configs(group_id):
            self.store.set_group_configs(group_id, {})

    def entries(self, group_id: str) -> list[ConfigEntry]:
        """DescribeConfigs of GROUP ``group_id``: every group key, GROUP_CONFIG when set on the
        group, else DEFAULT_CONFIG with the broker's value (Kafka answers the same way)."""
        overrides = self.store.group_configs(group_id)
        out = []
        for name, key in sorted(GROUP_CONFIGS.items()):
            default = self._default(name)
            synonyms = []
            if name in overrides:
                value, source = overrides[name], ConfigSource.GROUP_CONFIG
                synonyms.append(ConfigSynonym(name, value, ConfigSource.GROUP_CONFIG))
            else:
                value, source = default, ConfigSource.DEFAULT_CONFIG
            synonyms.append(ConfigSynonym(key.broker_key or name, default, ConfigSource.DEFAULT_CONFIG))
            kind = ConfigType.INT if key.broker_key is not None else (
                ConfigType.BOOLEAN if key.bounds == _BOOLEAN else ConfigType.STRING
            )
            out.append(ConfigEntry(name, value, source, False, False, synonyms, kind, key.doc))
        return out
