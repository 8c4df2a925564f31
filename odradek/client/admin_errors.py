"""How the admin client reports per-item failures: the typed Kafka exception of the first
failed item, naming it, with every failed item in its ``errors`` attribute."""

from __future__ import annotations

from odradek.protocol.errors import KafkaError, error_for


def raise_items(errors: dict, what: str) -> None:
    if not errors:
        return
    item, exc = next(iter(errors.items()))
    if len(errors) > 1:
        exc.args = (f"{exc.args[0]} (and {len(errors) - 1} more failed {what})",)
    exc.errors = errors
    raise exc


def item_error(code: int, message: str | None, item) -> KafkaError:
    cls = error_for(code)
    return cls(f"{item}: {message or cls.code.name}", item=item)
