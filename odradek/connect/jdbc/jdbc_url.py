"""``connection.url`` as Confluent's JDBC connector users write it, turned into driver arguments.

Accepted forms (anything else is a ConfigError naming ``connection.url``):

- ``jdbc:postgresql://host[:port]/database[?user=…&password=…&…]`` (and ``jdbc:postgresql:database``,
  ``jdbc:postgresql://host/``), as the PostgreSQL JDBC driver reads them; also libpq's own
  ``postgresql://…`` / ``postgres://…`` URIs. Query parameters other than the user and password
  pass through to libpq (``sslmode``, ``connect_timeout``, ``application_name``…).
- ``jdbc:sqlite:path`` (``jdbc:sqlite::memory:`` for a private in-memory database), as the
  xerial SQLite driver reads them; also ``sqlite:path``.

``connection.user`` / ``connection.password`` win over the URL's user and password, as in Confluent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from odradek.config_def import ConfigError

URL_KEY = "connection.url"
FORMS = "jdbc:postgresql://host:port/database or jdbc:sqlite:path"


@dataclass(frozen=True)
class ConnectionTarget:
    """Which dialect, and the arguments its driver connects with."""

    dialect: str  # "postgresql" or "sqlite"
    params: dict[str, str] = field(default_factory=dict)  # libpq keywords, or {"path": …} for SQLite

    def describe(self) -> str:
        """The URL without its password, for log lines and errors."""
        if self.dialect == "sqlite":
            return f"jdbc:sqlite:{self.params['path']}"
        p = self.params
        return f"jdbc:postgresql://{p.get('host', 'localhost')}:{p.get('port', '5432')}/{p.get('dbname', '')}"


def parse_connection_url(
    url: str | None, user: str | None = None, password: str | None = None
) -> ConnectionTarget:
    if not url or not url.strip():
        raise ConfigError(f"{URL_KEY}: required; give {FORMS}", URL_KEY)
    text = url.strip()
    lowered = text.lower()
    if lowered.startswith("jdbc:"):
        text, lowered = text[5:], lowered[5:]
    if lowered.startswith("sqlite:"):
        path = text[len("sqlite:") :]
        if path.startswith("//"):  # sqlite:///abs/path, SQLAlchemy's spelling
            path = path[2:]
        if not path:
            raise ConfigError(f"{URL_KEY}: {url!r} names no SQLite file; expected jdbc:sqlite:path", URL_KEY)
        return ConnectionTarget("sqlite", {"path": path})
    for scheme in ("postgresql:", "postgres:"):
        if lowered.startswith(scheme):
            return _postgres(url, text[len(scheme) :], user, password)
    raise ConfigError(
        f"{URL_KEY}: {url!r} is not a database Odradek's JDBC connector speaks; expected {FORMS}", URL_KEY
    )


def _postgres(url: str, rest: str, user: str | None, password: str | None) -> ConnectionTarget:
    params: dict[str, str] = {}
    if rest.startswith("//"):
        parts = urlsplit("postgresql:" + rest)
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"{URL_KEY}: {url!r} has an invalid port", URL_KEY) from None
        if parts.hostname:
            params["host"] = parts.hostname
        if port:
            params["port"] = str(port)
        if parts.username:
            params["user"] = unquote(parts.username)
        if parts.password:
            params["password"] = unquote(parts.password)
        database = unquote(parts.path.lstrip("/"))
        query = parts.query
    else:  # jdbc:postgresql:database[?…]
        database, _, query = rest.partition("?")
    if database:
        params["dbname"] = database
    for key, value in parse_qsl(query, keep_blank_values=True):
        params[key] = value
    if user:
        params["user"] = user
    if password:
        params["password"] = password
    return ConnectionTarget("postgresql", params)
