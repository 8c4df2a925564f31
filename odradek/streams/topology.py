"""The logical topology: what a ``StreamsBuilder`` builds, as plain data, before any Spark.

A ``Node`` is one of Kafka Streams' processors (source, processor, sink) with Kafka's generated
name (``KSTREAM-MAPVALUES-0000000001``), its parents and children, the state stores it owns and
the user function it runs. ``Topology.describe()`` prints the graph as Kafka's
``TopologyDescription`` does, split into sub-topologies at repartition topics. The compiler
(``compiler.py``) reads the same nodes; nothing here imports Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class TopologyException(ValueError):
    """A topology that cannot be built or run faithfully, with what to change."""


@dataclass(eq=False)
class Node:
    """One processor of the topology. ``op`` says what the compiler does with it; ``args`` holds
    its functions, serdes and options."""

    name: str
    kind: str  # "source", "processor" or "sink" (how describe() prints it)
    op: str
    parents: list[Node] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)  # a source's topics, a sink's topic
    args: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}>"


@dataclass
class Store:
    """A state store: its name and whether its changelog topic is written."""

    name: str
    logged: bool = True


class Topology:
    """The graph of nodes a ``StreamsBuilder`` built; ``describe()`` prints it."""

    def __init__(self, nodes: list[Node], stores: dict[str, Store]):
        self.nodes = nodes
        self.stores = stores

    def sources(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "source" and not n.args.get("repartition")]

    def source_topics(self) -> list[str]:
        return sorted({t for n in self.sources() for t in n.topics})

    def sink_topics(self) -> list[str]:
        return sorted(
            {t for n in self.nodes if n.kind == "sink" and not n.args.get("repartition") for t in n.topics}
        )

    def repartition_topics(self) -> list[str]:
        """Repartition topics' names without the application id (as describe() shows them)."""
        return sorted(
            {t for n in self.nodes if n.kind == "sink" and n.args.get("repartition") for t in n.topics}
        )

    def changelog_topics(self, application_id: str) -> list[str]:
        return [f"{application_id}-{s.name}-changelog" for s in self.stores.values() if s.logged]

    def sub_topologies(self) -> list[list[Node]]:
        """Connected groups of nodes, a repartition topic cutting the edge between them, in the
        order of their first node."""
        seen: dict[int, int] = {}
        groups: list[list[Node]] = []
        for start in self.nodes:
            if id(start) in seen:
                continue
            group: list[Node] = []
            stack = [start]
            seen[id(start)] = len(groups)
            while stack:
                node = stack.pop()
                group.append(node)
                for other in node.parents + node.children:
                    if id(other) not in seen:
                        seen[id(other)] = len(groups)
                        stack.append(other)
            groups.append(sorted(group, key=lambda n: (-_reach(n), n.name)))
        return groups

    def describe(self) -> TopologyDescription:
        return TopologyDescription(self)


class TopologyDescription:
    """Kafka's ``TopologyDescription``: ``str()`` is the text ``Topology.describe()`` prints."""

    def __init__(self, topology: Topology):
        self.topology = topology

    @property
    def subtopologies(self) -> list[list[Node]]:
        return self.topology.sub_topologies()

    def __str__(self) -> str:
        lines = ["Topologies:"]
        for index, group in enumerate(self.subtopologies):
            lines.append(f"   Sub-topology: {index}")
            for node in group:
                lines.extend(_describe_node(node))
            lines.append("")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return str(self)


def _reach(node: Node) -> int:
    """How many nodes ``node`` reaches through its children, itself included: Kafka prints a
    sub-topology's nodes from the one reaching most to the one reaching least, ties by name."""
    seen = {id(node)}
    stack = [node]
    while stack:
        for child in stack.pop().children:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return len(seen)


def _names(nodes: list[Node]) -> str:
    return ", ".join(sorted(n.name for n in nodes)) if nodes else "none"


def _describe_node(node: Node) -> list[str]:
    if node.kind == "source":
        head = f"    Source: {node.name} (topics: [{', '.join(node.topics)}])"
    elif node.kind == "sink":
        topic = node.topics[0] if node.topics else "<chosen per record>"
        head = f"    Sink: {node.name} (topic: {topic})"
    else:
        head = f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])"
    lines = [head]
    if node.kind != "sink":
        lines.append(f"      --> {_names(node.children)}")
    if node.kind != "source":
        lines.append(f"      <-- {_names(node.parents)}")
    return lines
