"""What the shipped connectors (JDBC, mirror) share: their key tables seen through the connector
API, config checking with rules of their own, and a background watcher that asks the worker to
reconfigure the tasks when what they split changes (tables, topic-partitions, groups).

Key tables are ``odradek.config_def`` tables (one ``ConfigDef`` per key). ``check`` parses every
key and applies the connector's cross-key ``rules`` (a key that does not parse counts as its
default there); it returns (key, message) pairs. ``parse`` raises ``ConfigException`` for the first; ``validation`` puts each under its key
in the ``Config`` the REST validate endpoint shows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from odradek.config_def import ConfigDef, ConfigError, parse_value
from odradek.connect.connector_config import Config, ConfigValue, Importance
from odradek.connect.connector_config import ConfigDef as ConnectConfigDef
from odradek.connect.errors import ConfigException

log = logging.getLogger(__name__)

Rules = Callable[[dict[str, Any]], list[tuple[str, str]]]


def check(table: Mapping[str, ConfigDef], props: Mapping[str, Any], rules: Rules) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    for name, definition in table.items():
        try:
            values[name] = parse_value(definition, props.get(name))
        except ConfigError as bad:
            out.append((name, str(bad)))
            values[name] = definition.default  # so the rules still judge the other keys
    reported = {key for key, _ in out}
    return out + [(key, message) for key, message in rules(values) if key not in reported]


def parse(table: Mapping[str, ConfigDef], props: Mapping[str, Any], rules: Rules) -> dict[str, Any]:
    found = check(table, props, rules)
    if found:
        key, message = found[0]
        raise ConfigException(key, message=message.removeprefix(f"{key}: "))
    return {name: parse_value(definition, props.get(name)) for name, definition in table.items()}


def connect_config_def(table: Mapping[str, ConfigDef]) -> ConnectConfigDef:
    """The table as the connector API declares keys (what ``Connector.config_def`` returns)."""
    out = ConnectConfigDef()
    for d in table.values():
        out.define(d.name, d.type, d.default, d.validator, Importance.HIGH, d.doc)
    return out


def validation(
    table: Mapping[str, ConfigDef], props: Mapping[str, Any], found: list[tuple[str, str]]
) -> Config:
    """What ``Connector.validate`` returns: every key's value, each problem under its key."""
    values = {v.name: v for v in connect_config_def(table).validate(props)}
    for key, message in found:
        value = values.setdefault(key, ConfigValue(key, props.get(key)))
        if not value.errors:  # a value that does not parse is reported once, by the key's own check
            value.add_error(message)
    return Config(list(values.values()))


class Watcher:
    """Calls ``look()`` every ``interval`` seconds on a thread of its own; when the result differs
    from the last one, keeps it (``current``) and calls ``changed()``. Failures are logged and
    the next round tries again (the database or cluster may be briefly away)."""

    def __init__(
        self, what: str, interval: float, look: Callable[[], Any], changed: Callable[[], None], first: Any
    ):
        self.what = what
        self.interval = interval
        self.look = look
        self.changed = changed
        self.current = first
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{what}", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                found = self.look()
            except Exception:  # noqa: BLE001 - look again next round
                log.warning(
                    "looking for %s failed; trying again in %ss", self.what, self.interval, exc_info=True
                )
                continue
            if found != self.current:
                log.info("%s changed from %s to %s; reconfiguring tasks", self.what, self.current, found)
                self.current = found
                self.changed()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
