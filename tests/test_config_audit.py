"""Every config key Odradek accepts either takes effect or says it does not.

A broker or topic key that is validated and shown by DescribeConfigs but read nowhere
misleads whoever sets it. This audit reads the source with ``ast`` (nothing is run): a key
is *read* when its exact name is a string constant in a module of odradek/ other than the
tables themselves (and other than a member of dynamic_config's sets of updatable keys); a topic key also when its ``LogConfig`` field is used as an attribute;
a broker key that only supplies a topic key's default (``log.segment.bytes`` for
``segment.bytes``) is read when that topic key is. Each key must be read or carry a note
(INFORMATIONAL, KRAFT, DEPRECATED: ``documentation`` then says it has no effect, and the
broker warns at start when one is set); a key marked INFORMATIONAL must not be read, so a
key that gains an effect loses the "no effect" text.
"""

from __future__ import annotations

import ast
from pathlib import Path

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.config_def import ACTIVE, INFORMATIONAL
from odradek.storage.log_config import TOPIC_CONFIGS

PACKAGE = Path(__file__).resolve().parents[1] / "odradek"
TABLES = {PACKAGE / "broker" / "broker_keys.py", PACKAGE / "storage" / "log_config.py"}
# Sets of key names here say which keys may change at run time, not that they have an effect.
REGISTRIES = {PACKAGE / "broker" / "dynamic_config.py"}


def _source_uses() -> tuple[set[str], set[str]]:
    """(string constants outside the tables, attribute names anywhere) in odradek/."""
    strings: set[str] = set()
    attributes: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        listed = set()
        if path in REGISTRIES:
            listed = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Set) for c in node.elts}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                attributes.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and path not in TABLES:
                if id(node) not in listed:
                    strings.add(node.value)
    return strings, attributes


def _read_keys() -> tuple[set[str], set[str]]:
    strings, attributes = _source_uses()
    topic = {name for name in TOPIC_CONFIGS if name in strings or name.replace(".", "_") in attributes}
    supplies = {
        broker_key
        for name in topic
        if TOPIC_CONFIGS[name].note == ACTIVE
        for broker_key, _factor in TOPIC_CONFIGS[name].synonyms
    }
    broker = {name for name in BROKER_CONFIGS if name in strings or name in supplies}
    return broker, topic


def test_every_key_is_read_or_says_it_has_no_effect():
    broker, topic = _read_keys()
    silent_broker = sorted(
        name
        for name, d in BROKER_CONFIGS.items()
        if d.note == ACTIVE and name not in broker
    )
    silent_topic = sorted(name for name, d in TOPIC_CONFIGS.items() if d.note == ACTIVE and name not in topic)
    assert not silent_broker, (
        f"broker keys read nowhere in odradek/ (use them or mark them INFORMATIONAL): {silent_broker}"
    )
    assert not silent_topic, (
        f"topic keys read nowhere in odradek/ (use them or mark them INFORMATIONAL): {silent_topic}"
    )


def test_a_key_marked_informational_is_not_read():
    broker, topic = _read_keys()
    stale = sorted(
        [name for name, d in BROKER_CONFIGS.items() if d.note == INFORMATIONAL and name in broker]
        + [name for name, d in TOPIC_CONFIGS.items() if d.note == INFORMATIONAL and name in topic]
    )
    assert not stale, f"keys marked INFORMATIONAL ('no effect') that odradek/ reads: {stale}"
