"""Opening the database connection of a JDBC connector or task, with Confluent's retries.

``connection.attempts`` tries, ``connection.backoff.ms`` apart; the last failure becomes a
``ConnectException`` naming the database (never the password) and what to check.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from odradek.connect.errors import ConnectException
from odradek.connect.jdbc.jdbc_dialects import Dialect, dialect_for
from odradek.connect.jdbc.jdbc_url import parse_connection_url

log = logging.getLogger(__name__)


def open_connection(config: dict[str, Any], autocommit: bool = False) -> tuple[Dialect, Any]:
    target = parse_connection_url(
        config["connection.url"], config["connection.user"], config["connection.password"]
    )
    dialect = dialect_for(target)
    attempts = config["connection.attempts"]
    for attempt in range(1, attempts + 1):
        try:
            conn = dialect.connect(autocommit)
        except Exception as exc:  # noqa: BLE001 - each driver has its own error classes
            if attempt == attempts:
                raise ConnectException(
                    f"could not connect to {target.describe()} after {attempts} attempt(s): {exc}; "
                    "check connection.url, connection.user and connection.password and that the database is up"
                ) from exc
            log.warning(
                "connecting to %s failed (%s); attempt %d of %d", target.describe(), exc, attempt, attempts
            )
            time.sleep(config["connection.backoff.ms"] / 1000)
            continue
        return dialect, conn
    raise AssertionError("unreachable")
