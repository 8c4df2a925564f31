"""How a connection secures itself: TLS context, SASL mechanism and credentials, from the
client's (Kafka-named) settings, and the SASL exchange a connection runs after ApiVersions.

Settings (Kafka's client names; librdkafka's and kafka-python's spellings accepted):
``security.protocol`` PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL; ``ssl.ca.location`` /
``ssl.truststore.location`` (PEM CA certificates; default: the system's);
``ssl.certificate.location`` + ``ssl.key.location`` or ``ssl.keystore.location`` (PEM chain
and key) with ``ssl.key.password``; ``ssl.endpoint.identification.algorithm`` (``https``
checks the broker's host name, empty does not); ``sasl.mechanism`` PLAIN | SCRAM-SHA-256 |
SCRAM-SHA-512 with ``sasl.username``/``sasl.password`` or a ``sasl.jaas.config`` line.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from odradek.protocol.sasl_mechanisms import SCRAM_MECHANISMS, PlainClient, ScramClient

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


@dataclass(frozen=True)
class ConnectionSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None

    def sasl_client(self):
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)

    def __repr__(self) -> str:
        return f"ConnectionSecurity({self.protocol}, mechanism={self.mechanism}, user={self.username})"


def client_ssl_context(
    cafile: str | None,
    certfile: str | None,
    keyfile: str | None,
    key_password: str | None,
    check_hostname: bool,
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = check_hostname
    if certfile:
        ctx.load_cert_chain(certfile, keyfile or None, password=key_password)
    return ctx
