"""Finding connector classes by the names users write: Kafka's class names and their aliases.

Three sources, in order: the built-in connectors (FileStream, JDBC, Mirror, each imported on
first use; one whose module is missing is absent, not an error), the entry points of group
``odradek.connect`` in installed packages (``name = "package.module:Class"``), and the
directories of ``plugin.path`` (every ``.py`` file and package in them, imported once, and every
Connector subclass it defines). A class is found by its full name, its simple name, or its
simple name without ``Connector`` — as Kafka's plugin aliases.

``PluginRegistry`` is built once by the worker and read afterwards; safe from any thread.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from odradek.connect.api import Connector, SinkConnector, SourceConnector
from odradek.connect.errors import ConnectException

log = logging.getLogger("odradek.connect")

ENTRY_POINT_GROUP = "odradek.connect"

BUILT_IN = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "odradek.connect.file_stream:FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "odradek.connect.file_stream:FileStreamSinkConnector",
    "io.confluent.connect.jdbc.JdbcSourceConnector": "odradek.connect.jdbc:JdbcSourceConnector",
    "io.confluent.connect.jdbc.JdbcSinkConnector": "odradek.connect.jdbc:JdbcSinkConnector",
    "org.apache.kafka.connect.mirror.MirrorSourceConnector": "odradek.connect.mirror:MirrorSourceConnector",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector": "odradek.connect.mirror:MirrorCheckpointConnector",
}


@dataclass(frozen=True)
class Plugin:
    class_name: str  # as shown by the REST API (Kafka's name for the built-ins)
    cls: type[Connector]

    @property
    def type(self) -> str:
        if issubclass(self.cls, SourceConnector):
            return "source"
        if issubclass(self.cls, SinkConnector):
            return "sink"
        return "unknown"

    @property
    def version(self) -> str:
        try:
            return str(self.cls().version())
        except Exception:
            return "unknown"

    def info(self) -> dict:
        return {"class": self.class_name, "type": self.type, "version": self.version}


def _load(target: str) -> type | None:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        log.debug("connector plugin %s absent: %s", target, exc)
        return None
    return getattr(module, attr, None)


def aliases(class_name: str) -> list[str]:
    simple = class_name.rsplit(".", 1)[-1]
    out = [class_name, simple]
    if simple.endswith("Connector") and len(simple) > len("Connector"):
        out.append(simple[: -len("Connector")])
    return out


class PluginRegistry:
    def __init__(self, plugin_path: list[str] | None = None):
        self.plugins: dict[str, Plugin] = {}
        for class_name, target in BUILT_IN.items():
            cls = _load(target)
            if cls is not None:
                self._add(Plugin(class_name, cls))
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                cls = entry.load()
            except Exception as exc:
                log.warning("connector entry point %s (%s) cannot be loaded: %s", entry.name, entry.value, exc)
                continue
            if inspect.isclass(cls) and issubclass(cls, Connector):
                self._add(Plugin(f"{cls.__module__}.{cls.__qualname__}", cls))
        for directory in plugin_path or []:
            self._scan(Path(directory))
        self._by_alias: dict[str, Plugin] = {}
        for plugin in self.plugins.values():
            for alias in aliases(plugin.class_name):
                self._by_alias.setdefault(alias, plugin)

    def _add(self, plugin: Plugin) -> None:
        self.plugins.setdefault(plugin.class_name, plugin)

    def _scan(self, directory: Path) -> None:
        if not directory.is_dir():
            log.warning("plugin.path entry %s is not a directory: skipped", directory)
            return
        for path in sorted(directory.iterdir()):
            if path.name.startswith(("_", ".")):
                continue
            if path.suffix == ".py":
                target, name = path, path.stem
            elif (path / "__init__.py").is_file():
                target, name = path / "__init__.py", path.name
            else:
                continue
            module_name = f"odradek_connect_plugins.{name}"
            try:
                spec = importlib.util.spec_from_file_location(
                    module_name, target, submodule_search_locations=[str(path)] if path.is_dir() else None
                )
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
            except Exception as exc:
                log.warning("plugin %s cannot be loaded: %s", path, exc)
                continue
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, (SourceConnector, SinkConnector)) and cls.__module__ == module_name:
                    self._add(Plugin(f"{name}.{cls.__qualname__}", cls))

    def find(self, name: str) -> Plugin:
        """The plugin called ``name`` (full class name or alias); ConnectException when none is."""
        plugin = self._by_alias.get(name.strip()) or self.plugins.get(name.strip())
        if plugin is None:
            known = ", ".join(sorted(self.plugins)) or "none"
            raise ConnectException(
                f"Failed to find any class that implements Connector and which name matches {name}; "
                f"available connectors are: {known}"
            )
        return plugin

    def connectors(self) -> list[Plugin]:
        return sorted(self.plugins.values(), key=lambda p: p.class_name)
