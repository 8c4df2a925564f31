"""A source connector's exactly-once keys (KIP-618's ``SourceConnectorConfig`` EOS group) and their checks.

``exactly.once.support``: ``requested`` (default: run with whatever the connector can give) or
``required`` (refuse the connector unless the worker has ``exactly.once.source.support=enabled``
and the connector's ``exactly_once_support()`` says SUPPORTED). ``transaction.boundary``:
``poll`` (default), ``interval`` (with ``transaction.boundary.interval.ms``) or ``connector``
(only for a connector whose ``can_define_transaction_boundaries()`` says SUPPORTED). The checks
add their errors to the validate endpoint's answer, in Kafka's words; creating a connector that
has any is refused with them. ``transaction_interval_s`` turns the boundary into the interval
at which the task loop commits (0: after every poll that returned records).
"""

from __future__ import annotations

import logging
import math

from odradek.config_def import AtLeast, OneOf
from odradek.connect.api import ConfigDef, ConnectorTransactionBoundaries, ExactlyOnceSupport, Importance
from odradek.connect.connector_config import ConfigValue

log = logging.getLogger("odradek.connect")

SOURCE_EOS_CONFIG = (
    ConfigDef()
    .define("exactly.once.support", "STRING", "requested", OneOf("requested", "required"), Importance.MEDIUM,
            group="Exactly Once Support",
            doc="requested: exactly-once delivery if the worker and the connector can give it; required: refuse "
                "the connector unless both can.")
    .define("transaction.boundary", "STRING", "poll", OneOf("poll", "interval", "connector"), Importance.MEDIUM,
            group="Exactly Once Support",
            doc="Where a source task's transactions end with exactly-once source support: after each poll, every "
                "transaction.boundary.interval.ms, or where the connector says.")
    .define("transaction.boundary.interval.ms", "LONG", None, AtLeast(0), Importance.LOW,
            group="Exactly Once Support",
            doc="With transaction.boundary=interval: the interval of transaction commits (default: the worker's "
                "offset.flush.interval.ms).")
)

NO_PREFLIGHT = (
    "The connector does not implement the API required for preflight validation of exactly-once source support. "
    "Please consult the documentation for the connector to determine whether it supports exactly-once semantics, "
    'and then consider reconfiguring the connector to use the value "requested" for this property (which will '
    "disable this preflight check and allow the connector to be created).")


def check_source_eos(connector, config: dict[str, str], values: dict[str, ConfigValue], worker_eos: bool) -> None:
    """Add to ``values`` the errors of the connector's exactly-once keys (its own checks passed)."""
    support = values["exactly.once.support"]
    if not support.errors and support.value == "required":
        if not worker_eos:
            support.add_error("This worker does not have exactly-once source support enabled.")
        try:
            answer = connector.exactly_once_support(config)
        except Exception as exc:
            log.warning("exactly_once_support() of %s raised %r", type(connector).__name__, exc)
            support.add_error(f"An unexpected error occurred during validation: {exc}")
        else:
            if answer is None:
                support.add_error(NO_PREFLIGHT)
            elif answer != ExactlyOnceSupport.SUPPORTED:
                support.add_error("The connector does not support exactly-once semantics with the provided "
                                  "configuration.")
    boundary = values["transaction.boundary"]
    if not boundary.errors and boundary.value == "connector":
        try:
            answer = connector.can_define_transaction_boundaries(config)
        except Exception as exc:
            log.warning("can_define_transaction_boundaries() of %s raised %r", type(connector).__name__, exc)
            boundary.add_error(f"An unexpected error occurred during validation: {exc}")
        else:
            if answer != ConnectorTransactionBoundaries.SUPPORTED:
                boundary.add_error("The connector does not support connector-defined transaction boundaries with "
                                   "the given configuration. Please reconfigure it to use a different transaction "
                                   "boundary definition.")


def transaction_interval_s(connector_config: dict[str, str], flush_interval_ms: int) -> float:
    """How often an exactly-once source task commits its transaction, by ``transaction.boundary``.

    ``poll``: after every poll (0); ``interval``: every ``transaction.boundary.interval.ms``, by
    default the worker's ``offset.flush.interval.ms``; ``connector``: never by time (the
    connector's ``TransactionContext`` ends them)."""
    values = SOURCE_EOS_CONFIG.parse(connector_config)
    if values["transaction.boundary"] == "poll":
        return 0.0
    if values["transaction.boundary"] == "connector":
        return math.inf
    interval = values["transaction.boundary.interval.ms"]
    if values["transaction.boundary"] == "interval" and interval is not None:
        return interval / 1000
    return flush_interval_ms / 1000


def connector_defines_transactions(connector_config: dict[str, str]) -> bool:
    """``transaction.boundary=connector``: the task's ``TransactionContext`` ends its transactions."""
    return SOURCE_EOS_CONFIG.parse(connector_config)["transaction.boundary"] == "connector"
