"""The SASL exchange of one connection, as the network layer runs it before any request
reaches a handler (Kafka's ``SaslServerAuthenticator``; KIP-43, KIP-152, KIP-368).

Theory of operation. A connection on a SASL listener starts in ``handshake``: it may ask
ApiVersions (answered by its handler as usual: ``PASS``) and must then send SaslHandshake
naming a mechanism the listener enables. With SaslHandshake v1 the tokens then travel in
SaslAuthenticate requests (``authenticate``); with v0 they travel as bare size-prefixed
frames (``raw``). When the mechanism's exchange completes the connection is ``complete``
and carries the authenticated principal; with ``connections.max.reauth.ms`` the session
has a lifetime, told to the client in SaslAuthenticate v1+, after which any request other
than a new SaslHandshake closes the connection. A re-authentication must keep the same
principal; requests that arrive while it runs are served under the current one. Anything
out of order, an unknown mechanism, a failed exchange or an oversized token ends the
connection (after the error response, when there is one); the reason is logged without
secrets. A failed exchange (wrong credentials) is closed only after
``connection.failed.authentication.delay.ms``, as Kafka does, to slow password guessing.

``receive(header, payload)`` returns one of ``PASS`` (let the request through),
``Reply(frame)`` or ``Close(reason, frame_or_None)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.security.listener_security import ListenerSecurity
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl_mechanisms import (
    SCRAM_MECHANISMS,
    PlainServer,
    SaslFailure,
    ScramCredential,
    ScramServer,
)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
PASS = object()


@dataclass(slots=True)
class Reply:
    frame: bytes


@dataclass(slots=True)
class Close:
    reason: str
    frame: bytes | None = None
    # Wrong credentials (not a protocol error): the close waits
    # connection.failed.authentication.delay.ms, slowing a client that guesses passwords.
    delay_s: float = 0.0


class SaslAuthenticator:
    def __init__(
        self,
        security: ListenerSecurity,
        scram_lookup: Callable[[str, str], ScramCredential | None],
        prefix: str = "User:",
    ):
        self.security = security
        self._scram_lookup = scram_lookup
        self.state = "handshake"
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None  # monotonic seconds
        self._server = None
        self._prefix = prefix

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def intercepts(self, api_key: int) -> bool:
        """Whether a request must go through the authenticator rather than to its handler:
        every request until the first exchange completes; then the SASL requests of a
        re-authentication (other requests keep the current principal meanwhile), and any
        request once the session has expired."""
        if api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE or self.principal is None:
            return True
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def receive_raw(self, payload) -> Reply | Close:
        """A bare token after SaslHandshake v0."""
        if len(payload) > self.security.max_receive_size:
            return Close(f"SASL token of {len(payload)} bytes exceeds sasl.server.max.receive.size")
        try:
            out = self._server.step(bytes(payload))
        except SaslFailure as exc:
            return self._failed(f"SASL authentication failed ({self.mechanism}): {exc}")
        if self._server.complete:
            self._finish()
        return Reply(messages.size_prefix(len(out)) + out)

    def receive(self, header, payload, pos: int):
        if self.state == "raw":
            return self.receive_raw(payload)
        if len(payload) > self.security.max_receive_size:
            return Close(f"request of {len(payload)} bytes before authentication exceeds sasl.server.max.receive.size")
        key = header.api_key
        if self.principal is not None and key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return Close(f"SASL session of {self.principal} expired (connections.max.reauth.ms); the client did not re-authenticate")
        if self.state == "handshake" and key == API_VERSIONS:
            return PASS
        if key == SASL_HANDSHAKE and self.state in ("handshake", "complete"):
            if self.state == "complete" and header.api_version < 1:
                return Close("re-authentication needs SaslHandshake v1 or later (KIP-368)")
            return self._handshake(header, payload, pos)
        if key == SASL_AUTHENTICATE and self.state == "authenticate":
            return self._authenticate(header, payload, pos)
        return Close(
            f"unexpected {messages.api_name(key)} request in SASL state {self.state}; "
            "expected " + {"handshake": "ApiVersions or SaslHandshake", "authenticate": "SaslAuthenticate"}.get(self.state, "SaslHandshake")
        )

    def _decode(self, header, payload, pos):
        try:
            return messages.decode_request_body(header, payload, pos)
        except messages.MalformedRequest as exc:
            raise _Malformed(str(exc)) from None

    def _handshake(self, header, payload, pos):
        if header.api_version > 1:
            return Close(f"unsupported SaslHandshake version {header.api_version}")
        try:
            body = self._decode(header, payload, pos)
        except _Malformed as exc:
            return Close(f"malformed SaslHandshake: {exc}")
        mechanism = body.mechanism
        enabled = list(self.security.sasl_mechanisms)
        if self.state == "complete" and mechanism != self.mechanism:
            code, reason = ErrorCode.illegal_sasl_state, f"re-authentication must use {self.mechanism}, not {mechanism}"
        elif mechanism not in enabled:
            code, reason = ErrorCode.unsupported_sasl_mechanism, f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})"
        else:
            code, reason = ErrorCode.none, ""
        frame = _response(SASL_HANDSHAKE, header, {"error_code": code, "mechanisms": enabled})
        if code != ErrorCode.none:
            return Close(reason, frame)
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = "authenticate" if header.api_version >= 1 else "raw"
        return Reply(frame)

    def _new_server(self, mechanism: str):
        if mechanism == "PLAIN":
            users = self.security.plain_users

            def check(user: str, password: str) -> bool:
                expected = users.get(user)
                return expected is not None and _equal(expected, password)

            return PlainServer(check)
        assert mechanism in SCRAM_MECHANISMS
        return ScramServer(mechanism, lambda user: self._scram_lookup(user, mechanism))

    def _authenticate(self, header, payload, pos):
        try:
            body = self._decode(header, payload, pos)
        except _Malformed as exc:
            return Close(f"malformed SaslAuthenticate: {exc}")
        try:
            out = self._server.step(body.auth_bytes)
        except SaslFailure as exc:
            frame = _response(
                SASL_AUTHENTICATE,
                header,
                {"error_code": ErrorCode.sasl_authentication_failed, "error_message": str(exc), "auth_bytes": b"", "session_lifetime": 0},
            )
            return self._failed(f"SASL authentication failed ({self.mechanism}): {exc}", frame)
        lifetime = 0
        if self._server.complete:
            previous = self.principal
            self._finish()
            if previous is not None and previous != self.principal:
                frame = _response(
                    SASL_AUTHENTICATE,
                    header,
                    {
                        "error_code": ErrorCode.sasl_authentication_failed,
                        "error_message": "re-authentication changed the principal",
                        "auth_bytes": b"",
                        "session_lifetime": 0,
                    },
                )
                return self._failed(f"re-authentication as {self.principal} on a connection of {previous}", frame)
            lifetime = self.security.reauth_ms
        frame = _response(
            SASL_AUTHENTICATE,
            header,
            {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": out, "session_lifetime": lifetime},
        )
        return Reply(frame)

    def _failed(self, reason: str, frame: bytes | None = None) -> Close:
        return Close(reason, frame, self.security.failed_authentication_delay_ms / 1000)

    def _finish(self) -> None:
        self.principal = self._prefix + self._server.principal
        self.state = "complete"
        self._server = None
        reauth = self.security.reauth_ms
        self.expires_at = time.monotonic() + reauth / 1000 if reauth > 0 else None


class _Malformed(Exception):
    pass


def _equal(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


def _response(api_key: int, header, data: dict) -> bytes:
    entity = messages.build_response(api_key, header.api_version, data)
    return messages.encode_response(api_key, header.api_version, header.correlation_id, entity)
