"""SASL mechanisms as sans-IO exchanges: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802,
RFC 7677), both sides. Bytes in, bytes out; no sockets, no storage.

A server exchange is ``step(client_message) -> server_message``; it raises ``SaslFailure`` with
a message that never contains a secret, and sets ``principal`` (the authenticated user name)
once the exchange is complete. A client exchange is ``first()`` then ``step(server_message)``.

SCRAM credentials (``ScramCredential``) hold the salt, the iteration count and the stored and
server keys, never the password; ``ScramCredential.from_password`` makes them (what
AlterUserScramCredentials' ``salted_password`` is the middle of). Kafka's rules: user names in
SCRAM are escaped with ``=2C``/``=3D``; channel binding is not supported (gs2 header ``n,,``);
the extension ``tokenauth`` is refused; iterations must be 4096..16384.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MIN_ITERATIONS",
    "MAX_ITERATIONS",
    "SCRAM_MECHANISMS",
    "PlainClient",
    "PlainServer",
    "SaslFailure",
    "ScramClient",
    "ScramCredential",
    "ScramServer",
]

SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class SaslFailure(Exception):
    """The exchange failed; the message is safe to log and to send to the client."""


# -- PLAIN -----------------------------------------------------------------------------------


class PlainServer:
    """PLAIN: one message ``authzid NUL authcid NUL passwd``, checked by ``check(user, password)``."""

    def __init__(self, check: Callable[[str, str], bool]):
        self._check = check
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def step(self, message: bytes) -> bytes:
        parts = bytes(message).split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens separated by NUL")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from username")
        if not self._check(user, password):
            raise SaslFailure(f"Authentication failed: Invalid username or password for user {user}")
        self.principal = user
        return b""


class PlainClient:
    def __init__(self, user: str, password: str):
        self.user, self.password = user, password

    def first(self) -> bytes:
        return b"\x00" + self.user.encode() + b"\x00" + self.password.encode()

    def step(self, message: bytes) -> bytes | None:
        return None


# -- SCRAM -----------------------------------------------------------------------------------


def _hmac(algo: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algo).digest()


def _h(algo: str, data: bytes) -> bytes:
    return hashlib.new(algo, data).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(algo: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(algo, password, salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802 section 3)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, iterations: int, salted: bytes) -> ScramCredential:
        algo = SCRAM_MECHANISMS[mechanism]
        client_key = _hmac(algo, salted, b"Client Key")
        return cls(mechanism, salt, iterations, _h(algo, client_key), _hmac(algo, salted, b"Server Key"))

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = 4096, salt: bytes | None = None
    ) -> ScramCredential:
        algo = SCRAM_MECHANISMS[mechanism]
        salt = salt if salt is not None else os.urandom(32)
        return cls.from_salted_password(
            mechanism, salt, iterations, salted_password(algo, password.encode(), salt, iterations)
        )

    def to_text(self) -> str:
        """Kafka's ZooKeeper form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, mechanism: str, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        b64d = base64.b64decode
        return cls(
            mechanism,
            b64d(fields["salt"]),
            int(fields["iterations"]),
            b64d(fields["stored_key"]),
            b64d(fields["server_key"]),
        )


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i : i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise SaslFailure("Invalid SCRAM username encoding")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _attributes(message: str) -> dict[str, str]:
    attrs = {}
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=":
            raise SaslFailure(f"Invalid SCRAM message attribute {item[:16]!r}")
        attrs[item[0]] = item[2:]
    return attrs


def _nonce() -> str:
    return base64.b64encode(os.urandom(18)).decode().replace(",", "-")


class ScramServer:
    """The server side of one SCRAM exchange: client-first → server-first, client-final →
    server-final. ``lookup(user)`` returns the user's ``ScramCredential`` or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]):
        self.mechanism = mechanism
        self._algo = SCRAM_MECHANISMS[mechanism]
        self._lookup = lookup
        self._state = "first"
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def step(self, message: bytes) -> bytes:
        try:
            text = bytes(message).decode()
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise SaslFailure(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",,")
        if not sep or gs2 not in ("n", "y"):
            raise SaslFailure("Invalid SCRAM client-first message: channel binding is not supported")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise SaslFailure("Invalid SCRAM client-first message: user name and nonce required")
        if "m" in attrs:  # extensions (tokenauth=...) already fail as attributes
            raise SaslFailure("SCRAM extensions (delegation tokens) are not supported")
        user = _unescape(attrs["n"])
        self._credential = self._lookup(user)
        self._user = user
        # An unknown user goes on with made-up parameters, so the failure comes at the
        # proof and does not tell who exists.
        cred = self._credential or ScramCredential.from_password(self.mechanism, _nonce())
        self._nonce = attrs["r"] + _nonce()
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise SaslFailure("Invalid SCRAM client-final message: no proof")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            self._state = "failed"
            raise SaslFailure("Invalid SCRAM client-final message: the nonce does not match the server's")
        if attrs.get("c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            self._state = "failed"
            raise SaslFailure("Invalid SCRAM client-final message: channel binding is not supported")
        cred = self._credential
        self._state = "failed"
        if cred is None:
            raise SaslFailure(f"Authentication failed: Invalid user credentials for user {self._user}")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise SaslFailure("Invalid SCRAM client-final message: proof is not base64") from None
        signature = _hmac(self._algo, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailure(f"Authentication failed: Invalid client credentials for user {self._user}")
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(_h(self._algo, client_key), cred.stored_key):
            raise SaslFailure(f"Authentication failed: Invalid client credentials for user {self._user}")
        self._state = "done"
        self.principal = self._user
        server_signature = _hmac(self._algo, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side: ``first()``, ``step(server_first)`` → client-final,
    ``step(server_final)`` → None (raises ``SaslFailure`` if the server's signature is wrong)."""

    def __init__(self, mechanism: str, user: str, password: str):
        self._algo = SCRAM_MECHANISMS[mechanism]
        self._user, self._password = user, password
        self._state = "first"

    def first(self) -> bytes:
        self._nonce = _nonce()
        self._bare = f"n={_escape(self._user)},r={self._nonce}"
        self._state = "server-first"
        return ("n,," + self._bare).encode()

    def step(self, message: bytes) -> bytes | None:
        text = bytes(message).decode()
        if self._state == "server-first":
            attrs = _attributes(text)
            if not attrs.get("r", "").startswith(self._nonce):
                raise SaslFailure("the server's nonce does not extend ours")
            salted = salted_password(
                self._algo, self._password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
            )
            without_proof = f"c=biws,r={attrs['r']}"
            auth_message = f"{self._bare},{text},{without_proof}".encode()
            client_key = _hmac(self._algo, salted, b"Client Key")
            signature = _hmac(self._algo, _h(self._algo, client_key), auth_message)
            self._expected = _hmac(self._algo, _hmac(self._algo, salted, b"Server Key"), auth_message)
            self._state = "server-final"
            return f"{without_proof},p={base64.b64encode(_xor(client_key, signature)).decode()}".encode()
        if self._state == "server-final":
            attrs = _attributes(text)
            if "e" in attrs:
                raise SaslFailure(f"the server refused: {attrs['e']}")
            if base64.b64decode(attrs.get("v", "")) != self._expected:
                raise SaslFailure("the server's signature is wrong")
            self._state = "done"
            return None
        raise SaslFailure(f"unexpected server message in state {self._state}")
