"""A small blocking client of a registry's REST API, with the caches serializers need.

Used by the serializers (``avro_serde``); ids and schemas never change once registered,
so each is asked for once per client. Errors raise ``RegistryError`` with Confluent's code.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request

from .registry_errors import RegistryError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClient:
    def __init__(self, url: str, timeout: float = 30.0, user_info: str | None = None):
        """``user_info``: ``user:password`` for HTTP basic authentication (Confluent's
        ``basic.auth.user.info``)."""
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if user_info:
            self._headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        self._lock = threading.Lock()
        self._schemas: dict[int, dict] = {}
        self._ids: dict[tuple[str, str], int] = {}

    def request(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
                raise RegistryError(exc.code, int(answer["error_code"]), str(answer["message"])) from None
            except (ValueError, KeyError, TypeError):
                raise RegistryError(exc.code, exc.code, f"HTTP {exc.code} from {self.url}{path}") from None
        except urllib.error.URLError as exc:
            raise RegistryError(503, 50001, f"cannot reach the registry at {self.url}: {exc.reason}") from None

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """The schema's id under ``subject``, registering it if need be (cached)."""
        return self._id(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", subject, schema, schema_type)

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """The id of a schema already registered under ``subject`` (40401/40403 if not)."""
        return self._id(f"/subjects/{urllib.parse.quote(subject, safe='')}", subject, schema, schema_type)

    def _id(self, path: str, subject: str, schema: str, schema_type: str) -> int:
        key = (subject, schema)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        body = {"schema": schema} if schema_type == "AVRO" else {"schema": schema, "schemaType": schema_type}
        schema_id = int(self.request("POST", path, body)["id"])
        with self._lock:
            self._ids[key] = schema_id
        return schema_id

    def schema(self, schema_id: int) -> dict:
        """``{"schema", "schemaType"?, "references"?}`` of an id (cached)."""
        with self._lock:
            if schema_id in self._schemas:
                return self._schemas[schema_id]
        found = self.request("GET", f"/schemas/ids/{schema_id}")
        with self._lock:
            self._schemas[schema_id] = found
        return found
